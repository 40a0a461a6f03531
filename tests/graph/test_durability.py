"""Concurrency and durability: many writers, one owner per data directory, kill -9 mid-write."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from appliance.app import open_services
from appliance.config import load_settings
from appliance.datadir import DataDir
from appliance.errors import DataDirInUse
from appliance.graph import GraphStore

ROOT = Path(__file__).resolve().parents[2]
BATCH = 200


def test_many_threads_write_without_error_or_lost_writes(graph: GraphStore, space: str) -> None:
    shared = graph.create_item(space, "shared", "conversation").kref
    errors: list[BaseException] = []
    numbers: list[int] = []
    lock = threading.Lock()

    def writer(worker: int) -> None:
        try:
            own = graph.create_item(space, f"own{worker}", "conversation").kref
            for i in range(20):
                rev = graph.create_revision(shared, {"worker": str(worker), "i": str(i)})
                graph.create_revision(own)
                graph.tag_revision(rev.kref, "published")
                with lock:
                    numbers.append(rev.number)
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    def reader() -> None:
        try:
            for _ in range(50):
                graph.list_revisions(shared, page_size=5)
                graph.stats()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    threads += [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert sorted(numbers) == list(range(1, 161))
    assert graph.stats()["revisions"] == 320
    assert graph.get_revision(shared).number == 160
    assert len(graph.tag_history(shared, "published")) == 160


def test_a_failed_write_leaves_nothing_behind(graph: GraphStore, space: str) -> None:
    before = graph.stats()

    def half_then_fail(tx):  # type: ignore[no-untyped-def]
        tx.run("CREATE (:Project {name: 'Half', project_id: 'x', description: '', created_at: '', "
               "updated_at: '', deprecated: false, allow_public: false, metadata: '{}'})")
        raise RuntimeError("crash in the middle of a write")

    with pytest.raises(Exception, match="rolled back"):
        graph._engine.write(half_then_fail)
    assert graph.stats() == before


def test_a_second_owner_of_the_data_directory_is_refused(tmp_path: Path) -> None:
    with subprocess.Popen(
        [sys.executable, "-c", "import sys, time\n"
         "from appliance.app import open_services\nfrom appliance.config import load_settings\n"
         f"with open_services(load_settings(data_dir={str(tmp_path)!r})):\n"
         "    print('open', flush=True); time.sleep(60)"],
        cwd=ROOT, stdout=subprocess.PIPE, text=True,
    ) as holder:
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
            with pytest.raises(DataDirInUse) as caught, open_services(load_settings(data_dir=tmp_path)):
                pass
            assert caught.value.pid == holder.pid
            assert f"pid {holder.pid}" in caught.value.message and "Only one process" in caught.value.message
            assert DataDir(tmp_path).holder_pid() == holder.pid
        finally:
            holder.kill()
    assert DataDir(tmp_path).holder_pid() is None  # the kernel released the lock with the process


def _kill_mid_write(path: Path, commits_before_kill: int) -> int:
    """Run the crash writer until it reports some commits, kill -9 it; return the last batch it
    reported."""
    with subprocess.Popen([sys.executable, "-m", "tests.graph.crash_writer", str(path), str(BATCH)],
                          cwd=ROOT, stdout=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None
        last = -1
        try:
            for _ in range(commits_before_kill):
                line = child.stdout.readline()
                assert line, "the writer died before it was killed"
                last = int(line)
            os.kill(child.pid, signal.SIGKILL)
        finally:
            child.kill()
    return last


def _check_exactly_committed(path: Path, last_reported: int) -> int:
    with GraphStore.open(path, buffer_pool_mb=64, readers=1) as store:
        # one scan of every revision (the public listings would take a query per item)
        rows = store._engine.read(lambda tx: tx.rows("MATCH (r:Revision) RETURN r.metadata"))
    batches = Counter(json.loads(m)["batch"] for (m,) in rows)
    present = sorted(int(b) for b in batches)
    # every batch is whole (all or nothing), and batches are a prefix: all reported ones, plus at most
    # the one whose commit finished as the kill landed, before it could be reported
    assert all(count == BATCH for count in batches.values()), batches
    assert present == list(range(len(present)))
    assert len(present) - 1 in (last_reported, last_reported + 1)
    return len(present)


def _crash_cycles(tmp_path: Path, cycles: int) -> None:
    path = tmp_path / "graph.kuzu"
    rng = random.Random(7)
    for _ in range(cycles):
        last = _kill_mid_write(path, rng.randint(1, 4))
        _check_exactly_committed(path, last)


def test_kill_9_mid_bulk_write_keeps_exactly_the_committed_batches(tmp_path: Path) -> None:
    _crash_cycles(tmp_path, cycles=2)


@pytest.mark.long
def test_kill_9_over_many_cycles(tmp_path: Path) -> None:
    _crash_cycles(tmp_path, cycles=25)
