"""Taking a consistent cut of the data directory into a staging directory, while the appliance serves.

The order is what makes the cut consistent without stopping anything:

1. The index worker is paused (it is the index's only writer, and the only one that sets the graph's outbox
   flags): the index is copied, and stays as copied until step 3.
2. Inside one hold of the graph's single writer (writes queue, reads go on) the graph is checkpointed and its
   files copied, the artifact files are hard-linked (instant; copied where linking fails) and the graph's
   counts read. Every write acknowledged before the hold began is in the copy; artifact files are written
   before the commit that names them, so every file the copied graph names is there.
3. The index worker resumes. Because it was paused across both copies, the copied outbox flags say exactly
   which revisions the copied index lacks: the first index round after a restore writes them.
4. Working memory is copied with SQLite's online backup (its own consistent cut; it is independent of the
   graph), and the effective configuration is written without any credential.

The staging directory is inside the data directory, so that hard links work; it is removed once the archive
is written.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sqlite3
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import tomli_w
from pydantic import BaseModel, SecretStr

from appliance.backup.archive import CONFIG
from appliance.config import Settings
from appliance.datadir import DataDir
from appliance.fsutil import TEMP_SUFFIX
from appliance.graph.engine import Tx

log = logging.getLogger(__name__)
T = TypeVar("T")
STAGING_PREFIX = ".backup-staging-"
_COUNTED = {"Project": "projects", "Space": "spaces", "Item": "items", "Revision": "revisions",
            "Artifact": "artifacts", "Event": "events"}


@dataclass(frozen=True)
class Sources:
    """Where a backup reads from: the running appliance's stores (``online``), or a data directory whose graph
    is open but which serves nothing yet (``offline``: the snapshot before a schema migration)."""

    data_dir: DataDir
    settings: Settings
    hold_graph: Callable[[Callable[[Tx], Any]], Any]  # run a job while no graph write commits
    index_paused: Callable[[], AbstractContextManager[None]]
    copy_working: Callable[[Path], None]  # write a consistent copy of working memory to the given file


def online(services: Any) -> Sources:
    """The running appliance's stores (``services``: appliance.app.Services)."""
    return Sources(services.data_dir, services.settings, services.graph.hold_writes, services.index_worker.paused,
                   services.working.backup_to)


def offline(data_dir: DataDir, settings: Settings, hold_graph: Callable[[Callable[[Tx], Any]], Any]) -> Sources:
    """A data directory this process owns and nothing else writes to: no index worker runs, working memory is
    not open (its file is copied through SQLite all the same, so a leftover write-ahead log is included)."""
    return Sources(data_dir, settings, hold_graph, contextlib.nullcontext, _sqlite_copier(data_dir))


def _sqlite_copier(data_dir: DataDir) -> Callable[[Path], None]:
    def copy(target: Path) -> None:
        source = data_dir.root / "working" / "working.sqlite3"
        if not source.exists():
            return
        with contextlib.closing(sqlite3.connect(source)) as conn, contextlib.closing(sqlite3.connect(target)) as out:
            conn.backup(out)
    return copy


@dataclass(frozen=True)
class Cut:
    """What ``capture`` staged, and how long it held the stores."""

    staging: Path
    schema_version: int
    counts: dict[str, int]
    timings: dict[str, float]  # seconds: index_paused, writes_held, working, total
    notes: dict[str, str]


