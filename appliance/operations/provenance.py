"""Provenance: edges between revisions and the analyses that walk them (dependencies, dependents, impact,
paths, a provenance summary). Every walk is bounded twice: in depth (``max_depth``, at most
``MAX_DEPTH`` hops) and in the revisions it returns (``appliance.services.provenance``)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from appliance.operations.definition import Input, Operation
from appliance.operations.fields import EdgeType, EdgeTypes, Kref, StringMetadata

MAX_DEPTH = 20  # hops; the graph's traversal limit (appliance.graph.links.MAX_DEPTH)

# The edge types an agent may create: Kumiho's SDK constants except SUPERSEDES, which belief revision writes
# (reflect's `revises`, Dream State) together with the replaced memory's status: an edge alone would say less.
CreatableEdgeType = Literal["DEPENDS_ON", "DERIVED_FROM", "REFERENCED", "CONTAINS", "CREATED_FROM", "PRODUCED_BY",
                            "MIGRATED_FROM", "BELONGS_TO", "SUPPORTS"]

Depth = Annotated[int, Field(ge=1, le=MAX_DEPTH)]


class CreateEdgeInput(Input):
    source_kref: Kref
    target_kref: Kref
    edge_type: CreatableEdgeType
    metadata: StringMetadata | None = None


class DeleteEdgeInput(Input):
    source_kref: Kref
    target_kref: Kref
    edge_type: CreatableEdgeType


class GetEdgesInput(Input):
    revision_kref: Kref
    direction: Literal["outgoing", "incoming", "both"] = "both"
    edge_type: EdgeType | None = None


class NearInput(Input):
    """Dependencies or dependents: a transitive walk out of (or into) one revision."""

    revision_kref: Kref
    max_depth: Depth = 5
    edge_types: EdgeTypes | None = None


class ProvenanceSummaryInput(Input):
    revision_kref: Kref
    max_depth: Depth = 10


class ImpactInput(Input):
    revision_kref: Kref
    max_depth: Depth = 10
    edge_types: EdgeTypes | None = None


class FindPathInput(Input):
    source_kref: Kref
    target_kref: Kref
    max_depth: Depth = 10
    edge_types: EdgeTypes | None = None


OPERATIONS = (
    Operation("kumiho_get_dependencies", "Get dependencies",
              "What a revision depends on: the revisions its outgoing edges reach, transitively, nearest first.",
              NearInput, read_only=True, idempotent=True),
    Operation("kumiho_get_dependents", "Get dependents",
              "What depends on a revision: the revisions whose edges reach it, transitively, nearest first.",
              NearInput, read_only=True, idempotent=True),
    Operation("kumiho_get_provenance_summary", "Summarize provenance",
              "A revision's upstream dependencies (at most 50) with the generation parameters recorded in their "
              "metadata (model, seed, resolution, width, height, cfg, steps, sampler, scheduler, prompt, "
              "negative_prompt, denoise).",
              ProvenanceSummaryInput, read_only=True, idempotent=True),
    Operation("kumiho_analyze_impact", "Analyze change impact",
              "The revisions a change to this one would impact (its dependents), each with its distance.",
              ImpactInput, read_only=True, idempotent=True),
    Operation("kumiho_find_path", "Find a path between revisions",
              "The shortest path of edges from one revision to another.",
              FindPathInput, read_only=True, idempotent=True),
    Operation("kumiho_get_edges", "List edges",
              "List the edges of a revision by direction and type.",
              GetEdgesInput, read_only=True, idempotent=True),
    Operation("kumiho_create_edge", "Create an edge",
              "Create a typed edge from one revision to another (an item kref means its latest revision); "
              "creating an existing edge again returns it.",
              CreateEdgeInput, idempotent=True),
    Operation("kumiho_delete_edge", "Delete an edge",
              "Delete the edge of a type from one revision to another.",
              DeleteEdgeInput, destructive=True, idempotent=True),
)
