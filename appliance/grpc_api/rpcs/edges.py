"""Edges: typed, directed links between revisions (an item kref means its latest revision). A (source,
target, type) triple exists once: creating it again is a no-op (``ALREADY_EXISTS`` with ``exists_error``)."""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from appliance.core import kref as krefs
from appliance.core import names
from appliance.core.model import Edge, Page, every_item
from appliance.errors import InvalidArgument, NotFound
from appliance.grpc_api import convert
from appliance.grpc_api.descriptor import message
from appliance.grpc_api.rpcs._boundary import named, redacted
from appliance.grpc_api.server import Rpc, RpcCall

DIRECTIONS = {0: "outgoing", 1: "incoming", 2: "both"}  # Kumiho's EdgeDirection: OUTGOING, INCOMING, BOTH
_EVERY = 1000  # edges read per store call when a listing asks for all of them


def direction(value: int) -> str:
    if value not in DIRECTIONS:
        raise InvalidArgument("direction: OUTGOING (0), INCOMING (1) or BOTH (2)", field="direction")
    return DIRECTIONS[value]


def kref_of(request: Any, field: str) -> str:
    text = convert.uri(getattr(request, field), field)
    krefs.parse(text, field)
    return text


def create_edge(call: RpcCall, request: Any) -> Message:
    """Both ends must exist (NOT_FOUND naming the end that does not)."""
    source = kref_of(request, "source_revision_kref")
    target = kref_of(request, "target_revision_kref")
    names.edge_type(request.edge_type)
    # the boundary's names for identifiers (a credential in one is refused): kref, revision_kref, edge_type
    args = redacted(kref=source, revision_kref=target, edge_type=request.edge_type, metadata=dict(request.metadata))
    names.metadata(args["metadata"])
    graph = call.services.graph

    def job() -> Edge:
        with named("source_revision_kref"):
            a = graph.get_revision(args["kref"]).kref
        with named("target_revision_kref"):
            b = graph.get_revision(args["revision_kref"]).kref
        return graph.create_edge(a, b, args["edge_type"], args["metadata"], exists_error=request.exists_error)

    edge = graph.atomic(job)
    return convert.status(f"{edge.edge_type} from {edge.source_kref} to {edge.target_kref}")


def get_edges(call: RpcCall, request: Any) -> Message:
    """The revision's edges (an item's: its latest revision's), oldest first, of one type or all. Without
    ``pagination`` every edge (the SDK reads them in one call); ``revision_krefs`` are the other ends."""
    text = kref_of(request, "kref")
    way = direction(request.direction)
    kind = request.edge_type_filter
    if kind:
        names.edge_type(kind, "edge_type_filter")
    graph = call.services.graph

    def fetch(size: int, cursor: str | None) -> Page[Edge]:
        return graph.get_edges(text, edge_type=kind, direction=way, page_size=size, cursor=cursor)

    with named("kref"):
        origin = graph.get_revision(text).kref
        if request.HasField("pagination"):
            page = fetch(*convert.page_request(request))
            edges, paging = page.items, convert.pagination(page)
        else:
            edges, paging = every_item(lambda cursor: fetch(_EVERY, cursor)), None
    others = dict.fromkeys(e.target_kref if e.source_kref == origin else e.source_kref for e in edges)
    response = message("GetEdgesResponse")(edges=[convert.edge(e) for e in edges],
                                           revision_krefs=[convert.kref(k) for k in others])
    if paging is not None:
        response.pagination.CopyFrom(paging)
    return response


def delete_edge(call: RpcCall, request: Any) -> Message:
    """NOT_FOUND when no such edge exists."""
    source = kref_of(request, "source_kref")
    target = kref_of(request, "target_kref")
    names.edge_type(request.edge_type)
    graph = call.services.graph

    def job() -> bool:
        with named("source_kref"):
            a = graph.get_revision(source).kref
        with named("target_kref"):
            b = graph.get_revision(target).kref
        return graph.delete_edge(a, b, request.edge_type)

    if not graph.atomic(job):
        raise NotFound(f"no {request.edge_type} edge from {source} to {target}", field="edge_type")
    return convert.status(f"deleted {request.edge_type} from {source} to {target}")


RPCS: dict[str, Rpc] = {"CreateEdge": create_edge, "GetEdges": get_edges, "DeleteEdge": delete_edge}
