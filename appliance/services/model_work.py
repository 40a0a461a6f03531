"""The local model and the job queue as an operation uses them: is the model there, and run a job while
the caller waits at most ``tool_wait_seconds`` (after that it goes on in the background)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from appliance.core.ports import ChatModel, ModelError, model_status
from appliance.jobs import Job, JobQueue
from appliance.memory.model_tools import NO_MODEL


@dataclass(frozen=True)
class ModelWork:
    model: ChatModel
    jobs: JobQueue
    wait_seconds: float

    def unready(self) -> str | None:
        """None when model-backed work can run; otherwise why not (for ``skipped:`` answers and errors)."""
        status = model_status(self.model)
        return None if status.available else f"{NO_MODEL} ({status.reason or 'unavailable'})"

    def run(self, kind: str, work: Callable[[Job], dict[str, Any]], *, key: str, description: str
            ) -> dict[str, Any]:
        """Run ``work`` on the interactive lane: its result when it finishes in time, its failure as a tool
        error (with the cause's code), else a note that it goes on (its progress at /api/jobs/<id>)."""
        job = self.jobs.submit(kind, work, lane="interactive", key=key, description=description)
        if not self.jobs.wait(job, self.wait_seconds):
            return {"status": "running", "job_id": job.id, "progress": job.to_dict()["progress"],
                    "message": f"still running after {self.wait_seconds:g} s; it goes on in the "
                               f"background (GET /api/jobs/{job.id} shows its progress)"}
        if job.state == "done":
            return dict(job.result) if isinstance(job.result, dict) else {"result": job.result}
        error = job.error or {"code": "cancelled", "message": "the job was cancelled"}
        failure = ModelError(f"{job.kind} failed: {error['message']}")
        failure.code = error["code"]  # model_timeout, model_output_invalid, …
        raise failure
