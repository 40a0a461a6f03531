"""Edges between revisions and traversals: by direction and type, multi-hop, shortest path, impact."""

from __future__ import annotations

import itertools

import pytest

from appliance.errors import AlreadyExists, InvalidArgument, NotFound
from appliance.graph import GraphStore, NewEdge


@pytest.fixture
def chain(graph: GraphStore, space: str) -> list[str]:
    """r0 → r1 → r2 → r3 (DEPENDS_ON), plus r0 → r3 (REFERENCED) and r4 → r0 (DERIVED_FROM)."""
    krefs = [graph.create_revision(graph.create_item(space, f"n{i}", "conversation").kref).kref
             for i in range(5)]
    for a, b in itertools.pairwise(krefs[:4]):
        graph.create_edge(a, b, "DEPENDS_ON")
    graph.create_edge(krefs[0], krefs[3], "REFERENCED", {"score": "0.71"})
    graph.create_edge(krefs[4], krefs[0], "DERIVED_FROM")
    return krefs


def test_edges_by_direction_and_type(graph: GraphStore, chain: list[str]) -> None:
    out = graph.get_edges(chain[0], direction="outgoing").items
    assert sorted((e.target_kref, e.edge_type) for e in out) == [
        (chain[1], "DEPENDS_ON"), (chain[3], "REFERENCED")]
    incoming = graph.get_edges(chain[0], direction="incoming").items
    assert [(e.source_kref, e.edge_type) for e in incoming] == [(chain[4], "DERIVED_FROM")]
    assert graph.get_edges(chain[0]).total_count == 3
    only = graph.get_edges(chain[0], edge_type="REFERENCED").items
    assert len(only) == 1 and only[0].metadata == {"score": "0.71"}


def test_edges_page(graph: GraphStore, chain: list[str]) -> None:
    first = graph.get_edges(chain[0], page_size=2)
    rest = graph.get_edges(chain[0], page_size=2, cursor=first.next_cursor)
    assert len(first.items) == 2 and len(rest.items) == 1 and not rest.has_more


def test_an_edge_is_unique_per_source_target_and_type(graph: GraphStore, chain: list[str]) -> None:
    again = graph.create_edge(chain[0], chain[1], "DEPENDS_ON", {"new": "x"})
    assert again.metadata == {}  # the existing edge, unchanged
    assert graph.get_edges(chain[0], edge_type="DEPENDS_ON", direction="outgoing").total_count == 1
    with pytest.raises(AlreadyExists):
        graph.create_edge(chain[0], chain[1], "DEPENDS_ON", exists_error=True)


def test_edges_need_both_ends_and_a_valid_type(graph: GraphStore, chain: list[str]) -> None:
    with pytest.raises(NotFound):
        graph.create_edge(chain[0], chain[0].replace("?r=1", "?r=9"), "DEPENDS_ON")
    with pytest.raises(InvalidArgument, match="edge_type"):
        graph.create_edge(chain[0], chain[1], "depends on")


def test_an_item_kref_means_its_latest_revision(graph: GraphStore, chain: list[str]) -> None:
    edge = graph.create_edge(chain[1].split("?")[0], chain[2].split("?")[0], "SUPPORTS")
    assert (edge.source_kref, edge.target_kref) == (chain[1], chain[2])


def test_delete_edge(graph: GraphStore, chain: list[str]) -> None:
    assert graph.delete_edge(chain[0], chain[3], "REFERENCED")
    assert not graph.delete_edge(chain[0], chain[3], "REFERENCED")
    assert graph.stats()["edges"] == 4


def test_traversal_reaches_each_revision_at_its_shortest_depth(graph: GraphStore, chain: list[str]) -> None:
    assert graph.traverse(chain[0], "outgoing", max_depth=5).reached[2].path == []  # paths on request only
    walk = graph.traverse(chain[0], "outgoing", max_depth=5, include_path=True)
    assert [(r.revision_kref, r.depth) for r in walk.reached] == [
        (chain[1], 1), (chain[3], 1), (chain[2], 2)]
    assert walk.reached[2].path_types == ["DEPENDS_ON", "DEPENDS_ON"]
    assert [s.revision_kref for s in walk.reached[2].path] == [chain[1], chain[2]]


def test_traversal_filters_by_edge_type_and_depth(graph: GraphStore, chain: list[str]) -> None:
    deps = graph.traverse(chain[0], "outgoing", ["DEPENDS_ON"], max_depth=2)
    assert [(r.revision_kref, r.depth) for r in deps.reached] == [(chain[1], 1), (chain[2], 2)]
    both = graph.traverse(chain[1], "both", max_depth=1)
    assert {r.revision_kref for r in both.reached} == {chain[0], chain[2]}


