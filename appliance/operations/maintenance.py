"""Maintenance: edge discovery and Dream State, the operations that use the language model on the graph."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from appliance.operations.definition import Input, Operation
from appliance.operations.fields import EdgeType, Kref, Project, SpacePaths


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
    extra_instructions: str | None = Field(None, max_length=4000)
    maintain_graph: bool = False
    maintenance_llm: bool = False
    code_project: str | None = Field(None, max_length=128)
    provider: Literal["openai", "anthropic", "gemini"] | None = None
    model: str | None = Field(None, max_length=4096, description="a chat model of the manifest by name (kumiho-ce "
                              "models list), installed; default: the configured model")
    api_key: str | None = Field(None, max_length=1024, description="not accepted: the endpoint's key is the "
                                "configured inference.endpoint_api_key")
    base_url: str | None = Field(None, max_length=2048, description="only the configured inference.endpoint_url "
                                 "(omit it to use that)")


OPERATIONS = (
    Operation("kumiho_memory_discover_edges", "Discover memory relationships",
              "Have the local model write implication queries for a memory, search them and link the best hits "
              "(REFERENCED by default). Skipped, with a note, when no local model is configured.",
              DiscoverEdgesInput),
    Operation("kumiho_memory_dream_state", "Run a Dream State consolidation cycle",
              "Run a Dream State maintenance cycle: the local model assesses recent memories; stale ones are "
              "deprecated (capped, guarded), tags/metadata/edges added, a report written. dry_run reports what "
              "would be assessed and changes nothing.",
              DreamStateInput, destructive=True),
)
