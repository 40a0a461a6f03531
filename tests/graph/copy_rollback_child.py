"""A child process for tests/graph/test_copy_rollback.py: a bulk write fails after its COPY and is rolled back.

    python -m tests.graph.copy_rollback_child <graph path> <scenario>

Kùzu 0.11.3 crashes (SIGSEGV) or loses committed relationships when a transaction that ran a COPY into a
relationship table is rolled back, so each scenario runs in its own process: the test reads its exit code. The
child prints one JSON object: the graph's contents before the failures, after them, after the next writes and
after reopening the store.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from appliance.errors import KumihoError, StorageError
from appliance.graph import GraphStore, NewEdge, NewRevision
from appliance.graph.engine import KuzuEngine, Tx
from appliance.graph.portable import LoadBatch

SPACE = "/P/a"
STAMP = "2026-03-01T12:00:00+00:00"
TABLES = ("Item", "Revision", "Event", "Audit")
RELS = ("HOLDS", "HAS_REVISION", "TAGGED", "LINK")


def contents(store: GraphStore) -> dict[str, Any]:
    """Every count the scenarios touch, and the edges themselves (a lost committed edge shows here)."""
    def job(tx: Any) -> dict[str, Any]:
        found: dict[str, Any] = {t: tx.scalar(f"MATCH (n:{t}) RETURN count(n)") for t in TABLES}
        found |= {r: tx.scalar(f"MATCH ()-[e:{r}]->() RETURN count(e)") for r in RELS}
        found["links"] = tx.rows("MATCH (a:Revision)-[e:LINK]->(b:Revision) RETURN a.id, b.id, e.edge_type "
                                 "ORDER BY a.id, b.id, e.edge_type")
        found["latest"] = tx.rows("MATCH (i:Item)-[t:TAGGED]->(r:Revision) WHERE t.tag = 'latest' AND t.until = '' "
                                  "RETURN i.id, r.id ORDER BY i.id")
        return found

    return store._engine.read(job)


def seed(path: Path) -> None:
    """Rows of every table both checkpointed (written before a reopen) and only in the write-ahead log."""
    with GraphStore.open(path, buffer_pool_mb=64, readers=2) as store:
        store.ensure_space(SPACE)
        for name in ("x", "y"):
            store.create_item(SPACE, name, "note")
            store.create_revision(f"kref://P/a/{name}.note")
        store.create_edges([NewEdge("kref://P/a/x.note?r=1", "kref://P/a/y.note?r=1", "DEPENDS_ON")])
    store = GraphStore.open(path, buffer_pool_mb=64, readers=2)
    store.create_item(SPACE, "z", "note")
    store.create_revision("kref://P/a/z.note")
    store.create_revision("kref://P/a/x.note")
    store.create_edge("kref://P/a/z.note?r=1", "kref://P/a/x.note?r=2", "DERIVED_FROM")
    store.close()


def _load_batch(link_target: str) -> LoadBatch:
    """An import batch of one new item with one revision and one edge to ``link_target``."""
    stamps = {"created_at": STAMP, "modified_at": STAMP, "author": "local", "username": "local"}
    item = {"id": "P/a/imported.note", "project": "P", "space": SPACE, "name": "imported", "kind": "note",
            **stamps, "metadata": "{}", "deprecated": False, "next_number": 2}
    revision = {"id": "P/a/imported.note?r=1", "item": item["id"], "number": 1, "metadata": "{}", **stamps,
                "deprecated": False, "default_artifact": ""}
    tag = {"item": item["id"], "revision": revision["id"], "tag": "latest", "since": STAMP, "until": ""}
    link = {"source": revision["id"], "target": link_target, "edge_type": "DEPENDS_ON", "metadata": "{}",
            "created_at": STAMP, "author": "local", "username": "local"}
    return LoadBatch(items=[item], revisions=[revision], tags=[tag], links=[link])


def _fails_later(store: GraphStore, bulk: Callable[[], object]) -> Callable[[], None]:
    def job() -> None:
        bulk()
        raise StorageError("a failure later in the same transaction")
    return lambda: store.atomic(job)


def scenarios(store: GraphStore) -> dict[str, tuple[Callable[[], object], Callable[[], object]]]:
    """name → (a write that bulk-loads and then fails, the same bulk write succeeding)."""
    revisions = [NewRevision("kref://P/a/x.note"), NewRevision("kref://P/a/y.note"), NewRevision("kref://P/a/w.note")]
    edges = [NewEdge("kref://P/a/y.note?r=1", "kref://P/a/x.note?r=2", "DEPENDS_ON"),
             NewEdge("kref://P/a/x.note?r=1", "kref://P/a/z.note?r=1", "REFERENCES")]
    return {
        "revisions": (_fails_later(store, lambda: store.create_revisions(revisions)),
                      lambda: store.create_revisions(revisions)),
        "edges": (_fails_later(store, lambda: store.create_edges(edges)), lambda: store.create_edges(edges)),
        # the import's LINK COPY itself fails (its target is missing) after the batch's other COPYs ran
        "import": (lambda: store.portable_load(lambda: _load_batch("P/a/missing.note?r=1")),
                   lambda: store.portable_load(lambda: _load_batch("P/a/x.note?r=1"))),
        "import-then-failure": (_fails_later(store, lambda: store.portable_load(lambda: _load_batch("P/a/x.note?r=1"))),
                                lambda: store.portable_load(lambda: _load_batch("P/a/x.note?r=1"))),
    }


def _engine_contents(engine: KuzuEngine) -> dict[str, Any]:
    return engine.read(lambda tx: {"nodes": tx.rows("MATCH (n:N) RETURN n.id, n.v ORDER BY n.id"),
                                   "edges": tx.rows("MATCH (a:N)-[r:R]->(b:N) RETURN a.id, b.id ORDER BY a.id, b.id")})


def at_commit(path: Path) -> None:
    """On the engine itself: a transaction updates a row, bulk-loads nodes and relationships, and fails just before
    COMMIT (where an audit row is written); then the same writes succeed (no version mark is left behind)."""
    engine = KuzuEngine(path, buffer_pool_mb=64, readers=2)
    engine.write(lambda tx: tx.run("CREATE NODE TABLE N(id STRING PRIMARY KEY, v INT64)"))
    engine.write(lambda tx: tx.run("CREATE REL TABLE R(FROM N TO N)"))
    engine.write(lambda tx: tx.run("CREATE (:N {id: 'a', v: 0}), (:N {id: 'b', v: 0})"))
    engine.write(lambda tx: tx.run("MATCH (a:N {id: 'a'}), (b:N {id: 'b'}) CREATE (a)-[:R]->(b)"))

    def load(tx: Tx, i: int, fail: bool) -> None:
        tx.run("MATCH (n:N {id: 'a'}) SET n.v = $v", {"v": -i if fail else i})
        tx.copy("N", "row.id AS id, row.v AS v", [{"id": f"x{i}", "v": i}])
        tx.copy("R", "row.a AS f, row.b AS t", [{"a": "b", "b": f"x{i}"}])
        if fail:
            tx.before_commit(lambda tx: (_ for _ in ()).throw(StorageError("refused at commit")))

    report: dict[str, Any] = {"before": _engine_contents(engine), "errors": []}
    for i in range(1, 4):
        try:
            engine.write(lambda tx, i=i: load(tx, i, fail=True))
        except StorageError as exc:
            report["errors"].append(type(exc).__name__)
    report["after_failures"] = _engine_contents(engine)
    for i in range(1, 4):
        engine.write(lambda tx, i=i: load(tx, i, fail=False))  # the same new keys, the same updated row
    report["after_writes"] = _engine_contents(engine)
    engine.close()
    engine = KuzuEngine(path, buffer_pool_mb=64, readers=2)
    report["reopened"] = _engine_contents(engine)
    engine.close()
    print(json.dumps(report), flush=True)


def main(path: Path, scenario: str) -> None:
    if scenario == "at-commit":
        at_commit(path)
        return
    seed(path)
    report: dict[str, Any] = {}
    with GraphStore.open(path, buffer_pool_mb=64, readers=2) as store:
        failing, succeeding = scenarios(store)[scenario]
        report["before"] = contents(store)
        report["errors"] = []
        for _ in range(3):
            try:
                failing()
            except KumihoError as exc:
                report["errors"].append(type(exc).__name__)
        report["after_failures"] = contents(store)
        succeeding()
        store.create_revision("kref://P/a/y.note")  # an ordinary write to rows the failed ones touched
        store.create_edge("kref://P/a/y.note?r=1", "kref://P/a/z.note?r=1", "REFERENCES")
        report["after_writes"] = contents(store)
    with GraphStore.open(path, buffer_pool_mb=64, readers=2) as store:
        report["reopened"] = contents(store)
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
