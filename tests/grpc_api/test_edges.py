"""Edges and traversals over Kumiho's gRPC service, against a real appliance: create semantics and errors, the
three directions, type filters and paging, deletion; traversal, shortest paths and impact with their bounds."""

from __future__ import annotations

import grpc

from tests.appliance_process import Running
from tests.grpc_api.conftest import Stub, kref, msg, rpc_error
from tests.grpc_api.world import build

OUTGOING, INCOMING, BOTH = 0, 1, 2


def _chain(appliance: Running, stub: Stub, project: str, names: str = "abcd") -> dict[str, str]:
    """One revision per name; items named as given, ``r=1`` each."""
    items = build(appliance.base_url, project, items=tuple(("s", n, "note") for n in names))
    return {n: stub.call("CreateRevision", msg("CreateRevisionRequest", item_kref=kref(i))).kref.uri
            for n, i in zip(names, items, strict=True)}


def _edge(stub: Stub, source: str, target: str, edge_type: str = "DEPENDS_ON", **fields: object) -> object:
    return stub.call("CreateEdge", msg("CreateEdgeRequest", source_revision_kref=kref(source),
                                       target_revision_kref=kref(target), edge_type=edge_type, **fields))


def _edges(stub: Stub, revision: str, direction: int = OUTGOING, edge_type: str = "", **fields: object) -> object:
    return stub.call("GetEdges", msg("GetEdgesRequest", kref=kref(revision), direction=direction,
                                     edge_type_filter=edge_type, **fields))


def test_edges_are_created_once_and_read_in_each_direction(appliance: Running, stub: Stub, unique: str) -> None:
    r = _chain(appliance, stub, unique, "abc")
    assert _edge(stub, r["a"], r["b"], metadata={"reason": "uses"}).success
    assert _edge(stub, r["a"], r["b"]).success  # again: the existing edge, no second one
    error = rpc_error(_edge, stub, r["a"], r["b"], exists_error=True)
    assert error.code() == grpc.StatusCode.ALREADY_EXISTS
    _edge(stub, r["c"], r["a"], "SUPPORTS")
    out = _edges(stub, r["a"])
    assert [(e.target_kref.uri, e.edge_type, e.metadata["reason"]) for e in out.edges] == [(r["b"], "DEPENDS_ON",
                                                                                            "uses")]
    assert [k.uri for k in out.revision_krefs] == [r["b"]]
    assert [e.source_kref.uri for e in _edges(stub, r["a"], INCOMING).edges] == [r["c"]]
    assert len(_edges(stub, r["a"], BOTH).edges) == 2
    assert [e.edge_type for e in _edges(stub, r["a"], BOTH, "SUPPORTS").edges] == ["SUPPORTS"]
    item_a = r["a"].split("?")[0]
    assert len(_edges(stub, item_a, BOTH).edges) == 2  # an item kref: its latest revision's edges
    error = rpc_error(_edges, stub, r["a"], 7)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith("direction:")


def test_edge_errors_name_the_field(appliance: Running, stub: Stub, unique: str) -> None:
    r = _chain(appliance, stub, unique, "ab")
    error = rpc_error(_edge, stub, r["a"], r["b"].replace("?r=1", "?r=5"))
    assert error.code() == grpc.StatusCode.NOT_FOUND and error.details().startswith("target_revision_kref:")
    error = rpc_error(_edge, stub, f"kref://{unique}/s/none.note", r["b"])
    assert error.code() == grpc.StatusCode.NOT_FOUND and error.details().startswith("source_revision_kref:")
    error = rpc_error(_edge, stub, r["a"], r["b"], "depends on")
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith("edge_type:")
    error = rpc_error(stub.call, "CreateEdge", msg("CreateEdgeRequest", target_revision_kref=kref(r["b"]),
                                                  edge_type="X"))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith("source_revision_kref:")


