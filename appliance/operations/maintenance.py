"""Maintenance: edge discovery and Dream State (the operations that use the language model on the graph),
space profiles, and decomposing a memory into the typed graph (keyless)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from appliance.operations.definition import Input, Operation
from appliance.operations.fields import EdgeType, Kref, Name, Project, SpacePaths


class DiscoverEdgesInput(Input):
    revision_kref: Kref
    summary: str = Field(max_length=16384)
    max_queries: int = Field(5, ge=1, le=10)
    max_edges: int = Field(3, ge=1, le=20)
    min_score: float = Field(0.3, ge=0.0, le=1.0)
    edge_type: EdgeType = "REFERENCED"
    space_paths: SpacePaths | None = None


class DreamStateInput(Input):
    project: Project = None
    dry_run: bool = False
    batch_size: int = Field(20, ge=1, le=50)
    max_deprecation_ratio: float = Field(0.5, ge=0.1, le=0.9)
    allow_published_deprecation: bool = False
    extra_instructions: str | None = Field(None, max_length=4000, description="added to the assessment prompt as "
                                           "deployment policy (it can only make the model more conservative)")
    maintain_graph: bool = Field(False, description="also maintain the typed graph (entities, facts): merge "
                                 "duplicates, prune nodes left without edges; works without a model")
    maintenance_llm: bool = Field(False, description="with maintain_graph: let the local model propose entity "
                                  "merges (skipped, and said, without a model)")
    code_project: Name | None = Field(None, description="with maintain_graph: also deduplicate the decisions of "
                                      "this code-decision project")
    provider: Literal["openai", "anthropic", "gemini"] | None = None
    model: str | None = Field(None, max_length=4096, description="a chat model of the manifest by name (kumiho-ce "
                              "models list), installed; default: the configured model")
    api_key: str | None = Field(None, max_length=1024, description="not accepted: the endpoint's key is the "
                                "configured inference.endpoint_api_key")
    base_url: str | None = Field(None, max_length=2048, description="only the configured inference.endpoint_url "
                                 "(omit it to use that)")

    @model_validator(mode="after")
    def _maintenance_options_need_maintenance(self) -> DreamStateInput:
        for name in ("maintenance_llm", "code_project"):
            if getattr(self, name) and not self.maintain_graph:
                raise ValueError(f"{name}: applies to graph maintenance; set maintain_graph=true as well "
                                 f"(or leave {name} out)")
        return self


class SpaceProfileInput(Input):
    project: Project = None
    window_days: int = Field(30, ge=1, le=3650)
    dry_run: bool = False


Statement = Annotated[str, Field(min_length=1, max_length=2000)]
EntityName = Annotated[str, Field(min_length=1, max_length=200)]


class EntityInput(Input):
    name: EntityName
    type: str | None = Field(None, max_length=64)
    aliases: Annotated[list[EntityName], Field(max_length=8)] | None = None


class FactInput(Input):
    statement: Statement
    about: Annotated[list[EntityName], Field(max_length=8)] | None = None
    type: str | None = Field(None, max_length=64)
    valid_from: str | None = Field(None, max_length=64)
    valid_to: str | None = Field(None, max_length=64)


class RelationInput(Input):
    subject: EntityName
    predicate: str = Field(min_length=1, max_length=64)
    object: EntityName


class SupersedesInput(Input):
    statement: Statement
    replaces: str = Field(min_length=1, max_length=2000, description="the replaced fact's statement, or its kref")
    reason: str | None = Field(None, max_length=500)


class ContradictsInput(Input):
    statement: Statement
    conflicts_with: str = Field(min_length=1, max_length=2000, description="the other fact's statement, or its "
                                "kref")
    reason: str | None = Field(None, max_length=500)


class DecomposeInput(Input):
    kref: Kref
    project: Name | None = None
    entities: Annotated[list[EntityInput], Field(max_length=50)] | None = None
    facts: Annotated[list[FactInput], Field(max_length=50)] | None = None
    relations: Annotated[list[RelationInput], Field(max_length=50)] | None = None
    supersedes: Annotated[list[SupersedesInput], Field(max_length=20)] | None = None
    contradicts: Annotated[list[ContradictsInput], Field(max_length=20)] | None = None


OPERATIONS = (
    Operation("kumiho_memory_discover_edges", "Discover memory relationships",
              "Have the local model write implication queries for a memory, search them and link the best hits "
              "(REFERENCED by default). Skipped, with a note, when no local model is configured.",
              DiscoverEdgesInput),
    Operation("kumiho_memory_dream_state", "Run a Dream State consolidation cycle",
              "Run a Dream State maintenance cycle: the local model assesses recent memories; stale ones are "
              "deprecated (capped, guarded), tags/metadata/edges added, a report written. dry_run reports what "
              "would be assessed and changes nothing. maintain_graph also merges duplicate entities and facts of "
              "the typed graph and prunes nodes left without edges.",
              DreamStateInput, destructive=True),
    Operation("kumiho_memory_space_profile", "Profile memory spaces",
              "Profile every space of a project without a model: churn, evidence and stability scores, a label "
              "(canonical, working or correspondence; a space's space_class metadata pins it) and the drift "
              "since the last run, kept as a _space_profile.space-profile item per space. dry_run writes nothing.",
              SpaceProfileInput),
    Operation("kumiho_memory_decompose", "Decompose a memory into the typed graph",
              "Write entities, facts, relations and supersedes/contradicts links that you extracted from a stored "
              "memory as typed graph nodes anchored to its revision (no model needed), all in one transaction.",
              DecomposeInput),
)
