"""``GET /api/v1/search``: the search engine over HTTP (the MCP tools build their recall on the same service)."""

from __future__ import annotations

from typing import Annotated, Literal

from litestar import Controller, get
from litestar.datastructures import State
from litestar.params import FromQuery, QueryParameter
from msgspec import Meta

from appliance.admin_api.search_shapes import SearchAnswer, SearchHit
from appliance.core import names
from appliance.core.search import SearchFilter, SearchRequest
from appliance.errors import InvalidArgument

# The filters' bounds, as the MCP tools' (operations/fields.py): how many values, how long each.
MAX_SPACES, MAX_SPACE_PATH = 16, 512
MAX_KINDS, MAX_MEMORY_TYPES, MAX_MEMORY_TYPE = 16, 16, 64
MAX_TAGS = 8


def _values(limit: int, length: int, what: str) -> QueryParameter:
    return QueryParameter(
        max_items=limit, description=f"{what}; repeat the parameter for several (any of them matches): at most "
                                     f"{limit}, each at most {length} characters",
        schema_extra={"items": {"type": "string", "maxLength": length}})  # Litestar would not write the length


# Tuples, not optional lists: the schema then says "an array of strings", which a repeated query parameter is
# (an optional list reads "an array or null", and one value on the wire is neither). msgspec checks each length.
SpacePaths = tuple[Annotated[str, Meta(max_length=MAX_SPACE_PATH)], ...]
Kinds = tuple[Annotated[str, Meta(max_length=names.MAX_SEGMENT)], ...]
MemoryTypes = tuple[Annotated[str, Meta(max_length=MAX_MEMORY_TYPE)], ...]
Tags = tuple[Annotated[str, Meta(max_length=names.MAX_TAG)], ...]


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
        space: Annotated[SpacePaths, _values(MAX_SPACES, MAX_SPACE_PATH, "space path prefixes (by segment)")] = (),
        kind: Annotated[Kinds, _values(MAX_KINDS, names.MAX_SEGMENT, "item kinds")] = (),
        memory_type: Annotated[MemoryTypes, _values(MAX_MEMORY_TYPES, MAX_MEMORY_TYPE, "memory types")] = (),
        tag: Annotated[Tags, _values(MAX_TAGS, names.MAX_TAG, "tags")] = (),
        project: Annotated[str, QueryParameter(max_length=names.MAX_SEGMENT,
                                               description="one project; absent: every project")] = "",
        include_deprecated: FromQuery[bool] = False,
    ) -> SearchAnswer:
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
            raise InvalidArgument(exc.message.replace("space_paths", "space"), field="space") from None
        hits = state.services.search.search(SearchRequest(q, where, mode, limit, min_score))
        return SearchAnswer(query=q, mode=mode, count=len(hits), results=[
            SearchHit(revision_kref=h.revision_kref, score=round(h.score, 4),
                      vector_score=None if h.vector is None else round(h.vector, 4),
                      text_score=None if h.text is None else round(h.text, 4)) for h in hits])
