"""The maintenance family: edge discovery and Dream State (model-backed), space profiles and decomposing a
memory into the typed graph (keyless). The scheduler (``appliance.maintenance``) runs Dream State through
``run_dream`` too."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from appliance.core import kref as krefs
from appliance.core.ports import ChatModel
from appliance.errors import InvalidArgument
from appliance.graph import GraphStore
from appliance.jobs import Job
from appliance.memory import space_profile, typed_graph
from appliance.memory.client import Client
from appliance.memory.dream import DreamParams, DreamState
from appliance.memory.edges import EdgeRequest
from appliance.memory.model_options import ModelOptions
from appliance.memory.recall import check_spaces
from appliance.memory.spaces import check_project, project_for, scopes
from appliance.operations.maintenance import DecomposeInput, DiscoverEdgesInput, DreamStateInput, SpaceProfileInput
from appliance.services.model_work import ModelWork

if TYPE_CHECKING:
    from appliance.services import Handler

ModelFor = Callable[..., ChatModel]  # a call's provider=, model=, base_url=, api_key= → the model to use


class MaintenanceService:
    def __init__(self, graph: GraphStore, work: ModelWork, *, artifact_root: Path, options: ModelOptions,
                 model_for: ModelFor, clock: Callable[[], datetime]) -> None:
        self.graph, self.work, self.artifact_root, self.options = graph, work, artifact_root, options
        self.model_for, self._clock = model_for, clock

    def handlers(self) -> dict[str, Handler]:
        return {"kumiho_memory_discover_edges": self.discover_edges, "kumiho_memory_dream_state": self.dream_state,
                "kumiho_memory_space_profile": self.space_profile, "kumiho_memory_decompose": self.decompose}

    # -- edge discovery -----------------------------------------------------------------------------------
    def discover_edges(self, args: DiscoverEdgesInput, client: Client) -> dict[str, Any]:
        source = self.graph.get_revision(args.revision_kref)  # a bad kref is an error even without a model
        unready = self.work.model_ready()
        if unready:
            return {"edges": [], "count": 0, "skipped": f"{unready}: implication queries need the local model"}
        request = EdgeRequest(source.kref, spaces=scopes(krefs.parse(source.kref).project, args.space_paths),
                              max_queries=args.max_queries, max_edges=args.max_edges, min_score=args.min_score,
                              edge_type=args.edge_type, summary=args.summary)
        check_spaces(self.graph, request.spaces)
        job = self.work.queue().submit("discover_edges", lambda job: self.work.discover([request], job),
                                       lane="interactive", description=f"discover edges of {source.kref}")
        result = self.work.wait_for(job)
        if "edges" not in result:
            return {"edges": [], "count": 0, **result}
        return {"edges": result["edges"], "count": len(result["edges"]),
                "queries": result["queries"][source.kref], "job_id": job.id}

    # -- Dream State ----------------------------------------------------------------------------------------
    def dream_state(self, args: DreamStateInput, client: Client) -> dict[str, Any]:
        project = project_for(args.project, client)
        self.graph.get_project(project)
        model = self.work.model
        if args.provider or args.model or args.base_url or args.api_key:
            # only what the operator set up (appliance.inference.selection); the run's job closes it when done
            model = self.model_for(provider=args.provider, model=args.model, base_url=args.base_url,
                                   api_key=args.api_key)
        return self.run_dream(self.params(project, args), model, wait=True)

    def params(self, project: str, args: DreamStateInput) -> DreamParams:
        return DreamParams(project=project, batch_size=args.batch_size, dry_run=args.dry_run,
                           max_deprecation_ratio=args.max_deprecation_ratio,
                           allow_published_deprecation=args.allow_published_deprecation,
                           extra_instructions=args.extra_instructions or "",
                           min_age_days=self.options.dream_min_age_days, maintain_graph=args.maintain_graph,
                           maintenance_llm=args.maintenance_llm,
                           code_project=check_project(args.code_project, "code_project") if args.code_project else None)

    def run_dream(self, params: DreamParams, model: ChatModel, *, wait: bool = True) -> dict[str, Any]:
        dream = DreamState(self.graph, model, self.artifact_root, clock=self._clock,
                           call_timeout=self.options.call_timeout)
        own_model = model is not self.work.model  # chosen for this run: closed when the run ends
        unready = None if own_model else self.work.model_ready()
        if unready and not params.maintain_graph:
            return {"success": params.dry_run, "project": params.project, "dry_run": params.dry_run,
                    "revisions_assessed": 0, "would_assess": dream.pending_count(params), "deprecated": 0,
                    "skipped": f"{unready}: Dream State assessments need the local model"}
        if unready:  # the graph maintenance needs no model: it runs alone, the memories wait for one
            params = dataclasses.replace(params, assess=False)

        def work(job: Job) -> dict[str, Any]:
            try:
                return dream.run(params, progress=job.progress, cancel=job.cancel)
            finally:
                if own_model and hasattr(model, "close"):
                    model.close()

        job = self.work.queue().submit(  # one run per project and kind at a time (a scheduled one, a dry run…)
            "dream_state", work, key=None if own_model else f"dream_state:{params.project}:{params.dry_run}",
            description=f"Dream State of {params.project}" + (" (dry run)" * params.dry_run))
        if not wait:
            return {"success": True, "status": "queued", "job_id": job.id}
        report = self.work.wait_for(job)
        failed = bool(report.get("errors")) and not report.get("revisions_assessed") and "status" not in report \
            and params.assess
        if unready:
            report["skipped"] = f"{unready}: no memories were assessed; only the graph maintenance ran"
        return {"success": not failed, **report}

    # -- space profiles -------------------------------------------------------------------------------------
    def space_profile(self, args: SpaceProfileInput, client: Client) -> dict[str, Any]:
        project = project_for(args.project, client)
        return space_profile.profile_project(self.graph, project, args.window_days, dry_run=args.dry_run,
                                             now=self._clock())

    # -- decompose --------------------------------------------------------------------------------------------
    def decompose(self, args: DecomposeInput, client: Client) -> dict[str, Any]:
        found = self.graph.resolve(args.kref)
        if found.revision is None:
            raise InvalidArgument("kref: name a stored memory revision (or its item); decompose anchors the "
                                  "typed nodes to it", field="kref")
        project = check_project(args.project or krefs.parse(found.revision.kref).project)
        self.graph.get_project(project)
        parts = typed_graph.Decomposition(
            entities=tuple(typed_graph.Entity(e.name, e.type or "", tuple(e.aliases or ()))
                           for e in args.entities or ()),
            facts=tuple(typed_graph.Fact(f.statement, tuple(f.about or ()), f.type or "", f.valid_from or "",
                                         f.valid_to or "") for f in args.facts or ()),
            relations=tuple((r.subject, r.predicate, r.object) for r in args.relations or ()),
            supersedes=tuple(typed_graph.Link(s.statement, s.replaces, s.reason or "") for s in args.supersedes or ()),
            contradicts=tuple(typed_graph.Link(c.statement, c.conflicts_with, c.reason or "")
                              for c in args.contradicts or ()))
        counts = typed_graph.decompose(self.graph, found.revision, project, parts)
        return {"decomposed": counts, "kref": found.revision.kref, "project": project}
