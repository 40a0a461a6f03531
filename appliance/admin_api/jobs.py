"""Background jobs and the model: what runs, how far it got, and cancelling it (MISSION §4).

They live under ``/api/v1``; the first paths (``/api/jobs…``, ``/api/model``) answer with a 308 redirect to
the new ones (the query string kept; 308 keeps the method, so a cancel still arrives as a POST) for one
release.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

from litestar import Controller, Request, get, post
from litestar.datastructures import State
from litestar.params import Parameter, QueryParameter
from litestar.response import Redirect

from appliance.admin_api.console_shapes import ChatModelView, JobsResponse, JobView, ModelResponse
from appliance.core.ports import model_status

JobId = Annotated[str, Parameter(description="the job's id", min_length=1, max_length=128)]


class JobsController(Controller):
    path = "/api/v1"
    tags = ("jobs",)

    @get("/jobs", summary="Recent and running background jobs, newest first", sync_to_thread=False)
    def jobs(self, state: State, kind: Annotated[str | None, QueryParameter(
            description="only jobs of this kind (e.g. consolidate, discover_edges, dream_state)",
            max_length=128)] = None) -> JobsResponse:
        found = [JobView.model_validate(job.to_dict()) for job in state.services.jobs.list(kind=kind)]
        return JobsResponse(jobs=found, count=len(found))

    @get("/jobs/{job_id:str}", summary="One job: state, progress, result or error", sync_to_thread=False)
    def job(self, state: State, job_id: JobId) -> JobView:
        return JobView.model_validate(state.services.jobs.get(job_id).to_dict())

    @post("/jobs/{job_id:str}/cancel", summary="Ask a job to stop (its model call stops at the next token)",
          sync_to_thread=False, status_code=200)
    def cancel(self, state: State, job_id: JobId) -> JobView:
        return JobView.model_validate(state.services.jobs.cancel(job_id).to_dict())

    @get("/model", summary="The chat model: configured, loaded, why not available", sync_to_thread=False)
    def model(self, state: State) -> ModelResponse:
        services = state.services
        maintenance = services.maintenance
        return ModelResponse(
            chat=ChatModelView.model_validate(model_status(services.model).to_dict()),
            next_dream_state=maintenance.next_dream.isoformat() if maintenance.next_dream else None,
            idle_consolidation_minutes=services.settings.maintenance.idle_consolidation_minutes)


def _moved(request: Request, path: str) -> Redirect:
    query = request.url.query
    return Redirect(path=f"{path}?{query}" if query else path, status_code=308)


class MovedJobsController(Controller):
    """The first paths of the jobs and model routes: 308 to their ``/api/v1`` successors."""

    path = "/api"
    include_in_schema = False

    @get("/jobs", sync_to_thread=False)
    def jobs(self, request: Request) -> Redirect:
        return _moved(request, "/api/v1/jobs")

    @get("/jobs/{job_id:str}", sync_to_thread=False)
    def job(self, request: Request, job_id: JobId) -> Redirect:
        return _moved(request, f"/api/v1/jobs/{quote(job_id, safe='')}")

    @post("/jobs/{job_id:str}/cancel", sync_to_thread=False)
    def cancel(self, request: Request, job_id: JobId) -> Redirect:
        return _moved(request, f"/api/v1/jobs/{quote(job_id, safe='')}/cancel")

    @get("/model", sync_to_thread=False)
    def model(self, request: Request) -> Redirect:
        return _moved(request, "/api/v1/model")
