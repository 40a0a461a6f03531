"""What the services that use the language model share: whether the model can run, the job queue, waiting
for a job with a bound (then answering with its id), and edge discovery as a job (discover_edges runs it
and waits; reflect queues it for its captures and does not wait).

A service is given one ``ModelWork`` instead of inheriting these: the recall, write (through its edge discovery),
consolidation, maintenance and code services all hold the same one (``appliance.services.Parts.work``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from appliance.core.ports import ChatModel, ModelError, model_status
from appliance.errors import KumihoError
from appliance.graph import GraphStore
from appliance.jobs import Job, JobQueue
from appliance.memory.edges import EdgeDiscovery, EdgeRequest
from appliance.memory.model_options import NO_MODEL, ModelOptions
from appliance.memory.recall import Recaller


class ModelWork:
    def __init__(self, graph: GraphStore, recaller: Recaller, model: ChatModel, jobs: JobQueue,
                 options: ModelOptions) -> None:
        self.graph, self.recaller, self.model, self.jobs, self.options = graph, recaller, model, jobs, options

    def model_ready(self) -> str | None:
        """None when model-backed work can run; otherwise why not (for ``skipped:`` answers)."""
        status = model_status(self.model)
        return None if status.available else f"{NO_MODEL} ({status.reason or 'not available'})"

    def queue(self) -> JobQueue:
        return self.jobs

    def run(self, kind: str, work: Callable[[Job], dict[str, Any]], *, key: str, description: str
            ) -> dict[str, Any]:
        """Run ``work`` on the interactive lane while the caller waits (``wait_for``)."""
        return self.wait_for(self.queue().submit(kind, work, lane="interactive", key=key, description=description))

    def wait_for(self, job: Job) -> dict[str, Any]:
        """The job's result when it finishes within ``tool_wait_seconds``; its error as a tool error; else a
        note that it goes on in the background (its progress shows at /api/v1/jobs/<id>)."""
        if not self.jobs.wait(job, self.options.tool_wait_seconds):
            return {"status": "running", "job_id": job.id, "progress": job.to_dict()["progress"],
                    "message": f"still running after {self.options.tool_wait_seconds:g} s; it goes on in the "
                               f"background (GET /api/v1/jobs/{job.id} shows its progress)"}
        if job.state == "done":
            return dict(job.result) if isinstance(job.result, dict) else {"result": job.result}
        error = job.error or {"code": "cancelled", "message": "the job was cancelled"}
        failure = ModelError(f"{job.kind} failed: {error['message']}")
        failure.code = error["code"]  # the cause's code (model_timeout, model_output_invalid, …)
        raise failure

    def queue_edge_discovery(self, revision_krefs: list[str]) -> dict[str, Any]:
        """reflect's captures get edge discovery in the background; reflect does not wait."""
        unready = self.model_ready()
        if unready:
            return {"edge_discovery": f"skipped: {unready}"}
        requests = [EdgeRequest(kref) for kref in revision_krefs]
        job = self.queue().submit("discover_edges", lambda job: self.discover(requests, job),
                                  description=f"edge discovery after reflect ({len(requests)} memories)")
        return {"edge_discovery": "queued", "edge_discovery_job": job.id}

    def discover(self, requests: list[EdgeRequest], job: Job) -> dict[str, Any]:
        """The job body of edge discovery: every request in turn; one memory's failure does not stop the
        others (a single request's failure is the job's)."""
        finder = EdgeDiscovery(self.graph, self.recaller, self.model)
        edges: list[dict[str, Any]] = []
        queries: dict[str, list[str]] = {}
        errors = []
        for done, request in enumerate(requests):
            job.progress(done, len(requests), request.revision_kref)
            try:
                made, queries[request.revision_kref] = finder.discover(request, cancel=job.cancel)
                edges += made
            except KumihoError as exc:
                if len(requests) == 1:
                    raise
                errors.append({"revision_kref": request.revision_kref, "code": exc.code, "message": exc.message})
        job.progress(len(requests), len(requests))
        return {"edges": edges, "queries": queries, **({"errors": errors} if errors else {})}
