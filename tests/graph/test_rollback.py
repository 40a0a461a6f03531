"""A refused write leaves the graph as it was and takes nothing from the writes after it.

Kùzu 0.11.3 does not clear the version marks of rows a rolled-back transaction updated: the next transaction
that updates one of those rows fails with "Write-write conflict", a rolled-back key can come back as a duplicate
primary key, and a few writes later the process can die in Kùzu. The engine checkpoints after every rollback of a
transaction that reached the database, which clears them (after one that bulk-loaded rows it reopens the
database instead, which clears them too: tests/graph/test_copy_rollback.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.errors import InvalidArgument
from appliance.graph import GraphStore
from appliance.graph.engine import KuzuEngine, Tx


@pytest.fixture
def engine(tmp_path: Path):
    engine = KuzuEngine(tmp_path / "g.kuzu", buffer_pool_mb=64, readers=2)
    engine.write(lambda tx: tx.run("CREATE NODE TABLE N(id STRING PRIMARY KEY, v INT64)"))
    engine.write(lambda tx: tx.run("CREATE REL TABLE R(FROM N TO N, w STRING)"))
    engine.write(lambda tx: tx.run("CREATE (:N {id: 'a', v: 0})"))
    try:
        yield engine
    finally:
        engine.close()


def _refused(tx: Tx, i: int) -> None:
    """Writes a new row, updates a shared one and links them, then is refused (as a validation after writes is)."""
    tx.run("CREATE (:N {id: $id, v: $v})", {"id": f"x{i}", "v": i})
    tx.run("MATCH (n:N {id: 'a'}) SET n.v = $v", {"v": -i})
    tx.run("MATCH (a:N {id: 'a'}), (b:N {id: $id}) CREATE (a)-[:R {w: 'refused'}]->(b)", {"id": f"x{i}"})
    raise InvalidArgument("refused after writing", field="test")


def _accepted(tx: Tx, i: int) -> None:
    tx.run("CREATE (:N {id: $id, v: $v})", {"id": f"x{i}", "v": i})
    tx.run("MATCH (n:N {id: 'a'}) SET n.v = $v", {"v": i})
    tx.run("MATCH (a:N {id: 'a'}), (b:N {id: $id}) CREATE (a)-[:R {w: 'kept'}]->(b)", {"id": f"x{i}"})


def test_writes_after_a_refused_write_to_the_same_rows_succeed(engine: KuzuEngine) -> None:
    for i in range(1, 6):
        with pytest.raises(InvalidArgument):
            engine.write(lambda tx, i=i: _refused(tx, i))
        engine.write(lambda tx, i=i: _accepted(tx, i))  # the same new key, the same updated row
    rows = engine.read(lambda tx: tx.rows("MATCH (n:N) RETURN n.id, n.v ORDER BY n.id"))
    assert rows == [["a", 5], *([f"x{i}", i] for i in range(1, 6))]
    edges = engine.read(lambda tx: tx.rows("MATCH (:N)-[r:R]->(:N) RETURN r.w"))
    assert edges == [["kept"]] * 5


def test_a_refused_memory_write_leaves_the_store_writable(graph: GraphStore, space: str) -> None:
    item = graph.create_item(space, "shared", "note")
    revision = graph.create_revision(item.kref, {"title": "first"})

    def refused() -> None:
        graph.update_revision_metadata(revision.kref, {"title": "changed"})
        graph.create_item(space, "new-one", "note")
        raise InvalidArgument("refused after writing", field="test")

    for _ in range(3):
        with pytest.raises(InvalidArgument):
            graph.atomic(refused)
        graph.update_revision_metadata(revision.kref, {"note": "kept"})
    assert graph.get_revision(revision.kref).metadata == {"title": "first", "note": "kept"}
    graph.create_item(space, "new-one", "note")  # the refused transaction's key was never kept
