"""``GET /api/v1/search``: the search engine over HTTP (the MCP tools build their recall on the same service)."""

from __future__ import annotations

from typing import Annotated, Literal

from litestar import Controller, get
from litestar.datastructures import State
from litestar.params import FromQuery, QueryParameter

from appliance.admin_api.search_shapes import SearchAnswer, SearchHit
from appliance.core.search import SearchFilter, SearchRequest
from appliance.errors import InvalidArgument


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
        space: Annotated[list[str] | None, QueryParameter(description="space path prefixes (by segment)")] = None,
        kind: FromQuery[list[str] | None] = None,
        memory_type: FromQuery[list[str] | None] = None,
        tag: FromQuery[list[str] | None] = None,
        project: FromQuery[str | None] = None,
        include_deprecated: FromQuery[bool] = False,
    ) -> SearchAnswer:
        try:
            where = SearchFilter(project, tuple(space or ()), tuple(kind or ()), tuple(memory_type or ()),
                                 tuple(tag or ()), include_deprecated)
        except InvalidArgument as exc:
            raise InvalidArgument(exc.message.replace("space_paths", "space"), field="space") from None
        hits = state.services.search.search(SearchRequest(q, where, mode, limit, min_score))
        return SearchAnswer(query=q, mode=mode, count=len(hits), results=[
            SearchHit(revision_kref=h.revision_kref, score=round(h.score, 4),
                      vector_score=None if h.vector is None else round(h.vector, 4),
                      text_score=None if h.text is None else round(h.text, 4)) for h in hits])
