"""``GET /api/v1/search``: the search engine over HTTP (the MCP tools build their recall on the same service).
Each hit carries what a list of results shows (item, kind, space, title, summary, deprecated), read for all
hits in one graph read."""

from __future__ import annotations

from typing import Annotated, Literal

from litestar import Controller, get
from litestar.datastructures import State
from litestar.params import FromQuery, QueryParameter

from appliance.admin_api.console_shapes import SearchHit, SearchResponse
from appliance.admin_api.params import (
    MAX_KINDS,
    MAX_MEMORY_TYPE,
    MAX_MEMORY_TYPES,
    MAX_SPACE_PATH,
    MAX_SPACES,
    MAX_TAGS,
    Kinds,
    MemoryTypes,
    SpacePaths,
    Tags,
    values_parameter,
)
from appliance.core import names
from appliance.core.model import Item, Revision
from appliance.core.scoring import Scored
from appliance.core.search import SearchFilter, SearchRequest
from appliance.errors import InvalidArgument
from appliance.memory import records


class SearchController(Controller):
    path = "/api/v1/search"
    tags = ("search",)

    @get("/", summary="Hybrid, vector or full-text search over memories (scores on one 0..1 scale)",
         sync_to_thread=True)
    def search(
        self,
        state: State,
        q: Annotated[str, QueryParameter(description="the query", min_length=1, max_length=2000)],
        mode: FromQuery[Literal["hybrid", "vector", "text"]] = "hybrid",
        limit: Annotated[int, QueryParameter(ge=1, le=100)] = 10,
        min_score: Annotated[float, QueryParameter(ge=0.0, le=1.0)] = 0.0,
        space: Annotated[SpacePaths, values_parameter(
            MAX_SPACES, MAX_SPACE_PATH, "space path prefixes (by segment)")] = (),
        kind: Annotated[Kinds, values_parameter(MAX_KINDS, names.MAX_SEGMENT, "item kinds")] = (),
        memory_type: Annotated[MemoryTypes, values_parameter(MAX_MEMORY_TYPES, MAX_MEMORY_TYPE, "memory types")] = (),
        tag: Annotated[Tags, values_parameter(MAX_TAGS, names.MAX_TAG, "tags")] = (),
        project: Annotated[str, QueryParameter(max_length=names.MAX_SEGMENT,
                                               description="one project; absent: every project")] = "",
        include_deprecated: FromQuery[bool] = False,
    ) -> SearchResponse:
        # a name no memory can carry is a mistake to report, not a filter that quietly finds nothing
        if project:
            names.project_name(project, "project")
        for value in kind:
            names.kind(value, "kind")
        for value in tag:
            names.tag(value, "tag")
        try:
            where = SearchFilter(project or None, space, kind, memory_type, tag, include_deprecated)
        except InvalidArgument as exc:
            if exc.field != "space_paths":
                raise
            raise InvalidArgument(exc.message.replace("space_paths", "space"), field="space") from None
        services = state.services
        hits = services.search.search(SearchRequest(q, where, mode, limit, min_score))
        found = services.graph.revisions_with_items([h.revision_kref for h in hits])  # one read for every hit
        return SearchResponse(query=q, mode=mode, count=len(hits), results=[_hit(h, found.get(h.revision_kref))
                                                                            for h in hits])


def _hit(hit: Scored, found: tuple[Revision, Item] | None) -> SearchHit:
    vector = None if hit.vector is None else round(hit.vector, 4)
    text = None if hit.text is None else round(hit.text, 4)
    if found is None:  # deleted since it was indexed (the index drops its row at its next round)
        return SearchHit(revision_kref=hit.revision_kref, score=round(hit.score, 4), vector_score=vector,
                         text_score=text, item_kref=None, name=None, kind=None, space=None, title=None,
                         summary=None, deprecated=None)
    revision, item = found
    summary = records.summary_of(revision.metadata)
    return SearchHit(revision_kref=hit.revision_kref, score=round(hit.score, 4), vector_score=vector,
                     text_score=text, item_kref=item.kref, name=item.name, kind=item.kind,
                     space=item.space_path.lstrip("/"),
                     title=revision.metadata.get("title") or summary[:120] or item.item_name, summary=summary,
                     deprecated=revision.deprecated or item.deprecated)