def test_paging_and_deleting_edges(appliance: Running, stub: Stub, unique: str) -> None:
    r = _chain(appliance, stub, unique, "abcde")
    for target in "bcde":
        _edge(stub, r["a"], r[target])
    seen, cursor = [], ""
    while True:
        page = _edges(stub, r["a"], pagination=msg("PaginationRequest", page_size=3, cursor=cursor))
        seen += [e.target_kref.uri for e in page.edges]
        assert page.pagination.total_count == 4
        if not page.pagination.has_more:
            break
        cursor = page.pagination.next_cursor
    assert sorted(seen) == sorted(r[t] for t in "bcde")
    assert stub.call("DeleteEdge", msg("DeleteEdgeRequest", source_kref=kref(r["a"]), target_kref=kref(r["b"]),
                                       edge_type="DEPENDS_ON")).success
    assert len(_edges(stub, r["a"]).edges) == 3
    error = rpc_error(stub.call, "DeleteEdge", msg("DeleteEdgeRequest", source_kref=kref(r["a"]),
                                                  target_kref=kref(r["b"]), edge_type="DEPENDS_ON"))
    assert error.code() == grpc.StatusCode.NOT_FOUND


def test_traversal_shortest_path_and_impact_within_their_bounds(appliance: Running, stub: Stub,
                                                                unique: str) -> None:
    r = _chain(appliance, stub, unique, "abcd")
    for source, target in ("ab", "bc", "cd"):
        _edge(stub, r[source], r[target])
    _edge(stub, r["a"], r["c"], "REFERENCED")

    def walk(origin: str, **fields: object) -> object:
        return stub.call("TraverseEdges", msg("TraverseEdgesRequest", origin_kref=kref(origin), **fields))

    everything = walk(r["a"])
    assert [k.uri for k in everything.revision_krefs] == [r["b"], r["c"], r["d"]] and not everything.truncated
    only = walk(r["a"], edge_type_filter=["DEPENDS_ON"], max_depth=2)
    assert [k.uri for k in only.revision_krefs] == [r["b"], r["c"]]
    cut = walk(r["a"], limit=1)
    assert len(cut.revision_krefs) == 1 and cut.truncated
    back = walk(r["d"], direction=INCOMING, include_path=True, edge_type_filter=["DEPENDS_ON"])
    assert [k.uri for k in back.revision_krefs] == [r["c"], r["b"], r["a"]]
    assert [p.total_depth for p in back.paths] == [1, 2, 3]
    assert {(e.source_kref.uri, e.target_kref.uri) for e in back.edges} == {(r["c"], r["d"]), (r["b"], r["c"]),
                                                                          (r["a"], r["b"])}
    for field, value in (("max_depth", 21), ("limit", 1001), ("max_depth", -1)):
        error = rpc_error(walk, r["a"], **{field: value})
        assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith(f"{field}:")

    path = stub.call("FindShortestPath", msg("ShortestPathRequest", source_kref=kref(r["a"]), target_kref=kref(r["d"])))
    assert path.path_exists and path.path_length == 2  # a -REFERENCED-> c -> d
    assert [s.revision_kref.uri for s in path.paths[0].steps] == [r["c"], r["d"]]
    typed = stub.call("FindShortestPath", msg("ShortestPathRequest", source_kref=kref(r["a"]), target_kref=kref(r["d"]),
                                              edge_type_filter=["DEPENDS_ON"], all_shortest=True))
    assert typed.path_length == 3 and len(typed.paths) == 1
    none = stub.call("FindShortestPath", msg("ShortestPathRequest", source_kref=kref(r["d"]), target_kref=kref(r["a"])))
    assert not none.path_exists and not none.paths

    impact = stub.call("AnalyzeImpact", msg("ImpactAnalysisRequest", revision_kref=kref(r["d"])))
    assert [(i.revision_kref.uri, i.impact_depth) for i in impact.impacted_revisions] == [
        (r["c"], 1), (r["a"], 2), (r["b"], 2)]  # nearest first, then by kref
    assert impact.impacted_revisions[0].item_kref.uri == r["c"].split("?")[0]
    assert list(impact.impacted_revisions[0].impact_path_types) == ["DEPENDS_ON"]
    assert impact.total_impacted == 3 and not impact.truncated
    error = rpc_error(stub.call, "AnalyzeImpact", msg("ImpactAnalysisRequest", revision_kref=kref(r["d"]),
                                                     max_depth=50))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith("max_depth:")