def test_traversal_limit_reports_truncation(graph: GraphStore, chain: list[str]) -> None:
    walk = graph.traverse(chain[0], max_depth=5, limit=2)
    assert len(walk.reached) == 2 and walk.truncated


def test_dependencies_dependents_and_impact(graph: GraphStore, chain: list[str]) -> None:
    assert {r.revision_kref for r in graph.dependencies(chain[1]).reached} == {chain[2], chain[3]}
    dependents = graph.dependents(chain[3], edge_types=["DEPENDS_ON"])
    assert [(r.revision_kref, r.depth) for r in dependents.reached] == [
        (chain[2], 1), (chain[1], 2), (chain[0], 3)]
    impact = graph.analyze_impact(chain[3], include_path=True)
    assert [(r.revision_kref, r.depth) for r in impact.reached][:2] == [(chain[0], 1), (chain[2], 1)]
    assert impact.reached[-1].revision_kref == chain[4]
    assert impact.reached[-1].path_types == ["REFERENCED", "DERIVED_FROM"]


def test_shortest_path(graph: GraphStore, chain: list[str]) -> None:
    [path] = graph.shortest_path(chain[0], chain[3])
    assert [(s.revision_kref, s.edge_type, s.depth) for s in path] == [(chain[3], "REFERENCED", 1)]
    [long] = graph.shortest_path(chain[0], chain[3], ["DEPENDS_ON"])
    assert [s.depth for s in long] == [1, 2, 3]
    assert graph.shortest_path(chain[3], chain[0]) == []
    assert graph.shortest_path(chain[3], chain[0], direction="both") != []


def test_all_shortest_paths(graph: GraphStore, space: str) -> None:
    a, b, c, d = (graph.create_revision(graph.create_item(space, n, "x").kref).kref for n in "abcd")
    for src, dst in ((a, b), (a, c), (b, d), (c, d)):
        graph.create_edge(src, dst, "DEPENDS_ON")
    paths = graph.shortest_path(a, d, all_shortest=True)
    assert [[s.revision_kref for s in p] for p in paths] == [[b, d], [c, d]]


def test_traversal_bounds_are_validated(graph: GraphStore, chain: list[str]) -> None:
    with pytest.raises(InvalidArgument, match="max_depth"):
        graph.traverse(chain[0], max_depth=21)
    with pytest.raises(InvalidArgument, match="direction"):
        graph.traverse(chain[0], direction="sideways")
    with pytest.raises(InvalidArgument, match="limit"):
        graph.traverse(chain[0], limit=0)


def test_bulk_edges_skip_existing_triples_and_need_real_revisions(graph: GraphStore, chain: list[str]) -> None:
    rows = [NewEdge(chain[0], chain[1], "DEPENDS_ON"), NewEdge(chain[2], chain[0], "CONTRADICTS", {"basis": "agent"}),
            NewEdge(chain[3], chain[4], "SUPPORTS"), NewEdge(chain[3], chain[4], "SUPPORTS")]
    assert graph.create_edges(rows) == 2
    assert graph.get_edges(chain[0], "CONTRADICTS").items[0].metadata == {"basis": "agent"}
    before = graph.stats()["edges"]
    with pytest.raises(NotFound, match="do not exist"):
        graph.create_edges([NewEdge(chain[0], chain[0].replace("?r=1", "?r=7"), "SUPPORTS"),
                            NewEdge(chain[1], chain[0], "SUPPORTS")])
    with pytest.raises(InvalidArgument, match="revision krefs"):
        graph.create_edges([NewEdge(chain[0].split("?")[0], chain[1], "SUPPORTS")])
    assert graph.stats()["edges"] == before


def test_revision_metadata_reads_many_revisions_at_once(graph: GraphStore, chain: list[str]) -> None:
    graph.update_revision_metadata(chain[1], {"seed": "7"})
    missing = chain[0].replace("n0.conversation", "gone.conversation")
    found = graph.revision_metadata([chain[0], chain[1], missing])
    assert set(found) == {chain[0], chain[1]} and found[chain[1]]["seed"] == "7"
    assert graph.revision_metadata([]) == {}
    with pytest.raises(InvalidArgument, match="exact revision krefs") as refused:
        graph.revision_metadata([chain[0].split("?")[0]])
    assert refused.value.field == "revision_krefs"
