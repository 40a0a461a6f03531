"""``Search``: typo-tolerant relevance search over items, on the appliance's one 0..1 scale.

Two legs, as Kumiho's server has them:

* **item** (always): the query's words against each item's name and kind (``appliance.search.names``: the
  index's analyzer and typo tolerance); the score grows with the share of the query's words the name holds.
* **revision** (``include_revision_metadata``, the "deep" mode): the appliance's hybrid search over every
  revision's indexed text (title, summary, content, facts… and tags), full text and meaning together, scored
  on the calibrated scale of docs/search.md (near duplicates ≥ 0.6, unrelated ≈ 0.2–0.35). Hits found by
  meaning alone below ``SEMANTIC_FLOOR`` are left out, as a full-text server would not return them. An item
  scores as its best revision.

An item's score is its best leg's; ``matched_in`` names the legs that found it. Full-text statistics are
counted per project (one search per project the context covers), so one project's documents never move
another's scores. ``context_filter`` is a plain string prefix of ``project/space/…/name.kind``, as on
Kumiho's server (``team`` also matches ``team-b``). ``memory_project`` makes the answer a memory packet: the
project is checked (``memory_project_validated``) and the leading hits of that project, up to
``memory_revision_limit``, carry their published (else latest) revision."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from google.protobuf.message import Message

from appliance.core import kref as krefs
from appliance.core.model import Item
from appliance.core.search import SearchFilter, SearchRequest
from appliance.errors import InvalidArgument, NotFound
from appliance.grpc_api import convert
from appliance.grpc_api.descriptor import message
from appliance.grpc_api.server import Rpc, RpcCall
from appliance.search.names import name_scores

MAX_QUERY = 8192  # characters, as every other search of the appliance
MAX_CONTEXT = 256  # characters of context_filter and kind_filter (as ItemSearch's filters)
MAX_RANKED = 1000  # hits ranked per query: paging walks through these
MAX_MEMORY_REVISIONS = 1000  # memory_revision_limit's upper bound
SEMANTIC_FLOOR = 0.35  # the top of the "unrelated" band: a revision found by meaning alone must score above it


@dataclass
class Hit:
    item_kref: str
    score: float
    matched_in: set[str] = field(default_factory=set)
    item: Item | None = None


def search(call: RpcCall, request: Any) -> Message:
    query = request.query.strip()
    if not query:
        raise InvalidArgument("query: give the words to search for", field="query")
    if len(query) > MAX_QUERY:
        raise InvalidArgument(f"query: at most {MAX_QUERY} characters (got {len(query)})", field="query")
    context = _bounded(request.context_filter, "context_filter").lstrip("/")
    kind = _bounded(request.kind_filter, "kind_filter")
    size, cursor = convert.page_request(request)
    offset = _offset(cursor)
    if not 0 <= request.memory_revision_limit <= MAX_MEMORY_REVISIONS:
        raise InvalidArgument(f"memory_revision_limit: between 0 and {MAX_MEMORY_REVISIONS}",
                              field="memory_revision_limit")
    deep = request.include_revision_metadata
    hits: dict[str, Hit] = {}
    _item_leg(call, query, context, kind, request.include_deprecated, hits)
    if deep:
        _revision_leg(call, query, context, kind, request.include_deprecated, min(MAX_RANKED, offset + size), hits)
    ranked = sorted((h for h in hits.values() if h.score >= request.min_score),
                    key=lambda h: (-h.score, h.item_kref))[:MAX_RANKED]
    page = _with_items(call, ranked[offset: offset + size])
    more = offset + size < len(ranked)
    response = message("SearchResponse")(
        pagination=message("PaginationResponse")(next_cursor=str(offset + size) if more else "", has_more=more,
                                                 total_count=len(ranked)),
        search_mode="hybrid" if deep else "fulltext")
    packets = _memory_packets(call, request, page, offset) if request.memory_project else {}
    if request.memory_project:
        response.memory_project_validated = packets is not None
    for hit in page:
        assert hit.item is not None
        result = response.results.add(item=convert.item_response(hit.item), score=round(hit.score, 4),
                                      matched_in=sorted(hit.matched_in))
        if packets and hit.item_kref in packets:
            resolved = packets[hit.item_kref]
            result.memory_revision_resolved = True
            if resolved is not None:
                result.memory_revision.CopyFrom(resolved)
    return response


# -- the legs -------------------------------------------------------------------------------------------
def _item_leg(call: RpcCall, query: str, context: str, kind: str, include_deprecated: bool,
              hits: dict[str, Hit]) -> None:
    for kref, score in name_scores(query, call.services.graph.item_names(context, kind, include_deprecated)).items():
        hits[kref] = Hit(kref, score, {"item"})


def _revision_leg(call: RpcCall, query: str, context: str, kind: str, include_deprecated: bool, wanted: int,
                  hits: dict[str, Hit]) -> None:
    """The hybrid index search, once per project the context covers (each with its own statistics)."""
    services = call.services
    services.index_worker.wait_synced()  # read your writes: what was stored before the call is found
    for project in _projects(call, context, include_deprecated):
        where = SearchFilter(project=project, kinds=(kind,) if kind else (), include_deprecated=include_deprecated)
        for scored in services.search.search(SearchRequest(query, where, "hybrid", limit=max(wanted * 2, 20))):
            if scored.text is None and scored.score < SEMANTIC_FLOOR:
                continue
            item = str(krefs.parse(scored.revision_kref).item())
            if not item.removeprefix("kref://").startswith(context):
                continue
            hit = hits.setdefault(item, Hit(item, 0.0))
            hit.score = max(hit.score, scored.score)
            hit.matched_in.add("revision")


def _projects(call: RpcCall, context: str, include_deprecated: bool) -> list[str]:
    if "/" in context:
        return [context.split("/", 1)[0]]
    return [p.name for p in call.services.graph.list_projects(include_deprecated=include_deprecated)
            if p.name.startswith(context)]


def _with_items(call: RpcCall, page: list[Hit]) -> list[Hit]:
    """The page's hits with their items, read at once (one deleted since it was indexed is left out)."""
    found = call.services.graph.items_by_kref([hit.item_kref for hit in page])
    for hit in page:
        hit.item = found.get(hit.item_kref)
    return [hit for hit in page if hit.item is not None]


