"""A write commits while another connection is in the middle of a long read: Kùzu's own checkpoint inside COMMIT
would wait for that reader and then fail the write; the engine checkpoints between transactions instead, and
a checkpoint that cannot run yet is tried again later."""

from __future__ import annotations

from pathlib import Path

from appliance.graph.engine import KuzuEngine


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
