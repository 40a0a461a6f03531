"""Compiled statements: Kùzu keeps every statement a connection compiles until the connection closes, so each
query text is compiled once per connection and reused, and a connection that compiled too many is reopened."""

from __future__ import annotations

from pathlib import Path

from appliance.graph import GraphStore
from appliance.graph.engine import KuzuEngine, Tx


def test_repeated_writes_and_reads_compile_each_query_once(graph: GraphStore, space: str) -> None:
    engine = graph._engine
    graph.create_item(space, "warmup", "note")  # every query of create_item and get_item compiled once
    graph.get_item("kref://CognitiveMemory/notes/warmup.note")
    writer, *readers = (conn.compiled for conn in engine.connections)
    for i in range(300):
        graph.create_item(space, f"note-{i}", "note")
        graph.get_item(f"kref://CognitiveMemory/notes/note-{i}.note")
    assert engine.connections[0].compiled == writer  # the warm-up compiled every query of create_item
    # get_item takes any pooled reader: each compiles its one query at most once
    assert all(conn.compiled - before <= 1 for conn, before in zip(engine.connections[1:], readers, strict=True))
    assert graph.get_item("kref://CognitiveMemory/notes/note-299.note").kref.endswith("note-299.note")


def test_the_same_query_text_run_a_thousand_times_is_compiled_once(tmp_path: Path) -> None:
    engine = KuzuEngine(tmp_path / "g.kuzu", buffer_pool_mb=64, readers=1)
    try:
        engine.write(lambda tx: tx.run("CREATE NODE TABLE T(id STRING PRIMARY KEY, n INT64)"))
        for i in range(1000):
            engine.write(lambda tx, i=i: tx.run("CREATE (:T {id: $id, n: $n})", {"id": f"t{i}", "n": i}))
        writes = engine.connections[0].compiled
        total = engine.read(lambda tx: [tx.scalar("MATCH (t:T) WHERE t.n = $n RETURN t.id", {"n": n})
                                        for n in range(1000)])
        assert writes == 1  # the DDL and BEGIN/COMMIT have no parameters: nothing kept
        assert engine.connections[1].compiled == 1
        assert total[999] == "t999"
    finally:
        engine.close()


def test_parameters_of_another_type_get_their_own_statement(tmp_path: Path) -> None:
    """A statement is compiled for its parameters' types: reusing it for other types would cast the values
    (or crash Kùzu on a null list), so the shape of the parameters is part of the key."""
    engine = KuzuEngine(tmp_path / "g.kuzu", buffer_pool_mb=64, readers=1)
    try:
        def echo(value: object) -> object:
            return engine.read(lambda tx: tx.scalar("RETURN $v", {"v": value}))

        assert [echo(1), echo("one"), echo(None), echo(2.5), echo(["a"]), echo([{"k": 1}]), echo(7)] == [
            1, "one", None, 2.5, ["a"], [{"k": 1}], 7]
        assert engine.connections[1].compiled == 6
    finally:
        engine.close()


def test_a_connection_that_compiled_too_many_statements_is_reopened_between_jobs(tmp_path: Path) -> None:
    engine = KuzuEngine(tmp_path / "g.kuzu", buffer_pool_mb=64, readers=1, max_statements=16)
    try:
        engine.write(lambda tx: tx.run("CREATE NODE TABLE T(id STRING PRIMARY KEY)"))

        def distinct_texts(tx: Tx) -> list[int]:
            # one job compiles 40 texts: the connection is not reopened in the middle of a transaction
            return [tx.scalar(f"RETURN $x + {i}", {"x": 1}) for i in range(40)]

        assert engine.write(distinct_texts) == list(range(1, 41))
        assert engine.read(distinct_texts) == list(range(1, 41))
        assert [c.reopened for c in engine.connections] == [0, 0]
        engine.write(lambda tx: tx.run("CREATE (:T {id: $id})", {"id": "after"}))
        engine.read(lambda tx: tx.rows("MATCH (t:T) RETURN t.id"))
        assert [c.reopened for c in engine.connections] == [1, 1]
        assert engine.read(lambda tx: tx.scalar("MATCH (t:T) WHERE t.id = $id RETURN count(t)", {"id": "after"})) == 1
    finally:
        engine.close()


def test_a_refused_query_is_an_error_and_the_connection_keeps_working(tmp_path: Path) -> None:
    engine = KuzuEngine(tmp_path / "g.kuzu", buffer_pool_mb=64, readers=1)
    try:
        engine.write(lambda tx: tx.run("CREATE NODE TABLE T(id STRING PRIMARY KEY)"))
        for _ in range(2):  # a refused text is not cached as if it were a statement
            try:
                engine.read(lambda tx: tx.rows("MATCH (n:Missing) WHERE n.id = $id RETURN n", {"id": "x"}))
            except Exception as exc:
                assert "refused" in str(exc) and "Missing" in str(exc)
            else:
                raise AssertionError("the query against a missing table was accepted")
        engine.write(lambda tx: tx.run("CREATE (:T {id: $id})", {"id": "ok"}))
        assert engine.read(lambda tx: tx.scalar("MATCH (t:T) WHERE t.id = $id RETURN t.id", {"id": "ok"})) == "ok"
    finally:
        engine.close()