def _memory_packets(call: RpcCall, request: Any, page: list[Hit], offset: int) -> dict[str, Message | None] | None:
    """Item kref → its published (else latest) revision, for the page's hits among the leading
    ``memory_revision_limit`` that belong to ``memory_project``; None when that project does not exist or is
    archived (the client then checks for itself)."""
    graph = call.services.graph
    try:
        if graph.get_project(request.memory_project).deprecated:
            return None
    except NotFound:
        return None
    prefix = f"kref://{request.memory_project}/"
    leading = [h.item_kref for h in page[: max(0, request.memory_revision_limit - offset)]
               if h.item_kref.startswith(prefix)]
    current = graph.current_revisions(leading) if leading else {}
    return {kref: convert.revision_response(current[kref]) if kref in current else None for kref in leading}


# -- request fields ---------------------------------------------------------------------------------------
def _bounded(value: str, name: str) -> str:
    if len(value) > MAX_CONTEXT:
        raise InvalidArgument(f"{name}: at most {MAX_CONTEXT} characters", field=name)
    return value.strip()


def _offset(cursor: str | None) -> int:
    if cursor is None:
        return 0
    if not cursor.isdigit() or int(cursor) >= MAX_RANKED:
        raise InvalidArgument("pagination.cursor: not a cursor this search returned; start again without it",
                              field="pagination.cursor")
    return int(cursor)


RPCS: dict[str, Rpc] = {"Search": search}
