"""``POST /api/v1/hygiene``: run the memory hygiene pass now (or a dry run), as a job the jobs routes follow."""

from __future__ import annotations

from typing import Literal

from litestar import Controller, post
from litestar.datastructures import State
from litestar.params import JSONBody
from pydantic import Field

from appliance.admin_api.console_shapes import Shape
from appliance.core.caller import current_caller


class HygieneRequest(Shape):
    """The body may be left out: a pass (not a dry run)."""

    dry_run: bool = Field(False, description="true: plan only; the job's result counts and lists (up to 100) what "
                                             "a pass would archive, purge or skip, and nothing changes")


class HygieneStarted(Shape):
    job_id: str = Field(description="follow it with GET /api/v1/jobs/{job_id}; its result is {archived, purged, "
                                    "skipped_read_only, snapshot, dry_run, complete, changes}")
    kind: Literal["hygiene"] = "hygiene"
    state: Literal["queued", "running", "done", "failed", "cancelled"]
    dry_run: bool


class HygieneController(Controller):
    path = "/api/v1"
    tags = ("jobs",)

    @post("/hygiene", summary="Run the memory hygiene pass now (archive, then purge, old Memory API entries)",
          description="Answers 202 with the job; while a pass (or a dry run) is queued or running, asking again "
          "answers with that job. Runs whether or not [memory] hygiene_enabled schedules daily passes.",
          sync_to_thread=False, status_code=202)
    def run(self, state: State, data: JSONBody[HygieneRequest | None] = None) -> HygieneStarted:
        data = data or HygieneRequest()
        # the caller_middleware's caller (door, cleaned client, route): the job's changes are recorded as theirs
        job = state.services.hygiene.submit(dry_run=data.dry_run, caller=current_caller())
        return HygieneStarted(job_id=job.id, state=job.state, dry_run=data.dry_run)
