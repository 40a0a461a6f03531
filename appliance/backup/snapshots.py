"""Snapshots: backup archives the appliance makes by itself into the snapshot directory.

* scheduled (``[memory] snapshot_enabled``): every ``snapshot_interval_hours``, counted from the newest
  scheduled snapshot in the directory (a restart does not reset the clock), as jobs of kind ``snapshot``;
  after each one only the newest ``snapshot_keep`` scheduled snapshots stay;
* on request of another part of the appliance (``take``: the hygiene pass with ``snapshot_on_hygiene``);
* before a schema migration (``before_migration``): the graph is open, nothing serves yet.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from appliance.backup.capture import offline
from appliance.backup.store import ROTATED, Backups, backup_directory
from appliance.config import MemorySettings, Settings
from appliance.datadir import DataDir
from appliance.errors import DataDirError, KumihoError
from appliance.graph.engine import KuzuEngine
from appliance.graph.schema import BeforeMigration
from appliance.jobs import Job, JobQueue

log = logging.getLogger(__name__)
BACKUP_JOB_KEY = "backup"  # one snapshot job at a time: a second scheduled one joins the running one
RETRY_AFTER_FAILURE = timedelta(hours=1)  # a failed scheduled snapshot is tried again after this (or the interval)


class Snapshots:
    def __init__(self, backups: Backups, jobs: JobQueue, settings: MemorySettings,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.backups, self.jobs, self.settings, self._clock = backups, jobs, settings, clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._not_before: datetime | None = None  # after a failed attempt

    def take(self, reason: str = "snapshot") -> Path:
        """A full backup archive into the snapshot directory, then rotation; its path."""
        made = self.backups.create(reason)
        self.backups.rotate(self.settings.snapshot_keep)
        return made.path

    def submit(self) -> Job:
        """A snapshot as a job of kind ``snapshot`` (joins a snapshot job already running)."""
        def work(job: Job) -> dict[str, object]:
            job.progress(0, 1, "taking a snapshot")
            path = self.take("snapshot")
            job.progress(1, 1, "snapshot written")
            return {"name": path.name}

        return self.jobs.submit("snapshot", work, lane="background", description="scheduled snapshot",
                                key=BACKUP_JOB_KEY)

    # -- the schedule -----------------------------------------------------------------------------------
    @property
    def scheduled(self) -> bool:
        """The schedule runs (``snapshot_enabled`` and started)."""
        return self._thread is not None and self._thread.is_alive()

    def next_due(self) -> datetime | None:
        """When the next scheduled snapshot is taken; None when scheduling is off."""
        if not self.settings.snapshot_enabled:
            return None
        interval = timedelta(hours=self.settings.snapshot_interval_hours)
        newest = next((info for info in self.backups.listing() if info.reason in ROTATED), None)
        due = datetime.fromisoformat(newest.created_at) + interval if newest else self._clock()
        return max(due, self._not_before) if self._not_before else due

    def start(self) -> None:
        if self.settings.snapshot_enabled:
            self._thread = threading.Thread(target=self._run, name="snapshots", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                due = self.next_due()
            except (KumihoError, OSError) as exc:  # the directory cannot be read: say so, look again later
                log.error("snapshots: %s", exc.message if isinstance(exc, KumihoError) else exc)
                due = self._clock() + RETRY_AFTER_FAILURE
            assert due is not None  # enabled: the thread only runs then
            wait = (due - self._clock()).total_seconds()
            if wait > 0:
                self._stop.wait(min(wait, 3600.0))  # re-read the directory at least hourly
                continue
            job = self.submit()
            while not job.finished.wait(1.0):
                if self._stop.is_set():
                    return
            if job.state != "done":
                retry = min(RETRY_AFTER_FAILURE, timedelta(hours=self.settings.snapshot_interval_hours))
                self._not_before = self._clock() + retry
                log.error("scheduled snapshot %s: %s; next attempt at %s", job.state,
                          (job.error or {}).get("message", "see above"), self._not_before.isoformat())


def before_migration(settings: Settings, data_dir: DataDir) -> BeforeMigration:
    """The hook ``GraphStore.open`` runs before it migrates a graph of an older schema: a snapshot of the whole
    data directory into the snapshot directory. When it cannot be written, the migration does not run."""

    def snapshot(engine: KuzuEngine, found: int, newest: int) -> None:
        directory = backup_directory(settings)
        try:
            made = Backups(directory, offline(data_dir, settings, engine.hold)).create("pre-migration")
        except (KumihoError, OSError) as exc:
            why = exc.message if isinstance(exc, KumihoError) else str(exc)
            raise DataDirError(
                f"the graph needs an upgrade from schema version {found} to {newest}, and the snapshot taken "
                f"before any upgrade could not be written to {directory} ({why}); nothing was changed. Free "
                "space there or set [memory] snapshot_dir to a writable directory, then start again") from None
        log.warning("upgrading the graph from schema version %d to %d; the data directory as it was is saved in "
                    "%s (to go back: stop the appliance and run `kumiho-ce restore %s` with the previous "
                    "kumiho-ce version)", found, newest, made.path, made.path)

    return snapshot
