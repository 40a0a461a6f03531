"""The background index sync follows graph commits and survives failures without spinning."""

from __future__ import annotations

import time

from appliance.search.worker import IndexWorker
from tests.search.conftest import Stack


def test_commits_wake_the_sync_and_wait_idle_sees_them_indexed(stack: Stack) -> None:
    worker = IndexWorker(stack.sync, interval=60)  # only commits can wake it within the test
    worker.start()
    try:
        assert worker.wait_idle(30)
        stack.memory("/P/a", "fresh", "Fresh memory", "a note about zeppelins")
        assert worker.wait_idle(30)
        assert stack.graph.pending_count() == 0 and stack.index.count() == 1
    finally:
        worker.stop()


def test_a_failing_round_backs_off_instead_of_spinning(stack: Stack) -> None:
    calls: list[float] = []

    def broken(*_: object) -> int:
        calls.append(time.monotonic())
        raise RuntimeError("index unavailable")

    stack.sync.run_pending = broken  # type: ignore[method-assign]
    worker = IndexWorker(stack.sync, interval=0.2)
    worker.start()
    try:
        stack.memory("/P/a", "m", "t", "s")  # commits keep waking it while it fails
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            stack.memory("/P/a", f"m{len(calls)}-{time.monotonic_ns()}", "t", "s")
    finally:
        worker.stop()
    assert worker.last_error == "index unavailable"
    assert 1 <= len(calls) <= 8  # about one round per interval, not thousands


def test_the_index_is_optimised_once_enough_rows_were_written(stack: Stack) -> None:
    optimised: list[int] = []
    original = stack.index.optimize
    stack.index.optimize = lambda: optimised.append(stack.index.count()) or original()  # type: ignore[method-assign]
    worker = IndexWorker(stack.sync, interval=60, optimize_every=3)
    worker.start()
    try:
        for n in range(3):
            stack.memory("/P/a", f"m{n}", "title", f"note number {n}")
            assert worker.wait_idle(30)
    finally:
        worker.stop()
    assert optimised == [3]


def test_a_paused_worker_writes_nothing_until_it_resumes(stack: Stack) -> None:
    """Backups copy the index while the worker is paused: no index write and no outbox change may happen then."""
    worker = IndexWorker(stack.sync, interval=60)
    worker.start()
    try:
        assert worker.wait_idle(30)
        with worker.paused():
            stack.memory("/P/a", "during", "Written while paused", "a note about gliders")
            assert not worker.wait_synced(timeout=0.5)  # the commit woke it, but no round may run
            assert stack.graph.pending_count() == 1 and stack.index.count() == 0
        assert worker.wait_synced(timeout=30)  # resumed: the commit made meanwhile is indexed now
        assert stack.graph.pending_count() == 0 and stack.index.count() == 1
    finally:
        worker.stop()
