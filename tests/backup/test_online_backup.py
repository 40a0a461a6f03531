"""An online backup while clients write, then the data directory wiped and the archive restored: every write
acknowledged before the backup began is back, the graph opens and search finds them."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

from appliance.backup import archive
from tests.appliance_process import cli_env, kumiho_ce
from tests.backup.helpers import backup_now, found, store
from tests.inprocess import serve_in_process


def test_a_backup_under_concurrent_writes_restores_every_write_acknowledged_before_it_began(tmp_path: Path) -> None:
    data = tmp_path / "data"
    acknowledged: list[tuple[float, str, str]] = []  # (when the answer came, marker, item kref)
    stop = threading.Event()
    failures: list[BaseException] = []
    with serve_in_process(data, None) as app:
        services = app.services
        for n in range(10):
            acknowledged.append((time.monotonic(), f"seed{n}x", store(services, f"seed{n}x")))

        def write(worker: int) -> None:
            n = 0
            try:
                while not stop.is_set():
                    marker = f"w{worker}n{n}x"
                    kref = store(services, marker)
                    acknowledged.append((time.monotonic(), marker, kref))
                    n += 1
            except BaseException as exc:  # pragma: no cover - reported below
                failures.append(exc)

        writers = [threading.Thread(target=write, args=(w,)) for w in range(2)]
        for thread in writers:
            thread.start()
        try:
            while len(acknowledged) < 20 and not failures:
                time.sleep(0.01)
            began = time.monotonic()
            job = backup_now(app)
            count_at_end = len(acknowledged)
            while len(acknowledged) < count_at_end + 4 and not failures:  # writes go on after it
                time.sleep(0.01)
        finally:
            stop.set()
            for thread in writers:
                thread.join(60)
        assert not failures, failures
        saved = tmp_path / "saved.tar.gz"
        shutil.copyfile(services.backups.path_of(job["result"]["name"]), saved)
        assert job["result"]["writes_held_seconds"] >= 0
    manifest = archive.verify(saved)
    shutil.rmtree(data)  # everything gone: graph, index, artifacts, working memory, token

    done = kumiho_ce("restore", "--yes", str(saved), env=cli_env(data))
    assert done.returncode == 0, done.stderr
    assert "restored saved.tar.gz" in done.stdout

    before = [(marker, kref) for at, marker, kref in acknowledged if at < began]
    after_backup = [(marker, kref) for at, marker, kref in acknowledged[count_at_end:]]
    assert len(before) >= 20 and after_backup
    with serve_in_process(data, None) as app:
        services = app.services
        assert services.graph.stats()["items"] == manifest.counts["items"]
        assert services.index_worker.wait_idle(60)
        missing = [marker for marker, kref in before if kref not in found(services, marker)]
        assert not missing, f"acknowledged before the backup began, yet not found after the restore: {missing}"
        # the archive is a cut in time: writes acknowledged after the backup finished are not in it
        assert services.graph.stats()["items"] < len(acknowledged)
        assert after_backup[-1][1] not in found(services, after_backup[-1][0])


def test_the_restored_appliance_takes_new_writes_and_finds_them(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serve_in_process(data, None) as app:
        kept = store(app.services, "keptx")
        saved = tmp_path / "saved.tar.gz"
        shutil.copyfile(app.services.backups.path_of(backup_now(app)["result"]["name"]), saved)
        store(app.services, "droppedx")
    done = kumiho_ce("restore", "--yes", str(saved), env=cli_env(data))
    assert done.returncode == 0, done.stderr
    aside = [p for p in data.iterdir() if p.name.startswith("pre-restore-")]
    assert len(aside) == 1 and (aside[0] / "graph" / "graph.kuzu").is_file()  # the replaced data is kept
    with serve_in_process(data, None) as app:
        services = app.services
        new = store(services, "newx")
        assert services.index_worker.wait_idle(60)
        assert kept in found(services, "keptx")
        assert new in found(services, "newx")
        assert not any("dropped" in kref for kref in found(services, "droppedx"))
