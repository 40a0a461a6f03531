"""Traversals over the edges between revisions: everything reachable within a depth, the shortest path(s)
between two revisions, and what a change would impact (the revisions that depend on one, transitively).
``max_depth`` is 1–20 (0 means Kumiho's default, 10) and ``limit`` 1–1000 (0 means 100)."""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from appliance.core import names
from appliance.core.model import PathStep
from appliance.graph.links import MAX_DEPTH, MAX_LIMIT
from appliance.grpc_api import convert
from appliance.grpc_api.descriptor import message
from appliance.grpc_api.rpcs._boundary import named
from appliance.grpc_api.rpcs.edges import direction, kref_of
from appliance.grpc_api.server import Rpc, RpcCall

DEFAULT_DEPTH = 10
DEFAULT_LIMIT = 100


def _bounds(request: Any) -> tuple[int, int]:
    """(max_depth, limit); proto3 cannot tell 0 from unset, so 0 is the default."""
    depth = names.bounded_int(request.max_depth or DEFAULT_DEPTH, "max_depth", 1, MAX_DEPTH)
    limit = getattr(request, "limit", 0) or DEFAULT_LIMIT
    return depth, names.bounded_int(limit, "limit", 1, MAX_LIMIT)


def _types(values: Any) -> list[str]:
    return [names.edge_type(v, f"edge_type_filter[{i}]") for i, v in enumerate(values)]


def _path(steps: list[PathStep]) -> Message:
    return message("RevisionPath")(
        steps=[message("PathStep")(revision_kref=convert.kref(s.revision_kref), edge_type=s.edge_type,
                                   depth=s.depth) for s in steps], total_depth=len(steps))


def _path_edges(origin: str, steps: list[PathStep], way: str) -> list[tuple[str, str, str]]:
    """The (source, target, type) of each hop of a path from ``origin`` (an incoming walk follows edges
    backwards: each hop's edge points at the revision before it)."""
    hops, before = [], origin
    for step in steps:
        hops.append((step.revision_kref, before, step.edge_type) if way == "incoming"
                    else (before, step.revision_kref, step.edge_type))
        before = step.revision_kref
    return hops


def traverse_edges(call: RpcCall, request: Any) -> Message:
    """Every revision reachable from the origin within ``max_depth`` hops, nearest first, at most ``limit``
    (``truncated`` says more were reachable); with ``include_path``, one shortest path to each and the edges
    of those paths. A walk in both directions lists reached revisions without paths' edge ends."""
    origin = kref_of(request, "origin_kref")
    way = direction(request.direction)
    depth, limit = _bounds(request)
    graph = call.services.graph
    with named("origin_kref"):
        walk = graph.traverse(origin, way, _types(request.edge_type_filter), depth, limit, request.include_path)
    response = message("TraverseEdgesResponse")(
        revision_krefs=[convert.kref(r.revision_kref) for r in walk.reached], total_count=len(walk.reached),
        truncated=walk.truncated)
    if request.include_path:
        response.paths.extend(_path(r.path) for r in walk.reached)
        if way != "both":  # a two-way walk's hops do not say which way each edge points
            hops = dict.fromkeys(h for r in walk.reached for h in _path_edges(walk.origin, r.path, way))
            response.edges.extend(message("Edge")(source_kref=convert.kref(a), target_kref=convert.kref(b),
                                                  edge_type=t) for a, b, t in hops)
    return response


def find_shortest_path(call: RpcCall, request: Any) -> Message:
    """Following edges from source to target; ``all_shortest`` lists every path of the shortest length."""
    source = kref_of(request, "source_kref")
    target = kref_of(request, "target_kref")
    depth = names.bounded_int(request.max_depth or DEFAULT_DEPTH, "max_depth", 1, MAX_DEPTH)
    graph = call.services.graph
    with named("source_kref"):
        source = graph.get_revision(source).kref
    with named("target_kref"):
        target = graph.get_revision(target).kref
    paths = graph.shortest_path(source, target, _types(request.edge_type_filter), depth, request.all_shortest)
    return message("ShortestPathResponse")(paths=[_path(p) for p in paths], path_exists=bool(paths),
                                           path_length=len(paths[0]) if paths else 0)


def analyze_impact(call: RpcCall, request: Any) -> Message:
    """The revisions that depend on this one (incoming edges, transitively), nearest first, each with the
    edge types of the path that reaches it."""
    origin = kref_of(request, "revision_kref")
    depth, limit = _bounds(request)
    with named("revision_kref"):
        walk = call.services.graph.analyze_impact(origin, depth, _types(request.edge_type_filter), limit,
                                                  include_path=True)
    return message("ImpactAnalysisResponse")(
        impacted_revisions=[message("ImpactedRevision")(
            revision_kref=convert.kref(r.revision_kref), item_kref=convert.kref(r.revision_kref.split("?", 1)[0]),
            impact_depth=r.depth, impact_path_types=r.path_types) for r in walk.reached],
        total_impacted=len(walk.reached), truncated=walk.truncated)


RPCS: dict[str, Rpc] = {"TraverseEdges": traverse_edges, "FindShortestPath": find_shortest_path,
                        "AnalyzeImpact": analyze_impact}
