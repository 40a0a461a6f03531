"""The model-backed tools (discover_edges, dream_state) and what the model-backed work shares: the model,
the job queue, waiting for a job with a bound, and answering plainly when there is no model.

``ModelBackedTools`` is a part of ``MemoryService`` (which inherits it) kept in its own module; it reads the
service's graph, recaller, model, job queue and options.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from appliance.core import kref as krefs
from appliance.core import redaction
from appliance.core.ports import ChatModel, ModelError, model_status
from appliance.errors import InvalidArgument, KumihoError
from appliance.graph import GraphStore
from appliance.jobs import Job, JobQueue
from appliance.memory.client import Client
from appliance.memory.dream import DreamParams, DreamState
from appliance.memory.edges import EdgeDiscovery, EdgeRequest
from appliance.memory.recall import Recaller, check_spaces
from appliance.memory.spaces import project_of, scopes

NO_MODEL = "no local model"
Redact = Callable[[list[str]], list[str]]  # PII redaction of many texts at once (spaCy + patterns)


def patterns_only(texts: list[str]) -> list[str]:
    return [redaction.redact_pii(t)[0] for t in texts]


@dataclass(frozen=True)
class ModelOptions:
    """How the model-backed tools use the model (``[inference]`` and ``[maintenance]``)."""

    tool_wait_seconds: float = 120.0  # consolidate / discover_edges / dream_state wait this long, then go on
    reformulate_seconds: float = 20.0  # graph-augmented recall's query rewriting
    call_timeout: float = 300.0  # one summarisation or assessment call
    keep_raw_transcripts: bool = False  # D5: consolidation transcripts are PII-redacted unless this
    dream_min_age_days: float = 7.0


class ModelBackedTools:
    graph: GraphStore
    recaller: Recaller
    model: ChatModel
    jobs: JobQueue | None
    options: ModelOptions
    artifact_root: Path
    model_for: Callable[[dict[str, Any]], ChatModel]
    _clock: Callable[[], datetime]

    def model_ready(self) -> str | None:
        """None when model-backed work can run; otherwise why not (for ``skipped:`` answers)."""
        status = model_status(self.model)
        if not status.available or self.jobs is None:
            return f"{NO_MODEL} ({status.reason or 'no job queue'})"
        return None

    def discover_edges(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        source = self.graph.get_revision(args["revision_kref"])  # a bad kref is an error even without a model
        unready = self.model_ready()
        if unready:
            return {"edges": [], "count": 0, "skipped": f"{unready}: implication queries need the local model"}
        project = krefs.parse(source.kref).project
        request = EdgeRequest(
            source.kref, spaces=scopes(project, args.get("space_paths")),
            max_queries=_bounded(args.get("max_queries", 5), "max_queries", 1, 10),
            max_edges=_bounded(args.get("max_edges", 3), "max_edges", 1, 20),
            min_score=float(args.get("min_score", 0.3)), edge_type=str(args.get("edge_type") or "REFERENCED"),
            summary=str(args.get("summary") or ""))
        check_spaces(self.graph, request.spaces)
        job = self._jobs().submit("discover_edges", lambda job: self._discover([request], job), lane="interactive",
                                  description=f"discover edges of {source.kref}")
        result = self._wait_for(job)
        if "edges" not in result:
            return {"edges": [], "count": 0, **result}
        return {"edges": result["edges"], "count": len(result["edges"]),
                "queries": result["queries"][source.kref], "job_id": job.id}

    def _queue_edge_discovery(self, revision_krefs: list[str]) -> dict[str, Any]:
        """D12: reflect's captures get edge discovery in the background; reflect does not wait."""
        unready = self.model_ready()
        if unready:
            return {"edge_discovery": f"skipped: {unready}"}
        requests = [EdgeRequest(kref) for kref in revision_krefs]
        job = self._jobs().submit("discover_edges", lambda job: self._discover(requests, job),
                                  description=f"edge discovery after reflect ({len(requests)} memories)")
        return {"edge_discovery": "queued", "edge_discovery_job": job.id}

    def _discover(self, requests: list[EdgeRequest], job: Job) -> dict[str, Any]:
        finder = EdgeDiscovery(self.graph, self.recaller, self.model)
        edges: list[dict[str, Any]] = []
        queries: dict[str, list[str]] = {}
        errors = []
        for done, request in enumerate(requests):
            job.progress(done, len(requests), request.revision_kref)
            try:
                made, queries[request.revision_kref] = finder.discover(request, cancel=job.cancel)
                edges += made
            except KumihoError as exc:  # one memory's failure does not stop the others
                if len(requests) == 1:
                    raise
                errors.append({"revision_kref": request.revision_kref, "code": exc.code, "message": exc.message})
        job.progress(len(requests), len(requests))
        return {"edges": edges, "queries": queries, **({"errors": errors} if errors else {})}

    def dream_state(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        project = project_of(args, client)
        self.graph.get_project(project)
        model = self.model
        if any(args.get(k) for k in ("provider", "model", "base_url", "api_key")):
            model = self.model_for(args)  # D6 is enforced there; the run's job closes it when done
        return self.run_dream(project, args, model, wait=True)

    def run_dream(self, project: str, args: dict[str, Any], model: ChatModel, *, wait: bool = True
                  ) -> dict[str, Any]:
        params = DreamParams(
            project=project, batch_size=_bounded(args.get("batch_size", 20), "batch_size", 1, 50),
            dry_run=bool(args.get("dry_run")),
            max_deprecation_ratio=float(args.get("max_deprecation_ratio", 0.5)),
            allow_published_deprecation=bool(args.get("allow_published_deprecation")),
            extra_instructions=str(args.get("extra_instructions") or ""),
            min_age_days=self.options.dream_min_age_days)
        dream = DreamState(self.graph, model, self.artifact_root, clock=self._clock,
                           call_timeout=self.options.call_timeout)
        own_model = model is not self.model  # chosen for this run: closed when the run ends
        unready = None if own_model else self.model_ready()
        if unready:
            return {"success": params.dry_run, "project": project, "dry_run": params.dry_run,
                    "revisions_assessed": 0, "would_assess": dream.pending_count(params), "deprecated": 0,
                    "skipped": f"{unready}: Dream State assessments need the local model"}

        def work(job: Job) -> dict[str, Any]:
            try:
                return dream.run(params, progress=job.progress, cancel=job.cancel)
            finally:
                if own_model and hasattr(model, "close"):
                    model.close()

        job = self._jobs().submit(  # one run per project and kind at a time (a scheduled one, a dry run…)
            "dream_state", work, key=None if own_model else f"dream_state:{project}:{params.dry_run}",
            description=f"Dream State of {project}" + (" (dry run)" * params.dry_run))
        if not wait:
            return {"success": True, "status": "queued", "job_id": job.id}
        report = self._wait_for(job)
        failed = bool(report.get("errors")) and not report.get("revisions_assessed") and "status" not in report
        return {"success": not failed, **report}

    def _jobs(self) -> JobQueue:
        if self.jobs is None:
            raise ModelError(f"{NO_MODEL}: the appliance runs without a job queue")
        return self.jobs

    def _wait_for(self, job: Job) -> dict[str, Any]:
        """The job's result when it finishes within ``tool_wait_seconds``; its error as a tool error; else a
        note that it goes on in the background (its progress shows at /api/jobs/<id>)."""
        if not self.jobs or not self.jobs.wait(job, self.options.tool_wait_seconds):
            return {"status": "running", "job_id": job.id, "progress": job.to_dict()["progress"],
                    "message": f"still running after {self.options.tool_wait_seconds:g} s; it goes on in the "
                               f"background (GET /api/jobs/{job.id} shows its progress)"}
        if job.state == "done":
            return dict(job.result) if isinstance(job.result, dict) else {"result": job.result}
        error = job.error or {"code": "cancelled", "message": "the job was cancelled"}
        failure = ModelError(f"{job.kind} failed: {error['message']}")
        failure.code = error["code"]  # the cause's code (model_timeout, model_output_invalid, …)
        raise failure


def _configured_model_only(args: dict[str, Any]) -> ChatModel:
    raise InvalidArgument("provider: this appliance has no model selection; Dream State uses the configured model",
                          field="provider")


def _bounded(value: Any, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgument(f"{field}: must be a whole number from {low} to {high} (got {value!r})", field=field)
    return value
