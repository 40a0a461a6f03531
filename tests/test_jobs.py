"""The job queue: lanes, progress, one active job per key, errors kept, cancellation, shutdown."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from appliance.errors import InvalidArgument, NotFound
from appliance.jobs import Job, JobQueue


@pytest.fixture
def jobs() -> Iterator[JobQueue]:
    queue = JobQueue()
    queue.start()
    yield queue
    queue.stop()


def test_a_job_runs_reports_progress_and_keeps_its_result(jobs: JobQueue) -> None:
    def work(job: Job) -> dict[str, int]:
        job.progress(1, 2, "half way")
        return {"answer": 42}

    job = jobs.submit("demo", work, description="a demo")
    assert jobs.wait(job, 10) and job.state == "done" and job.result == {"answer": 42}
    view = jobs.get(job.id).to_dict()
    assert view["progress"] == {"done": 1, "total": 2} and view["note"] == "half way" and view["result"]


def test_errors_are_kept_with_their_code_and_a_bug_does_not_stop_the_lane(jobs: JobQueue) -> None:
    def refuse(job: Job) -> None:
        raise InvalidArgument("bad input", field="x")

    def crash(job: Job) -> None:
        raise ZeroDivisionError("boom")

    first, second = jobs.submit("a", refuse), jobs.submit("b", crash)
    third = jobs.submit("c", lambda job: "fine")
    assert jobs.wait(third, 10)
    assert first.state == "failed" and first.error == {"code": "invalid_argument", "message": "bad input"}
    assert second.state == "failed"
    assert second.error == {"code": "internal", "message": "internal error; see the appliance log"}
    assert third.state == "done"


def test_a_bugs_text_stays_in_the_log_and_out_of_the_job(jobs: JobQueue, caplog: pytest.LogCaptureFixture) -> None:
    def crash(job: Job) -> None:
        raise RuntimeError("cannot open /secret/x")

    job = jobs.submit("leaky", crash)
    assert jobs.wait(job, 10) and job.state == "failed"
    assert "/secret/x" not in repr(job.to_dict())
    assert "/secret/x" in caplog.text  # the operator still finds the cause, with its traceback


def test_one_active_job_per_key(jobs: JobQueue) -> None:
    gate = threading.Event()
    first = jobs.submit("k", lambda job: gate.wait(10), key="session-1")
    assert jobs.submit("k", lambda job: None, key="session-1") is first
    gate.set()
    assert jobs.wait(first, 10)
    later = jobs.submit("k", lambda job: None, key="session-1")
    assert later is not first and jobs.wait(later, 10)


def test_an_interactive_job_does_not_wait_behind_the_background_lane(jobs: JobQueue) -> None:
    gate, started = threading.Event(), threading.Event()
    slow = jobs.submit("slow", lambda job: started.set() or gate.wait(10), lane="background")
    assert started.wait(10)  # the background lane is busy (its worker may take a moment on a loaded machine)
    quick = jobs.submit("quick", lambda job: "now", lane="interactive")
    assert jobs.wait(quick, 5) and slow.state == "running"
    gate.set()
    assert jobs.wait(slow, 10)


def test_cancel_sets_the_event_and_a_queued_job_never_runs(jobs: JobQueue) -> None:
    gate = threading.Event()
    running = jobs.submit("r", lambda job: job.cancel.wait(10) and None)
    queued = jobs.submit("q", lambda job: gate.set())
    jobs.cancel(queued.id)
    jobs.cancel(running.id)
    assert jobs.wait(queued, 10) and queued.state == "cancelled" and not gate.is_set()
    assert running.state == "cancelled"
    with pytest.raises(NotFound):
        jobs.get("job-unknown")


def test_stop_cancels_what_runs_and_what_waits() -> None:
    queue = JobQueue()
    queue.start()
    running = queue.submit("r", lambda job: job.cancel.wait(30) and None)
    waiting = queue.submit("w", lambda job: "never")
    queue.stop()
    assert running.state == "cancelled" and waiting.state == "cancelled" and waiting.result is None
