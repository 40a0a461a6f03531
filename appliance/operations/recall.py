"""Recall: what an agent reads before it answers (engage, recall, retrieve, full-text search)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, model_validator

from appliance.operations.definition import Input, Operation
from appliance.operations.fields import AuthToken, MemoryTypes, Name, Project, Query, SpacePath, SpacePaths, Topic

Limit = Annotated[int, Field(ge=1, le=1000)]  # above 100 is treated as 100
MinScore = Annotated[float, Field(ge=0.0, le=1.0)]
RecallMode = Literal["full", "summarized"]
Words = Annotated[list[Topic], Field(max_length=32)]
RETRIEVE_MODES = {"latest": ("latest", "newest", "recent", "most_recent"),
                  "first": ("first", "earliest", "oldest", "initial"), "search": ("search",)}


def _retrieve_mode(mode: str) -> str:
    """search, latest or first, whichever of Kumiho's words for it was sent ("most recent", "oldest", …); ""
    stays "": retrieve then reads the mode from the query."""
    normal = re.sub(r"[\s-]+", "_", mode.strip().lower())
    found = next((name for name, words in RETRIEVE_MODES.items() if normal in words), None)
    if found is None and normal:
        raise ValueError(f"mode: {mode!r} is not a retrieve mode; use search, latest or first")
    return found or ""


def _kind(kind: str) -> str:
    return kind or "conversation"  # "" is the default kind, as Kumiho reads it


RetrieveMode = Annotated[str, Field(max_length=32), AfterValidator(_retrieve_mode)]
MemoryItemKind = Annotated[Name, AfterValidator(_kind)]


class RecallInput(Input):
    query: Query
    limit: Limit = 5
    min_score: MinScore = 0.0
    space_paths: SpacePaths | None = None
    memory_types: MemoryTypes | None = None
    graph_augmented: bool = False
    recall_mode: RecallMode = "summarized"


class EngageInput(Input):
    query: Query
    include_insights: bool = False
    include_learned_sources: bool = Field(False, description="with include_insights: up to three experiences or "
                                          "pattern proposals join the synthesis request's sources")
    current_context: str | None = Field(None, max_length=4000, description="with include_insights: goes into the "
                                        "synthesis request (recall itself uses the query); without it, unused")
    goals: Annotated[list[Annotated[str, Field(max_length=500)]], Field(
        max_length=8, description="with include_insights: go into the synthesis request; without it, unused"
    )] | None = None
    limit: Limit = 5
    min_score: MinScore = 0.0
    space_paths: SpacePaths | None = None
    memory_types: MemoryTypes | None = None
    graph_augmented: bool = False
    recall_mode: RecallMode = "summarized"

    @model_validator(mode="after")
    def _learned_sources_need_insights(self) -> EngageInput:
        # Kumiho refuses it too. current_context and goals are accepted alone (Kumiho's clients may always send
        # current_context): engage answers that they went unused.
        if self.include_learned_sources and not self.include_insights:
            raise ValueError("include_learned_sources: requires include_insights=true; the learned sources join "
                             "the synthesis request that engage returns with insights (recall itself uses the "
                             "query). Add include_insights=true or leave it out")
        return self


class RetrieveInput(Input):
    project: Project = None
    query: Query | None = None
    keywords: Words | None = None
    topics: Words | None = None
    space_paths: SpacePaths | None = None
    bundle_names: Annotated[list[Name], Field(max_length=16)] | None = None
    memory_item_kind: MemoryItemKind = "conversation"
    limit: Limit = 5
    mode: RetrieveMode = "search"
    include_revision_metadata: bool = True
    memory_types: MemoryTypes | None = None


class FulltextSearchInput(Input):
    query: Query
    context: SpacePath = ""
    kind: Name = ""
    include_deprecated: bool = False
    include_revision_metadata: bool = False
    include_artifact_metadata: bool = False
    include_metadata: bool = False
    limit: Limit = 20
    auth_token: AuthToken = ""


OPERATIONS = (
    Operation("kumiho_memory_engage", "Engage memory before responding",
              "Check memory before answering: recall relevant memories and get a prompt-ready `context` string "
              "plus `source_krefs` to pass to kumiho_memory_reflect afterwards. With include_insights=true also "
              "an insight brief and a synthesis request for your own model to answer (current_context and goals "
              "go into it); its answers are hypotheses, not established conclusions.",
              EngageInput, read_only=True, idempotent=True),
    Operation("kumiho_memory_recall", "Recall memories",
              "Semantic recall of long-term memories (hybrid vector + full-text search, time decay, diversity); "
              "no context string, no buffering.",
              RecallInput, read_only=True, idempotent=True),
    Operation("kumiho_memory_retrieve", "Retrieve memories",
              "Fuzzy/hybrid retrieval of memory items with modes search, latest and first, and bundle/name "
              "fallbacks.",
              RetrieveInput, read_only=True, idempotent=True),
    Operation("kumiho_fulltext_search", "Full-text search",
              'Typo-tolerant full-text search over items ("transprot" finds "transport"); `context` restricts to '
              "a project/space path prefix.",
              FulltextSearchInput, read_only=True, idempotent=True),
)
