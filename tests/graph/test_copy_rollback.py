"""A bulk write (``COPY … FROM (UNWIND …)``) that fails later in its transaction rolls back cleanly.

Kùzu 0.11.3 cannot roll back a COPY into a relationship table that already holds rows: it drops the table's
committed rows (even those of other nodes, and a checkpoint makes the loss permanent), and when some of them are
not checkpointed yet the next checkpoint, or closing the database, crashes the process (SIGSEGV). A SET on a
relationship table's rows before a COPY into it crashes ROLLBACK itself. The engine reopens the database without
checkpointing after such a rollback (the write-ahead log holds committed transactions only), and ``Tx.copy``
refuses the SET-then-COPY order. Each scenario runs in a child process (tests/graph/copy_rollback_child.py): a
regression kills the child, not the test run, and shows as its exit code.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from appliance.errors import StorageError
from appliance.graph.engine import KuzuEngine

ROOT = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, scenario: str) -> dict:
    child = subprocess.run([sys.executable, "-m", "tests.graph.copy_rollback_child", str(tmp_path / "g.kuzu"),
                            scenario], cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert child.returncode == 0, f"the child died ({child.returncode}): {child.stderr[-3000:]}"
    return json.loads(child.stdout)


@pytest.mark.parametrize("scenario", ["revisions", "edges", "import", "import-then-failure"])
def test_a_bulk_write_that_fails_later_rolls_back_and_the_process_lives(tmp_path: Path, scenario: str) -> None:
    report = _run(tmp_path, scenario)
    assert report["errors"] == ["StorageError"] * 3
    # nothing of the failed writes is kept, and nothing committed before them is lost (edges, tag spans)
    assert report["after_failures"] == report["before"]
    assert len(report["before"]["links"]) == 2
    after = report["after_writes"]
    assert after["LINK"] == len(after["links"]) > report["before"]["LINK"]  # the next writes work, edges included
    assert after["Revision"] > report["before"]["Revision"]
    assert all(link in after["links"] for link in report["before"]["links"])
    assert len(after["latest"]) == after["Item"]  # one open 'latest' span per item
    assert report["reopened"] == after  # what the store said it holds is what the files hold
    if scenario == "revisions":  # x, y and the new w by the bulk write, y again by the single write after it
        assert after["Revision"] == report["before"]["Revision"] + 4
        assert dict(map(tuple, after["latest"])) == {
            "P/a/w.note": "P/a/w.note?r=1", "P/a/x.note": "P/a/x.note?r=3", "P/a/y.note": "P/a/y.note?r=3",
            "P/a/z.note": "P/a/z.note?r=1"}


def test_a_bulk_load_refused_at_commit_leaves_no_version_marks(tmp_path: Path) -> None:
    """A transaction that updates a row and bulk-loads nodes and relationships fails just before COMMIT; the same
    writes then succeed (the rolled-back keys are free, the updated row takes the next update)."""
    report = _run(tmp_path, "at-commit")
    assert report["errors"] == ["StorageError"] * 3
    assert report["after_failures"] == report["before"] == {"nodes": [["a", 0], ["b", 0]], "edges": [["a", "b"]]}
    assert report["after_writes"] == {
        "nodes": [["a", 3], ["b", 0], ["x1", 1], ["x2", 2], ["x3", 3]],
        "edges": [["a", "b"], ["b", "x1"], ["b", "x2"], ["b", "x3"]],
    }
    assert report["reopened"] == report["after_writes"]


def test_a_copy_into_a_relationship_table_this_transaction_updated_is_refused(tmp_path: Path) -> None:
    engine = KuzuEngine(tmp_path / "g.kuzu", buffer_pool_mb=64, readers=1)
    try:
        engine.write(lambda tx: tx.run("CREATE NODE TABLE N(id STRING PRIMARY KEY)"))
        engine.write(lambda tx: tx.run("CREATE REL TABLE R(FROM N TO N, w STRING)"))
        engine.write(lambda tx: tx.run("CREATE (:N {id: 'a'})-[:R {w: 'kept'}]->(:N {id: 'b'})"))

        def set_then_copy(tx) -> None:
            tx.run("MATCH (:N)-[r:R]->(:N) SET r.w = 'changed'")
            tx.copy("R", "row.a AS f, row.b AS t, row.w AS w", [{"a": "b", "b": "a", "w": "new"}])

        with pytest.raises(StorageError, match="cannot bulk-load R in a transaction that has changed rows of R"):
            engine.write(set_then_copy)
        assert engine.read(lambda tx: tx.rows("MATCH (a)-[r:R]->(b) RETURN a.id, b.id, r.w")) == [["a", "b", "kept"]]
        engine.write(lambda tx: tx.copy("R", "row.a AS f, row.b AS t, row.w AS w", [{"a": "b", "b": "a", "w": "new"}]))
        assert engine.read(lambda tx: tx.rows("MATCH (a)-[r:R]->(b) RETURN a.id, b.id, r.w ORDER BY a.id")) == [
            ["a", "b", "kept"], ["b", "a", "new"]]
    finally:
        engine.close()
