"""The background job queue: model work that a tool call must not wait for, and long work it may wait for.

Two lanes, one worker thread each. ``interactive`` runs what a caller waits on (consolidate,
discover_edges); ``background`` runs what nobody waits on (edge discovery after reflect, idle-session
consolidation, Dream State). Two lanes instead of one so that a tool call never queues behind a Dream
State run of many batches; the model's own capacity slot still runs one call at a time, so an
interactive job waits at most for one background model call.

A job reports progress (``done``/``total`` and a note) that the admin API shows; it can be cancelled (its
``cancel`` event is set and the model call stops at the next token). Listeners (``subscribe``: the live event
feed) hear of every change: queued, running, progress, and its end (done, failed or cancelled). Jobs live in
memory: after a restart the idle-session sweep and the Dream State cursor find their work again; a queued edge
discovery is lost (reflect's captures stay stored, ``discover_edges`` can be run again).
"""

from __future__ import annotations

import contextvars
import itertools
import logging
import queue
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from appliance.core.caller import calling, current_caller
from appliance.errors import KumihoError, NotFound

log = logging.getLogger(__name__)

Lane = Literal["interactive", "background"]
JobState = Literal["queued", "running", "done", "failed", "cancelled"]
JobChange = Literal["queued", "running", "progress", "done", "failed", "cancelled"]
HISTORY = 200  # finished jobs kept for status queries
# what a job that failed on a bug (not a KumihoError, whose message is written for users) shows to clients: the
# job view reaches /api/v1/jobs, the event feed and tool answers, and an exception's text can hold file paths
INTERNAL_ERROR = {"code": "internal", "message": "internal error; see the appliance log"}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class Job:
    id: str
    kind: str
    lane: Lane
    description: str
    key: str | None = None  # at most one queued or running job per key (for example one per session)
    state: JobState = "queued"
    done: int = 0
    total: int = 0
    note: str = ""
    result: Any = None
    error: dict[str, str] | None = None
    created_at: str = field(default_factory=_now)
    started_at: str | None = None
    finished_at: str | None = None
    cancel: threading.Event = field(default_factory=threading.Event, repr=False)
    finished: threading.Event = field(default_factory=threading.Event, repr=False)
    changed: Callable[[JobChange, Job], None] | None = field(default=None, repr=False)  # set by the queue
    # run once the job has ended, however (done, failed, or cancelled before it ever ran): frees what it owns
    cleanup: Callable[[], None] | None = field(default=None, repr=False)

    def progress(self, done: int, total: int = 0, note: str = "") -> None:
        self.done, self.total = done, total or self.total
        if note:
            self.note = note
        self.tell("progress")

    def tell(self, change: JobChange) -> None:
        if self.changed is not None:
            self.changed(change, self)

    @property
    def active(self) -> bool:
        return self.state in ("queued", "running")

    def to_dict(self) -> dict[str, Any]:
        view: dict[str, Any] = {"job_id": self.id, "kind": self.kind, "lane": self.lane, "state": self.state,
                                "description": self.description, "progress": {"done": self.done,
                                                                              "total": self.total},
                                "created_at": self.created_at}
        for name in ("note", "started_at", "finished_at", "error"):
            if getattr(self, name):
                view[name] = getattr(self, name)
        if self.state == "done" and self.result is not None:
            view["result"] = self.result
        return view


Work = Callable[[Job], Any]
JobListener = Callable[[JobChange, Job], None]


