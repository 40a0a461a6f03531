"""Scheduled snapshots and their rotation, the snapshot directory, auto_hydrate, and the snapshot before a schema
migration (refused migration when it cannot be written). Each ``[memory]`` snapshot setting has a test here that
fails when its effect is removed."""

from __future__ import annotations

import logging
import time
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from appliance.backup import archive
from appliance.backup.snapshots import before_migration
from appliance.backup.store import list_archives
from appliance.config import load_settings
from appliance.datadir import DataDir
from appliance.errors import DataDirError
from appliance.graph import schema
from appliance.graph.engine import KuzuEngine
from tests.backup.helpers import found, store
from tests.fixtures.make_fixture import unpack
from tests.inprocess import serve_in_process

FIXTURES = Path(__file__).parent.parent / "fixtures"


def _wait(condition: object, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_snapshot_enabled_takes_snapshots_as_jobs_and_snapshot_keep_rotates_them(tmp_path: Path) -> None:
    """snapshot_enabled, snapshot_interval_hours (≈0.4 s here), snapshot_keep."""
    memory = {"snapshot_enabled": True, "snapshot_interval_hours": 0.0001, "snapshot_keep": 2}
    with serve_in_process(tmp_path / "data", None, memory=memory) as app:
        services = app.services
        store(services, "snapx")
        _wait(lambda: len([j for j in services.jobs.list(kind="snapshot") if j.state == "done"]) >= 4)
        services.snapshots.stop()
        _wait(lambda: not services.jobs.busy())
        scheduled = [info for info in services.backups.listing() if info.reason == "snapshot"]
        assert len(scheduled) == 2  # four or more taken, the newest two kept
        assert all(info.counts["items"] == 1 for info in scheduled)
        assert all(job.state == "done" for job in services.jobs.list(kind="snapshot"))


def test_rotation_keeps_backups_made_on_request_and_upgrade_snapshots(tmp_path: Path) -> None:
    with serve_in_process(tmp_path / "data", None, memory={"snapshot_keep": 1}) as app:
        services = app.services
        store(services, "keepx")
        manual = services.backups.create("manual").path
        first = services.snapshots.take("snapshot")
        second = services.snapshots.take("snapshot")
        hygiene = services.snapshots.take("hygiene")  # what the hygiene pass takes with snapshot_on_hygiene
        names = {info.name for info in services.backups.listing()}
    assert manual.name in names and hygiene.name in names
    assert first.name not in names and second.name not in names  # snapshot_keep = 1: only the newest scheduled one


def test_snapshot_enabled_false_schedules_nothing(tmp_path: Path) -> None:
    with serve_in_process(tmp_path / "data", None, memory={"snapshot_interval_hours": 0.0001}) as app:
        assert not app.services.snapshots.scheduled
        assert app.services.snapshots.next_due() is None
        assert app.services.jobs.list(kind="snapshot") == []


def test_snapshot_interval_hours_counts_from_the_newest_snapshot(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serve_in_process(data, None) as app:
        taken = app.services.snapshots.take("snapshot")
    made = datetime.fromisoformat(archive.read_manifest(taken).created_at)
    memory = {"snapshot_enabled": True, "snapshot_interval_hours": 5}
    with serve_in_process(data, None, memory=memory) as app:
        assert app.services.snapshots.scheduled
        assert app.services.snapshots.next_due() == made + timedelta(hours=5)  # the restart did not reset it
        assert app.services.jobs.list(kind="snapshot") == []


def test_snapshot_dir_is_where_backups_and_snapshots_go(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    with serve_in_process(tmp_path / "data", None, memory={"snapshot_dir": str(elsewhere)}) as app:
        store(app.services, "dirx")
        path = app.services.snapshots.take("snapshot")
    assert path.parent == elsewhere and archive.verify(path).counts["items"] == 1
    assert not (tmp_path / "data" / "backups").exists()
    assert not list((tmp_path / "data").glob(".backup-staging-*"))  # staging removed


def _snapshot_of_one_memory(tmp_path: Path, snapshots: Path) -> str:
    with serve_in_process(tmp_path / "source", None, memory={"snapshot_dir": str(snapshots)}) as app:
        kref = store(app.services, "hydratex")
        app.services.snapshots.take("snapshot")
    return kref


def test_auto_hydrate_restores_the_newest_snapshot_into_an_empty_store(tmp_path: Path,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    snapshots = tmp_path / "snapshots"
    kref = _snapshot_of_one_memory(tmp_path, snapshots)
    caplog.set_level(logging.WARNING, logger="appliance.backup.restore")
    with serve_in_process(tmp_path / "empty", None, memory={"snapshot_dir": str(snapshots)}) as app:
        assert app.services.graph.stats()["items"] == 1
        assert app.services.index_worker.wait_idle(60)
        assert kref in found(app.services, "hydratex")
    assert "auto_hydrate: the data directory had no graph; restored the snapshot" in caplog.text


def test_auto_hydrate_false_starts_empty(tmp_path: Path) -> None:
    snapshots = tmp_path / "snapshots"
    _snapshot_of_one_memory(tmp_path, snapshots)
    memory = {"snapshot_dir": str(snapshots), "auto_hydrate": False}
    with serve_in_process(tmp_path / "empty", None, memory=memory) as app:
        assert app.services.graph.stats()["items"] == 0


def test_auto_hydrate_leaves_a_store_with_items_alone(tmp_path: Path) -> None:
    snapshots = tmp_path / "snapshots"
    _snapshot_of_one_memory(tmp_path, snapshots)
    data = tmp_path / "own"
    with serve_in_process(data, None, memory={"auto_hydrate": False}) as app:
        store(app.services, "ownx")
        store(app.services, "mine2x")
    with serve_in_process(data, None, memory={"snapshot_dir": str(snapshots)}) as app:
        assert app.services.graph.stats()["items"] == 2
    assert not list(data.glob("pre-restore-*"))


def test_auto_hydrate_leaves_a_graph_whose_memories_were_all_deleted_empty(tmp_path: Path) -> None:
    snapshots = tmp_path / "snapshots"
    _snapshot_of_one_memory(tmp_path, snapshots)
    data = tmp_path / "purged"
    with serve_in_process(data, None, memory={"auto_hydrate": False}) as app:
        kref = store(app.services, "gonex")
        app.services.perform("kumiho_delete_item", {"item_kref": kref, "force": True})
        assert app.services.graph.stats()["items"] == 0
    with serve_in_process(data, None, memory={"snapshot_dir": str(snapshots)}) as app:
        assert app.services.graph.stats()["items"] == 0  # deleted stays deleted: only a restore brings it back
    assert not list(data.glob("pre-restore-*"))


def test_auto_hydrate_skips_a_damaged_snapshot_for_an_older_good_one(tmp_path: Path,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    snapshots = tmp_path / "snapshots"
    with serve_in_process(tmp_path / "source", None, memory={"snapshot_dir": str(snapshots)}) as app:
        store(app.services, "olderx")
        app.services.snapshots.take("snapshot")
        store(app.services, "newerx")
        newest = app.services.snapshots.take("snapshot")
    raw = newest.read_bytes()
    newest.write_bytes(raw[: len(raw) * 2 // 3])  # its manifest still reads: it is the first candidate
    assert list_archives(snapshots)[0].name == newest.name
    caplog.set_level(logging.ERROR, logger="appliance.backup.restore")
    with serve_in_process(tmp_path / "empty", None, memory={"snapshot_dir": str(snapshots)}) as app:
        assert app.services.graph.stats()["items"] == 1  # the older snapshot's one memory
    assert f"the snapshot {newest} cannot be restored" in caplog.text


# -- the snapshot before a schema migration ---------------------------------------------------------------
_NEXT = schema.Migration(schema.LATEST_VERSION + 1, "a test table", ("CREATE NODE TABLE BackupProbe(id STRING "
                                                                     "PRIMARY KEY)",))


def _v1_data_dir(tmp_path: Path) -> DataDir:
    """A data directory with memories, its graph at the newest schema (the fixture is older: brought up to
    date here, so that _NEXT is the one migration left)."""
    data = tmp_path / "data"
    unpack(FIXTURES / "schema_v1.tar.xz", data)
    DataDir(data).ensure()
    engine = KuzuEngine(DataDir(data).graph_path, buffer_pool_mb=64)
    try:
        schema.migrate(engine)
    finally:
        engine.close()
    return DataDir(data)


def test_a_migration_takes_a_snapshot_first_and_says_where(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    data_dir = _v1_data_dir(tmp_path)
    settings = load_settings(data_dir=data_dir.root)
    caplog.set_level(logging.WARNING, logger="appliance.backup.snapshots")
    engine = KuzuEngine(data_dir.graph_path, buffer_pool_mb=64)
    try:
        applied = schema.migrate(engine, (*schema.MIGRATIONS, _NEXT), before=before_migration(settings, data_dir))
        assert applied == [_NEXT.version]
    finally:
        engine.close()
    snapshots = list_archives(data_dir.root / "backups")
    assert [s.reason for s in snapshots] == ["pre-migration"]
    assert snapshots[0].schema_version == schema.LATEST_VERSION  # the graph as it was, before the upgrade
    assert snapshots[0].counts["items"] >= 1
    assert str(data_dir.root / "backups" / snapshots[0].name) in caplog.text
    assert "upgrading the graph from schema version" in caplog.text


def test_no_migration_when_the_snapshot_cannot_be_written(tmp_path: Path) -> None:
    data_dir = _v1_data_dir(tmp_path)
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("a file where the snapshot directory should be")
    settings = load_settings(data_dir=data_dir.root, memory={"snapshot_dir": str(blocked)})
    engine = KuzuEngine(data_dir.graph_path, buffer_pool_mb=64)
    try:
        with pytest.raises(DataDirError, match=r"could not be written to .*nothing was changed"):
            schema.migrate(engine, (*schema.MIGRATIONS, _NEXT), before=before_migration(settings, data_dir))
        assert engine.read(schema.current_version) == schema.LATEST_VERSION
        tables = {row[0] for row in engine.read(lambda tx: tx.rows("CALL show_tables() RETURN name"))}
        assert "BackupProbe" not in tables
    finally:
        engine.close()
    assert not list(data_dir.root.glob(".backup-staging-*"))


def test_a_new_graph_is_created_without_a_snapshot(tmp_path: Path) -> None:
    with serve_in_process(tmp_path / "data", None) as app:
        assert app.services.backups.listing() == []  # nothing to upgrade: no snapshot
