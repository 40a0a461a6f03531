"""Background jobs and the model: what runs, how far it got, and cancelling it (MISSION §4)."""

from __future__ import annotations

from typing import Any

from litestar import Controller, get, post
from litestar.datastructures import State
from litestar.params import FromPath, FromQuery

from appliance.core.ports import model_status


class JobsController(Controller):
    path = "/api"
    tags = ("jobs",)

    @get("/jobs", summary="Recent and running background jobs, newest first", sync_to_thread=False)
    def jobs(self, state: State, kind: FromQuery[str | None] = None) -> dict[str, Any]:
        found = [job.to_dict() for job in state.services.jobs.list(kind=kind)]
        return {"jobs": found, "count": len(found)}

    @get("/jobs/{job_id:str}", summary="One job: state, progress, result or error", sync_to_thread=False)
    def job(self, state: State, job_id: FromPath[str]) -> dict[str, Any]:
        return state.services.jobs.get(job_id).to_dict()  # type: ignore[no-any-return]  # State is untyped

    @post("/jobs/{job_id:str}/cancel", summary="Ask a job to stop (its model call stops at the next token)",
          sync_to_thread=False, status_code=200)
    def cancel(self, state: State, job_id: FromPath[str]) -> dict[str, Any]:
        return state.services.jobs.cancel(job_id).to_dict()  # type: ignore[no-any-return]  # State is untyped

    @get("/model", summary="The chat model: configured, loaded, why not available", sync_to_thread=False)
    def model(self, state: State) -> dict[str, Any]:
        services = state.services
        maintenance = services.maintenance
        return {"chat": model_status(services.model).to_dict(),
                "next_dream_state": maintenance.next_dream.isoformat() if maintenance.next_dream else None,
                "idle_consolidation_minutes": services.settings.maintenance.idle_consolidation_minutes}
