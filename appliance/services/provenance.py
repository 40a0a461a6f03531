"""Edges and the provenance analyses over them, in the result shapes of Kumiho's reference tools.

Every walk is bounded: in depth by the input (``max_depth``, 1..20 hops) and in what it returns by the limits
below, nearest revisions first; an answer cut at a limit says ``truncated: true``. The graph walks with
Kùzu's shortest-path search, so each revision is reached once, at its shortest distance."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from appliance.core import kref as krefs
from appliance.core.model import Traversal
from appliance.errors import InvalidArgument, NotFound
from appliance.graph import GraphStore
from appliance.memory.client import Client
from appliance.memory.views import edge_view
from appliance.operations.provenance import (
    CreateEdgeInput,
    DeleteEdgeInput,
    FindPathInput,
    GetEdgesInput,
    ImpactInput,
    NearInput,
    ProvenanceSummaryInput,
)

if TYPE_CHECKING:
    from appliance.services import Handler

MAX_EDGES = 1000  # edges one kumiho_get_edges answer lists (oldest first)
MAX_REACHED = 100  # revisions one dependencies / dependents / impact answer lists (the reference's traversal limit)
PROVENANCE_LIMIT = 50  # upstream revisions a provenance summary reads (as the reference does)
# The metadata keys a provenance summary reports: the generation parameters image pipelines
# (ComfyUI, Stable Diffusion) record on what they produce.
GENERATION_PARAMS = ("model", "seed", "resolution", "width", "height", "cfg", "steps", "sampler", "scheduler",
                     "prompt", "negative_prompt", "denoise")


class ProvenanceService:
    def __init__(self, graph: GraphStore) -> None:
        self.graph = graph

    def handlers(self) -> dict[str, Handler]:
        return {"kumiho_create_edge": self.create_edge, "kumiho_delete_edge": self.delete_edge,
                "kumiho_get_edges": self.get_edges, "kumiho_get_dependencies": self.dependencies,
                "kumiho_get_dependents": self.dependents,
                "kumiho_get_provenance_summary": self.provenance_summary,
                "kumiho_analyze_impact": self.analyze_impact, "kumiho_find_path": self.find_path}

    # -- edges -----------------------------------------------------------------------------------------
    def create_edge(self, args: CreateEdgeInput, client: Client) -> dict[str, Any]:
        source, target = self._ends(args.source_kref, args.target_kref)
        if source == target:
            raise InvalidArgument("target_kref: an edge joins two different revisions; this is the source "
                                  "revision itself", field="target_kref")
        edge = self.graph.create_edge(source, target, args.edge_type, dict(args.metadata or {}))
        return {"created": True, "edge": edge_view(edge)}

    def delete_edge(self, args: DeleteEdgeInput, client: Client) -> dict[str, Any]:
        source, target = self._ends(args.source_kref, args.target_kref)
        deleted = self.graph.delete_edge(source, target, args.edge_type)
        return {"deleted": deleted, "source_kref": args.source_kref, "target_kref": args.target_kref,
                "edge_type": args.edge_type}

    def get_edges(self, args: GetEdgesInput, client: Client) -> dict[str, Any]:
        revision = self._revision(args.revision_kref, "revision_kref")
        page = self.graph.get_edges(revision, edge_type=args.edge_type or "", direction=args.direction,
                                    page_size=MAX_EDGES)
        return {"revision_kref": args.revision_kref, "direction": args.direction,
                "edges": [edge_view(e) for e in page.items], "count": len(page.items),
                "truncated": page.next_cursor is not None}

    # -- walks -----------------------------------------------------------------------------------------
    def dependencies(self, args: NearInput, client: Client) -> dict[str, Any]:
        found = self._walk(args.revision_kref, "outgoing", args.max_depth, args.edge_types, MAX_REACHED)
        reached = [r.revision_kref for r in found.reached]
        return {"revision_kref": args.revision_kref, "dependencies": reached, "count": len(reached),
                "max_depth": args.max_depth, "truncated": found.truncated}

    def dependents(self, args: NearInput, client: Client) -> dict[str, Any]:
        found = self._walk(args.revision_kref, "incoming", args.max_depth, args.edge_types, MAX_REACHED)
        reached = [r.revision_kref for r in found.reached]
        return {"revision_kref": args.revision_kref, "dependents": reached, "count": len(reached),
                "max_depth": args.max_depth, "truncated": found.truncated}

    def analyze_impact(self, args: ImpactInput, client: Client) -> dict[str, Any]:
        found = self._walk(args.revision_kref, "incoming", args.max_depth, args.edge_types, MAX_REACHED)
        impacted = [{"revision_kref": r.revision_kref, "impact_depth": r.depth} for r in found.reached]
        return {"revision_kref": args.revision_kref, "impacted_revisions": impacted, "count": len(impacted),
                "max_depth": args.max_depth, "truncated": found.truncated}

    def provenance_summary(self, args: ProvenanceSummaryInput, client: Client) -> dict[str, Any]:
        """The revision itself (role ``target``) and each upstream revision that records generation
        parameters (role ``dependency``); ``dependency_count`` counts every upstream revision read."""
        target = self.graph.get_revision(self._revision(args.revision_kref, "revision_kref"))
        found = self._walk(target.kref, "outgoing", args.max_depth, None, PROVENANCE_LIMIT)
        summary = [{"kref": target.kref, "role": "target", "params": _generation_params(target.metadata)}]
        upstream = self.graph.revision_metadata([r.revision_kref for r in found.reached])
        for reached in found.reached:  # nearest first; one deleted since the walk is left out
            params = _generation_params(upstream.get(reached.revision_kref, {}))
            if params:
                summary.append({"kref": reached.revision_kref, "role": "dependency", "params": params})
        return {"revision_kref": args.revision_kref, "provenance_summary": summary,
                "dependency_count": len(found.reached), "truncated": found.truncated}

    def find_path(self, args: FindPathInput, client: Client) -> dict[str, Any]:
        source, target = self._ends(args.source_kref, args.target_kref)
        paths = self.graph.shortest_path(source, target, list(args.edge_types or ()), args.max_depth)
        answer: dict[str, Any] = {"source_kref": args.source_kref, "target_kref": args.target_kref}
        if not paths:
            return {**answer, "path_found": False,
                    "message": f"No path found between revisions within {args.max_depth} hops"}
        steps = paths[0]
        return {**answer, "path_found": True, "total_depth": len(steps),
                "steps": [{"revision_kref": s.revision_kref, "edge_type": s.edge_type, "depth": s.depth}
                          for s in steps]}

    # -- helpers ---------------------------------------------------------------------------------------
    def _walk(self, kref: str, direction: str, max_depth: int, edge_types: list[str] | None,
              limit: int) -> Traversal:
        origin = self._revision(kref, "revision_kref")
        return self.graph.traverse(origin, direction, list(edge_types or ()), max_depth, limit)

    def _ends(self, source_kref: str, target_kref: str) -> tuple[str, str]:
        """Both ends as exact revision krefs; both are parsed before either is read."""
        krefs.parse(source_kref, "source_kref")
        krefs.parse(target_kref, "target_kref")
        return self._revision(source_kref, "source_kref"), self._revision(target_kref, "target_kref")

    def _revision(self, kref: str, field: str) -> str:
        """The exact revision kref a kref names (an item kref: its latest revision), errors naming ``field``."""
        krefs.parse(kref, field)
        try:
            return self.graph.get_revision(kref).kref
        except NotFound as exc:
            raise NotFound(exc.message, field=field) from None


def _generation_params(metadata: dict[str, str]) -> dict[str, str]:
    return {key: metadata[key] for key in GENERATION_PARAMS if key in metadata}
