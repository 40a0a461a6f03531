"""Scheduled work: idle sessions are consolidated and Dream State runs daily (``[maintenance]``, both need the
model); the memory hygiene pass runs daily at ``[memory] hygiene_time`` while ``hygiene_enabled`` (no model).

A timer thread calls ``tick`` every ``interval`` seconds; ``tick`` only queues jobs (``appliance.jobs``), so
it is quick and tests call it directly with a clock of their own. Without a usable model nothing is
queued: idle sessions stay buffered (never dropped) until a model is there or an agent consolidates them.
A session whose consolidation failed is retried later, waiting longer after each failure (up to an hour).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from appliance.config import MaintenanceSettings
from appliance.core.caller import Caller, calling
from appliance.jobs import Job, JobQueue
from appliance.memory.consolidation import Consolidator
from appliance.memory.dream import DreamParams
from appliance.services.audit import AuditRetention
from appliance.services.hygiene import HygieneService
from appliance.services.maintenance import MaintenanceService

log = logging.getLogger(__name__)
MAX_BACKOFF = timedelta(hours=1)


def next_daily(at: str, now: datetime) -> datetime | None:
    """The first ``HH:MM`` (local time of ``now``) strictly after ``now``; None when ``at`` is empty."""
    if not at:
        return None
    hour, minute = (int(part) for part in at.split(":"))
    moment = now.replace(hour=hour, minute=minute, second=0, microsecond=0)
    return moment if moment > now else moment + timedelta(days=1)


class Maintenance:
    def __init__(self, dreams: MaintenanceService, jobs: JobQueue, settings: MaintenanceSettings, project: str, *,
                 consolidator: Consolidator, clock: Callable[[], datetime] = lambda: datetime.now().astimezone(),
                 interval: float = 30.0, hygiene: HygieneService | None = None,
                 audit: AuditRetention | None = None) -> None:
        self.dreams, self.jobs, self.settings, self.project = dreams, jobs, settings, project
        self.audit = audit  # the audit trail's retention: needs no model
        self.hygiene = hygiene  # needs no model either
        self.next_hygiene = (next_daily(hygiene.settings.hygiene_time, clock())
                             if hygiene is not None and hygiene.settings.hygiene_enabled else None)
        self.consolidator = consolidator  # the same pipeline as kumiho_memory_consolidate
        self._clock, self.interval = clock, interval
        self.next_dream = next_daily(settings.dream_state_time, clock())
        self._last: dict[str, Job] = {}  # session key -> its latest consolidation job
        self._failures: dict[str, tuple[int, datetime]] = {}  # session key -> (failures, retry after)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="maintenance", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.tick()
            except Exception:  # the schedule must survive one bad tick
                log.exception("maintenance tick failed")

    def tick(self) -> list[Job]:
        """Queue what is due now; returns the jobs queued. They run as the door ``maintenance``."""
        with calling(Caller("maintenance", "scheduler", "tick")):
            now = self._clock()
            pruning = self.audit.tick(now) if self.audit is not None else None
            return [*([pruning] if pruning else []), *self._hygiene_due(now), *self._model_work(now)]

    def _model_work(self, now: datetime) -> list[Job]:
        if self.dreams.work.model_ready() is not None:
            return []
        queued = self._idle_sessions(now)
        if self.next_dream is not None and now >= self.next_dream:
            self.next_dream = next_daily(self.settings.dream_state_time, now)
            queued.append(self.dream())
        return queued

    def _hygiene_due(self, now: datetime) -> list[Job]:
        if self.hygiene is None or self.next_hygiene is None or now < self.next_hygiene:
            return []
        self.next_hygiene = next_daily(self.hygiene.settings.hygiene_time, now)
        return [self.hygiene.submit()]

    def dream(self) -> Job:
        s = self.settings
        params = DreamParams(self.project, batch_size=s.dream_state_batch_size,
                             max_deprecation_ratio=s.dream_state_max_deprecation_ratio,
                             allow_published_deprecation=s.dream_state_allow_published_deprecation,
                             min_age_days=s.dream_state_min_age_days)
        result = self.dreams.run_dream(params, self.dreams.work.model, wait=False)
        return self.jobs.get(result["job_id"])

    def _idle_sessions(self, now: datetime) -> list[Job]:
        minutes = self.settings.idle_consolidation_minutes
        if not minutes:
            return []
        queued = []
        for session in self.consolidator.working.idle_sessions(minutes * 60):
            key = f"consolidate:{session.project}:{session.session_id}"
            if not self._due(key, now):
                continue
            job = self.jobs.submit("consolidate", self._consolidate(session.project, session.session_id), key=key,
                                   description=f"consolidate idle session {session.session_id}")
            self._last[key] = job
            queued.append(job)
        return queued

    def _due(self, key: str, now: datetime) -> bool:
        last = self._last.get(key)
        if last is not None and last.active:
            return False
        if last is not None and last.state == "failed":
            count = self._failures.get(key, (0, now))[0] + 1
            self._failures[key] = (count, now + min(MAX_BACKOFF, timedelta(minutes=2 ** count)))
            del self._last[key]
        elif last is not None:
            self._failures.pop(key, None)
            del self._last[key]
        retry = self._failures.get(key)
        return retry is None or now >= retry[1]

    def _consolidate(self, project: str, session_id: str) -> Callable[[Job], Any]:
        return lambda job: self.consolidator.run(project, session_id, job=job)