def capture(sources: Sources) -> Cut:
    """Stage a consistent copy of graph, index, artifacts, working memory and configuration (see the module)."""
    root = sources.data_dir.root
    remove_stale_staging(root)
    staging = root / f"{STAGING_PREFIX}{uuid.uuid4().hex[:12]}"
    staging.mkdir(mode=0o700)
    began = time.perf_counter()
    held: dict[str, Any] = {}
    try:
        with sources.index_paused():
            paused_at = time.perf_counter()
            _copy_tree(root / "index", staging / "index")

            def in_hold(tx: Tx) -> None:
                started = time.perf_counter()
                held["wal"] = _copy_graph(sources.data_dir, staging / "graph")
                held["linked"] = _link_tree(root / "artifacts", staging / "artifacts")
                held["version"], held["counts"] = _version_and_counts(tx)
                held["seconds"] = time.perf_counter() - started

            sources.hold_graph(in_hold)
            index_paused = time.perf_counter() - paused_at
        working_began = time.perf_counter()
        (staging / "working").mkdir(mode=0o700)
        sources.copy_working(staging / "working" / "working.sqlite3")
        working = time.perf_counter() - working_began
        (staging / CONFIG).write_text(settings_without_secrets(sources.settings))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    counts = dict(held["counts"])
    counts["index_files"] = sum(1 for _ in _files(staging / "index"))
    counts["artifact_files"] = sum(1 for _ in _files(staging / "artifacts"))
    notes = {"graph": "checkpointed" if not held["wal"] else
             "the write-ahead log is included (readers kept the checkpoint from running); it is replayed on open"}
    return Cut(staging, held["version"], counts,
               {"index_paused": index_paused, "writes_held": held["seconds"], "working": working,
                "total": time.perf_counter() - began}, notes)


def remove_stale_staging(root: Path) -> None:
    """Staging directories a crash left behind (one backup runs at a time: the caller serialises them)."""
    for stale in root.glob(f"{STAGING_PREFIX}*"):
        shutil.rmtree(stale, ignore_errors=True)


def _copy_graph(data_dir: DataDir, target: Path) -> bool:
    """Copy the database file (and its write-ahead log when the checkpoint could not run); True when a log was
    copied."""
    target.mkdir(mode=0o700)
    source = data_dir.graph_path
    shutil.copyfile(source, target / source.name)
    wal = source.with_name(source.name + ".wal")
    if wal.exists() and wal.stat().st_size > 0:
        shutil.copyfile(wal, target / wal.name)
        return True
    return False


def _copy_tree(source: Path, target: Path) -> None:
    if source.is_dir():
        shutil.copytree(source, target, copy_function=shutil.copyfile)
    else:
        target.mkdir(mode=0o700)


def _link_tree(source: Path, target: Path) -> int:
    """Hard-link every finished file under ``source`` into ``target`` (artifact files are never changed in
    place: a write goes to a temporary file renamed over the name, so a link keeps the content as of now).
    Copies where linking fails (another file system, a file system without links). Returns files linked."""
    target.mkdir(mode=0o700)
    linked = 0
    for path in _files(source):
        if path.name.endswith(TEMP_SUFFIX):
            continue  # a write in flight: not committed, so nothing in the copied graph names it
        destination = target / path.relative_to(source)
        destination.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        try:
            os.link(path, destination)
            linked += 1
        except FileNotFoundError:
            continue  # deleted since the directory was listed (its revision was deleted before the hold)
        except OSError:
            shutil.copyfile(path, destination)
    return linked


def _files(root: Path) -> Iterator[Path]:
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        for name in sorted(files):
            yield Path(folder) / name


def _version_and_counts(tx: Tx) -> tuple[int, dict[str, int]]:
    tables = {row[0] for row in tx.rows("CALL show_tables() RETURN name")}
    version = int(tx.scalar("MATCH (m:SchemaMigration) RETURN coalesce(max(m.version), 0)") or 0) \
        if "SchemaMigration" in tables else 0
    counts = {name: int(tx.scalar(f"MATCH (n:{table}) RETURN count(n)") or 0)
              for table, name in _COUNTED.items() if table in tables}
    return version, counts


def settings_without_secrets(settings: Settings) -> str:
    """The effective configuration as TOML with every credential (each secret-typed setting) left out: not
    masked, absent, so an archive never carries one, not even its length."""
    return "# the configuration of the appliance this backup was made from; credentials are left out\n" + \
        tomli_w.dumps(_plain(settings))


def _plain(model: BaseModel) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for name in type(model).model_fields:
        value = getattr(model, name)
        if value is None or isinstance(value, SecretStr):
            continue
        if isinstance(value, BaseModel):
            data[name] = _plain(value)
        else:
            data[name] = _drop_none(model.model_dump(mode="json", include={name})[name])
    return data


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value if v is not None]
    return value
