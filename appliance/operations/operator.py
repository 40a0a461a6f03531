"""The operator tools (``memory_*``): Revka's Operator-side wrappers of the memory tools, with the operator's
floors and caps (``[memory] min_relevance_score``, ``[kumiho] memory_retrieval_limit``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from appliance.operations.definition import Input, Operation
from appliance.operations.fields import (
    Kref,
    Krefs,
    MemoryTypes,
    Name,
    Project,
    Query,
    SessionId,
    SpacePath,
    SpacePaths,
    Tag,
    Tags,
)
from appliance.operations.recall import Limit, MemoryItemKind, MinScore, RetrieveMode, Words
from appliance.operations.writes import CAPTURE_TYPE_HINT, StoreInput, Text

GRAPH_MAX = 500  # nodes one memory_graph answer holds at most


class OperatorEngageInput(Input):
    query: Query
    project: Project = None
    space_paths: SpacePaths | None = None
    memory_types: MemoryTypes | None = None
    keywords: Words | None = None
    topics: Words | None = None
    limit: Limit | None = None
    min_score: MinScore | None = None
    mode: Literal["search", "latest"] = "search"
    memory_item_kind: MemoryItemKind = "conversation"
    graph_augmented: bool = True


class OperatorCaptureInput(Input):
    type: str = Field(max_length=32, pattern=r"^[a-z][a-z0-9_]{0,31}$", description=CAPTURE_TYPE_HINT)
    title: str = Field(max_length=200)
    content: str = Field(max_length=8192)
    tags: Tags | None = None
    space_hint: SpacePath | None = None


class OperatorReflectInput(Input):
    session_id: SessionId
    response: Text
    captures: Annotated[list[OperatorCaptureInput], Field(max_length=10)] | None = None
    source_krefs: Krefs | None = None
    space_path: SpacePath | None = None
    project: Project = None


class OperatorRetrieveInput(Input):
    query: Query
    project: Project = None
    space_paths: SpacePaths | None = None
    keywords: Words | None = None
    topics: Words | None = None
    memory_item_kind: MemoryItemKind = "conversation"
    memory_types: MemoryTypes | None = None
    limit: Limit = 5
    mode: RetrieveMode = "search"


class OperatorSearchInput(Input):
    context_filter: str = Field("", max_length=256, description="a project/space path prefix, or a glob such as "
                                "`*/characters/*` (at most 8 wildcards `*`, `?`, `[`)")
    name_filter: str = Field("", max_length=256, description="a substring of the item name, or a glob such as "
                             "`hero*` (at most 8 wildcards)")
    kind_filter: Name = ""
    include_metadata: bool = False


class OperatorFulltextInput(Input):
    query: Query
    context: SpacePath = ""
    kind: Name = ""
    include_deprecated: bool = False
    include_revision_metadata: bool = False
    limit: Limit = 20


class OperatorKrefInput(Input):
    kref: Kref


class OperatorGetRevisionByTagInput(Input):
    item_kref: Kref
    tag: Tag = "published"


class OperatorStoreInput(StoreInput):
    title: str = Field(max_length=200)
    user_text: Text | None = None  # type: ignore[assignment]  # the operator's store needs a title instead

    @field_validator("title")
    @classmethod
    def _titled(cls, title: str) -> str:
        if not title.strip():
            raise ValueError("title: give the memory a title")
        return title


class OperatorGraphInput(Input):
    project: Project = None
    limit: int = Field(100, ge=1, le=GRAPH_MAX)
    kinds: str | None = Field(None, max_length=1024, description="comma-separated item kinds")
    space: SpacePath | None = None
    sort: Literal["recent", "name"] = "recent"
    search: str | None = Field(None, max_length=256)


OPERATIONS = (
    Operation("memory_engage", "Engage memory (operator)",
              "Operator engage: min_score is floored by [memory] min_relevance_score and limit capped by [kumiho] "
              "memory_retrieval_limit.",
              OperatorEngageInput, read_only=True, idempotent=True),
    Operation("memory_reflect", "Reflect (operator)",
              "Operator reflect: buffer the response and store the captures with DERIVED_FROM provenance.",
              OperatorReflectInput),
    Operation("memory_retrieve", "Retrieve memories (operator)",
              "Operator retrieve (modes search, latest, first).",
              OperatorRetrieveInput, read_only=True, idempotent=True),
    Operation("memory_search", "Search items (operator)",
              "Structured item search by context (project/space path prefix), name and kind filters; `*` "
              "wildcards allowed.",
              OperatorSearchInput, read_only=True, idempotent=True),
    Operation("memory_fulltext", "Full-text search (operator)",
              "Typo-tolerant full-text search over items.",
              OperatorFulltextInput, read_only=True, idempotent=True),
    Operation("memory_get_item", "Get an item (operator)",
              "Get an item by kref.",
              OperatorKrefInput, read_only=True, idempotent=True),
    Operation("memory_resolve_kref", "Resolve a kref (operator)",
              "Resolve a kref to its file location.",
              OperatorKrefInput, read_only=True, idempotent=True),
    Operation("memory_get_revision_by_tag", "Get a revision by tag (operator)",
              "Get the revision of an item holding a tag (default published).",
              OperatorGetRevisionByTagInput, read_only=True, idempotent=True),
    Operation("memory_store", "Store a memory (operator)",
              "Operator store: as kumiho_memory_store, but title is required and user_text optional.",
              OperatorStoreInput),
    Operation("memory_graph", "Memory graph (operator)",
              "Nodes and edges of the memory graph for a force-directed view (items, spaces, BELONGS_TO/CHILD_OF "
              "and real edges).",
              OperatorGraphInput, read_only=True, idempotent=True),
)
