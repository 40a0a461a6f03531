"""The console API's request and response shapes (pydantic), so that ``/api/schema`` describes every field.

Entity shapes follow ``appliance.memory.views`` (Kumiho's reference shapes); the rest is the appliance's own.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from appliance.admin_api.config_view import SettingsView
from appliance.admin_api.entity_shapes import EdgeShape, ItemShape, RevisionShape

KREF_MAX = 2048  # characters of a kref in a request (the longest a kref can usefully be)
REASON_MAX = 1000


class Shape(BaseModel):
    model_config = ConfigDict(extra="forbid")


# -- entities ------------------------------------------------------------------------------------------------
class ItemView(ItemShape, Shape):
    """An item; a field the view does not declare is refused rather than passed on."""


class RevisionView(RevisionShape, Shape):
    """A revision, as ``ItemView``."""


class EdgeView(EdgeShape, Shape):
    """An edge, as ``ItemView``."""


# -- GET /api/v1/stats ---------------------------------------------------------------------------------------
class Totals(Shape):
    projects: int
    spaces: int
    items: int
    deprecated_items: int
    revisions: int
    artifacts: int
    edges: int
    events: int


class ProjectCount(Shape):
    project: str
    archived: bool = Field(description="an archived project's memories are hidden from search")
    items: int
    deprecated_items: int
    revisions: int


class SpaceCount(Shape):
    space: str = Field(description="the space path, e.g. /CognitiveMemory/work")
    project: str
    items: int = Field(description="items directly in this space")
    deprecated_items: int


class KindCount(Shape):
    project: str
    kind: str
    items: int
    deprecated_items: int


class MemoryTypeCount(Shape):
    project: str
    memory_type: str = Field(description="memory_type (else type) of the item's latest revision; '' = none")
    items: int
    deprecated_items: int


class IndexLag(Shape):
    pending_rows: int = Field(description="revisions waiting for the search index")
    seconds_behind: float | None = Field(description="age of the oldest waiting change; 0 when none wait")
    state: Literal["ok", "rebuilding"]
    sync_error: str | None = Field(description="when the last index sync round failed (a fixed phrase and its time; "
                                               "the appliance log has the error); null when it succeeded")
    rows: int | None = Field(description="rows in the index; null when the table cannot be read")
    embedder: str


class DiskUse(Shape):
    graph_bytes: int
    index_bytes: int
    artifacts_bytes: int
    working_bytes: int
    total_bytes: int


class StatsResponse(Shape):
    totals: Totals
    projects: list[ProjectCount] = Field(description="the most items first; at most 1000 (projects_truncated "
                                                     "says when more)")
    projects_truncated: bool
    spaces: list[SpaceCount] = Field(description="by path; at most 1000 (spaces_truncated says when more)")
    spaces_truncated: bool
    kinds: list[KindCount] = Field(description="the most items first; at most 1000 (kinds_truncated says when "
                                               "more)")
    kinds_truncated: bool
    memory_types: list[MemoryTypeCount] = Field(description="the most items first; at most 1000 "
                                                            "(memory_types_truncated says when more)")
    memory_types_truncated: bool
    index: IndexLag
    disk: DiskUse


# -- GET /api/v1/graph ---------------------------------------------------------------------------------------
class GraphNode(Shape):
    id: str = Field(description="a memory: its item kref without 'kref://'; a space: its path without '/'")
    name: str
    kind: str = Field(description="the item's kind, or 'space'")
    space: str
    created_at: str | None
    title: str
    summary: str
    revision_kref: str | None = Field(description="the current revision (published, else latest)")


class GraphEdge(Shape):
    source: str
    target: str
    edge_type: str = Field(description="BELONGS_TO (memory → space), CHILD_OF (space → parent) or a typed edge")
    metadata: dict[str, str] | None = None


class GraphStats(Shape):
    total_items: int = Field(description="memories matching the filters")
    shown_items: int = Field(description="memories in this answer")
    total_edges: int
    kinds: dict[str, int] = Field(description="kind → memories matching (before the limit); 'space' → spaces shown")


class Sampling(Shape):
    method: Literal["newest_first"]
    detail: str


class GraphResponse(Shape):
    nodes: list[GraphNode]
    edges: list[GraphEdge]
    spaces: list[str]
    stats: GraphStats
    truncated: bool = Field(description="more memories matched than the limit")
    total_nodes: int = Field(description="memories matching the filters (space nodes not counted)")
    sampling: Sampling | None = Field(description="how the shown memories were chosen, when truncated")


# -- GET /api/v1/inspect -------------------------------------------------------------------------------------
class ArtifactWithText(Shape):
    kref: str
    name: str
    location: str
    revision_kref: str
    created_at: str
    metadata: dict[str, str]
    text: str | None = Field(description="the file's text when it is a file inside the data directory")
    text_truncated: bool = Field(description="the text was cut at 64 KiB")
    text_note: str | None = Field(None, description="why there is no text, when there is none")


class TagSpan(Shape):
    tag: str
    revision_kref: str
    since: str
    until: str | None = Field(description="null while the revision still holds the tag")


class ProvenanceStep(Shape):
    revision_kref: str
    depth: int = Field(description="hops from the inspected revision")
    title: str | None = Field(description="the revision's title (else the start of its summary)")


class Provenance(Shape):
    derived_from: list[ProvenanceStep] = Field(description="DERIVED_FROM followed outwards (what this came from)")
    derived: list[ProvenanceStep] = Field(description="DERIVED_FROM followed inwards (what came from this)")
    supersedes: list[ProvenanceStep] = Field(description="SUPERSEDES followed outwards (what this replaced)")
    superseded_by: list[ProvenanceStep] = Field(description="SUPERSEDES followed inwards (what replaced this)")
    contested: list[EdgeView] = Field(description="CONTRADICTS edges from and to this revision")
    truncated: bool = Field(description="a walk stopped at 10 hops or 100 revisions, or the edges at 200")


class InspectResponse(Shape):
    item: ItemView
    revision: RevisionView | None = Field(description="the revision asked for, else the current one")
    revisions: list[RevisionView] = Field(description="newest first, at most 200")
    revisions_truncated: bool
    tags: list[TagSpan] = Field(description="the item's tag history (at most 500 spans)")
    artifacts: list[ArtifactWithText]
    provenance: Provenance


# -- POST /api/v1/deprecate, /restore; GET /api/v1/tags --------------------------------------------------------
class DeprecateRequest(Shape):
    kref: str = Field(min_length=1, max_length=KREF_MAX, description="the item's kref (kref://project/space/name.kind)")
    reason: str | None = Field(None, max_length=REASON_MAX,
                               description="kept in the item's metadata as deprecation_reason (a restore "
                                           "removes it)")


class RestoreRequest(Shape):
    """Restoring also removes the item's deprecation_reason."""

    kref: str = Field(min_length=1, max_length=KREF_MAX, description="the item's kref (kref://project/space/name.kind)")


