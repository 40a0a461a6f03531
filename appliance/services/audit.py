"""The audit trail's retention (``[memory] audit_retention_days``): a scheduled job of kind ``audit_prune``
deletes rows older than that many days (0 keeps them all). It runs at start and then hourly, whether or not the
trail is on now: rows recorded while it was on age out all the same."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from appliance.graph import GraphStore
from appliance.graph._support import iso
from appliance.jobs import Job, JobQueue

log = logging.getLogger(__name__)
PRUNE_EVERY = timedelta(hours=1)
KIND = "audit_prune"


class AuditRetention:
    def __init__(self, graph: GraphStore, jobs: JobQueue, retention_days: int,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.graph, self.jobs, self.retention_days, self._clock = graph, jobs, retention_days, clock
        self.next_prune: datetime | None = clock() if retention_days else None

    def tick(self, now: datetime) -> Job | None:
        """Queue a prune when one is due (called by the maintenance schedule)."""
        if self.next_prune is None or now < self.next_prune:
            return None
        self.next_prune = now + PRUNE_EVERY
        return self.prune()

    def prune(self) -> Job:
        cutoff = self._clock() - timedelta(days=self.retention_days)
        return self.jobs.submit(KIND, lambda job: self._prune(job, cutoff), key=KIND,
                                description=f"delete audit rows older than {self.retention_days} days")

    def _prune(self, job: Job, cutoff: datetime) -> dict[str, int | str]:
        deleted = self.graph.prune_audit(iso(cutoff))
        job.progress(1, 1, f"{deleted} audit row(s) deleted")
        if deleted:
            log.info("audit trail: %d row(s) older than %s deleted", deleted, iso(cutoff))
        return {"deleted": deleted, "before": iso(cutoff)}
