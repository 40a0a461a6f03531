"""A write commits while another connection is in the middle of a long read: Kùzu's own checkpoint inside COMMIT
would wait for that reader and then fail the write; the engine checkpoints between transactions instead, and
a checkpoint that cannot run yet is tried again later."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from appliance.graph import engine as engine_module
from appliance.graph.engine import KuzuEngine, Tx


def test_a_write_commits_while_a_read_transaction_is_open(tmp_path: Path) -> None:
    engine = KuzuEngine(tmp_path / "graph", readers=2)
    try:
        engine.write(lambda tx: tx.run("CREATE NODE TABLE N(id INT64, PRIMARY KEY(id))"))
        reader = engine.connections[1]
        reader.execute("CALL checkpoint_threshold=1", {})  # every commit's log passes Kùzu's threshold
        reader.execute("BEGIN TRANSACTION READ ONLY", {})  # a long read, still running
        try:
            engine.write(lambda tx: tx.run("CREATE (:N {id: 1})"))
            engine.write(lambda tx: tx.run("CREATE (:N {id: 2})"))
        finally:
            reader.execute("COMMIT", {})
        assert engine.read(lambda tx: tx.scalar("MATCH (n:N) RETURN count(n)")) == 2
        engine._checkpoint_due = True  # what a large log sets: with the reader gone the checkpoint runs
        engine.write(lambda tx: tx.run("CREATE (:N {id: 3})"))
        assert not engine._checkpoint_due
    finally:
        engine.close()
    reopened = KuzuEngine(tmp_path / "graph", readers=1)
    try:
        assert reopened.read(lambda tx: tx.scalar("MATCH (n:N) RETURN count(n)")) == 3
    finally:
        reopened.close()


def test_a_postponed_checkpoint_holds_new_reads_off_until_it_runs(tmp_path: Path) -> None:
    """A read longer than Kùzu's wait (5 s) postpones the checkpoint; the next try waits longer (up to 10 s) for
    the reads in flight to end and keeps new ones from starting, so the log cannot grow without bound under
    long reads. (Before, every try gave up after Kùzu's 5 s while an 11 s read was open.)"""
    engine = KuzuEngine(tmp_path / "graph", readers=2)
    try:
        engine.write(lambda tx: tx.run("CREATE NODE TABLE N(id INT64, PRIMARY KEY(id))"))
        long_read_open, long_read_done = threading.Event(), threading.Event()

        def long_read(tx: Tx) -> None:
            tx.run("BEGIN TRANSACTION READ ONLY")
            long_read_open.set()
            time.sleep(11)  # longer than two of Kùzu's own waits for readers
            tx.run("COMMIT")

        reader = threading.Thread(target=lambda: (engine.read(long_read), long_read_done.set()))
        reader.start()
        assert long_read_open.wait(10)
        engine._checkpoint_due = True  # what a large log sets
        engine.write(lambda tx: tx.run("CREATE (:N {id: 1})"))  # its checkpoint waits 5 s for the reader, gives up
        assert engine._checkpoint_due and engine._checkpoints_postponed == 1
        assert not long_read_done.is_set()
        engine.write(lambda tx: tx.run("CREATE (:N {id: 2})"))  # this try waits for the read, then checkpoints
        assert long_read_done.is_set()
        assert not engine._checkpoint_due and engine._checkpoints_postponed == 0
        reader.join(10)
        assert engine.read(lambda tx: tx.scalar("MATCH (n:N) RETURN count(n)")) == 2
    finally:
        engine.close()


def test_a_held_checkpoint_that_times_out_backs_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A read longer than the hold's wait (an export streaming for minutes) must not stall every write and read
    behind it: after a hold times out, tries are plain ones for HELD_CHECKPOINT_BACKOFF_SECONDS."""
    monkeypatch.setattr(engine_module, "READS_DRAIN_SECONDS", 0.5)
    engine = KuzuEngine(tmp_path / "graph", readers=2)
    try:
        engine.write(lambda tx: tx.run("CREATE NODE TABLE N(id INT64, PRIMARY KEY(id))"))
        long_read_open = threading.Event()

        def long_read(tx: Tx) -> None:
            tx.run("BEGIN TRANSACTION READ ONLY")
            long_read_open.set()
            time.sleep(8)
            tx.run("COMMIT")

        reader = threading.Thread(target=engine.read, args=(long_read,))
        reader.start()
        assert long_read_open.wait(10)
        engine._checkpoint_due = True
        engine.write(lambda tx: tx.run("CREATE (:N {id: 1})"))  # a plain try: Kùzu's 5 s wait, then postponed
        engine.write(lambda tx: tx.run("CREATE (:N {id: 2})"))  # the hold waits 0.5 s for the read, gives up
        assert engine._checkpoint_due and engine._checkpoints_postponed == 2
        assert engine._next_held_checkpoint > time.monotonic() + engine_module.HELD_CHECKPOINT_BACKOFF_SECONDS - 5
        assert reader.is_alive()  # the long read is still open, and every reader connection is back in the pool
        assert engine.read(lambda tx: tx.scalar("MATCH (n:N) RETURN count(n)")) == 2
        reader.join(15)
    finally:
        engine.close()