class TagCount(Shape):
    tag: str
    revisions: int = Field(description="revisions holding the tag now")


class TagsResponse(Shape):
    project: str | None
    tags: list[TagCount] = Field(description="the most revisions first; at most 1000 (truncated says when more)")
    truncated: bool


# -- GET /api/v1/config --------------------------------------------------------------------------------------
class ConfigResponse(Shape):
    settings: SettingsView = Field(description="every setting as the appliance runs with it (the keys of "  # type: ignore[valid-type]  # derived from Settings
                                   "`kumiho-ce config show`); secrets (tokens, keys, passwords) read '********'")
    secrets: list[str] = Field(description="dotted names of the masked settings")


# -- jobs and the model ----------------------------------------------------------------------------------------
class JobProgress(Shape):
    done: int
    total: int


class JobView(Shape):
    job_id: str
    kind: str
    lane: Literal["interactive", "background"]
    state: Literal["queued", "running", "done", "failed", "cancelled"]
    description: str
    progress: JobProgress
    created_at: str
    note: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    error: dict[str, str] | None = None
    result: JsonValue = None


class JobsResponse(Shape):
    jobs: list[JobView]
    count: int


class ChatModelView(Shape):
    available: bool
    state: Literal["unavailable", "unloaded", "loading", "loaded"]
    model_id: str | None = None
    path: str | None = None
    reason: str | None = None
    load_seconds: float | None = None
    calls: int = 0


class ModelResponse(Shape):
    chat: ChatModelView
    next_dream_state: str | None
    idle_consolidation_minutes: float


# -- GET /api/v1/search --------------------------------------------------------------------------------------
class SearchHit(Shape):
    revision_kref: str
    score: float
    vector_score: float | None
    text_score: float | None
    item_kref: str | None = Field(description="null when the revision was deleted since it was indexed")
    name: str | None
    kind: str | None
    space: str | None
    title: str | None
    summary: str | None
    deprecated: bool | None


class SearchResponse(Shape):
    query: str
    mode: Literal["hybrid", "vector", "text"]
    count: int
    results: list[SearchHit]