class JobQueue:
    def __init__(self) -> None:
        self._lanes: dict[Lane, queue.Queue[tuple[Job, Work] | None]] = {
            "interactive": queue.Queue(), "background": queue.Queue()}
        self._jobs: OrderedDict[str, Job] = OrderedDict()
        self._by_key: dict[str, Job] = {}
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._seq = itertools.count(1)
        self._listeners: list[JobListener] = []

    def subscribe(self, listener: JobListener) -> None:
        """Call ``listener(change, job)`` on every job change, on the thread that made it (a job's worker, or
        the submitter for ``queued``): it must be quick. Progress can come once per generated token."""
        self._listeners.append(listener)

    def _changed(self, change: JobChange, job: Job) -> None:
        for listener in list(self._listeners):
            try:
                listener(change, job)
            except Exception:  # a listener's bug must not fail the job
                log.exception("job listener failed")

    def start(self) -> None:
        for lane, inbox in self._lanes.items():
            thread = threading.Thread(target=self._serve, args=(inbox,), name=f"jobs-{lane}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 10.0) -> None:
        """Cancel what runs, drop what waits, and join the workers."""
        with self._lock:
            for job in self._jobs.values():
                if job.active:
                    job.cancel.set()
        for inbox in self._lanes.values():
            inbox.put(None)
        for thread in self._threads:
            thread.join(timeout)
        self._threads.clear()

    def submit(self, kind: str, work: Work, *, lane: Lane = "background", description: str = "",
               key: str | None = None, cleanup: Callable[[], None] | None = None) -> Job:
        """Queue ``work`` (called with its ``Job``); with ``key``, an active job of that key is returned
        instead of queueing a second one. ``cleanup`` runs once the job has ended, even one cancelled before it
        started (not when an active job of the same key is returned: the caller cleans up then)."""
        with self._lock:
            if key is not None and (existing := self._by_key.get(key)) is not None and existing.active:
                return existing
            job = Job(f"job-{next(self._seq)}-{uuid.uuid4().hex[:6]}", kind, lane, description or kind, key,
                      changed=self._changed, cleanup=cleanup)
            self._jobs[job.id] = job
            if key is not None:
                self._by_key[key] = job
            self._trim()
        job.tell("queued")
        self._lanes[lane].put((job, _as_submitter(work)))
        return job

    def wait(self, job: Job, timeout: float) -> bool:
        """True when the job finished within ``timeout`` seconds."""
        return job.finished.wait(timeout)

    def get(self, job_id: str) -> Job:
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise NotFound(f"job_id: job {job_id[:128]} is unknown (finished jobs are kept for the last {HISTORY})",
                           field="job_id")
        return job

    def list(self, *, kind: str | None = None) -> list[Job]:
        with self._lock:
            return [j for j in reversed(self._jobs.values()) if kind is None or j.kind == kind]

    def busy(self) -> bool:
        """True while any job is queued or running."""
        with self._lock:
            return any(job.active for job in self._jobs.values())

    def cancel(self, job_id: str) -> Job:
        job = self.get(job_id)
        job.cancel.set()
        return job

    def _trim(self) -> None:
        finished = [j for j in self._jobs.values() if not j.active]
        for job in finished[: max(0, len(finished) - HISTORY)]:
            del self._jobs[job.id]
            if job.key is not None and self._by_key.get(job.key) is job:
                del self._by_key[job.key]

    def _serve(self, inbox: queue.Queue[tuple[Job, Work] | None]) -> None:
        while (entry := inbox.get()) is not None:
            job, work = entry
            if job.cancel.is_set():
                self._finish(job, "cancelled")
                continue
            job.state, job.started_at = "running", _now()
            job.tell("running")
            started = time.perf_counter()
            try:
                job.result = work(job)
                self._finish(job, "cancelled" if job.cancel.is_set() and job.result is None else "done")
            except KumihoError as exc:
                job.error = {"code": exc.code, "message": exc.message}
                self._finish(job, "cancelled" if job.cancel.is_set() else "failed")
            except Exception:  # a job's bug must not kill the lane
                log.exception("job %s (%s) failed", job.id, job.kind)
                job.error = dict(INTERNAL_ERROR)  # the exception's text may hold paths: it stays in the log
                self._finish(job, "failed")
            log.info("job %s (%s) %s in %.1f s", job.id, job.kind, job.state, time.perf_counter() - started)
        for job in iter_queued(inbox):
            self._finish(job, "cancelled")

    def _finish(self, job: Job, state: Literal["done", "failed", "cancelled"]) -> None:
        if job.cleanup is not None:  # before the job reads as finished: a waiter then finds it cleaned up
            try:
                job.cleanup()
            except Exception:
                log.exception("cleanup of job %s (%s) failed", job.id, job.kind)
        job.state, job.finished_at = state, _now()
        job.finished.set()
        job.tell(state)


def _as_submitter(work: Work) -> Work:
    """``work`` run in its submitter's context: who queued it (a front door, the maintenance schedule) is who
    changes the memory in the audit trail and before the read-only guard; its operation is the job's kind."""
    context = contextvars.copy_context()

    def run(job: Job) -> Any:
        with calling(current_caller().doing(job.kind)):
            return work(job)

    return lambda job: context.run(run, job)


def iter_queued(inbox: queue.Queue[tuple[Job, Work] | None]) -> list[Job]:
    """Drain what is still queued (at shutdown)."""
    drained: list[Job] = []
    while True:
        try:
            entry = inbox.get_nowait()
        except queue.Empty:
            return drained
        if entry is not None:
            drained.append(entry[0])
