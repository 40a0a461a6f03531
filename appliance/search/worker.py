"""The background index sync: repairs the index on start, then writes pending rows soon after each commit.
A failing round, or a search that cannot read the table, gets the index checked; a damaged one is moved aside
and rebuilt from the graph (appliance/search/repair.py)."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import numpy as np

from appliance.search import repair
from appliance.search.repair import MovedAside
from appliance.search.sync import IndexSync

log = logging.getLogger(__name__)


# Compaction: every index write adds a LanceDB fragment; at 10k rows a merge by key took ~25 ms on a compacted
# table and ~400 ms after a few hundred single-row writes (measured), so compact after this many writes
# (batches) or rows, whichever comes first, when the sync is idle. A compaction costs ~1-3 s at 10k rows.
OPTIMIZE_EVERY = 2_000  # rows
OPTIMIZE_AFTER_WRITES = 64  # index writes (batches)


class IndexWorker:
    def __init__(self, sync: IndexSync, interval: float = 30.0, optimize_every: int = OPTIMIZE_EVERY,
                 rebuilding: MovedAside | None = None) -> None:
        """``rebuilding``: the damaged index that start-up moved aside (the first round refills the new one)."""
        self.sync, self.interval, self.optimize_every = sync, interval, optimize_every
        self.rebuilding = rebuilding  # until the outbox is empty again after a repair
        self._check_due = False  # a search could not read the table
        self._written = 0
        self._writes = 0
        self._check_fragments = True  # a data dir from an earlier run may need compacting
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._idle = threading.Event()
        # read-your-writes: commits counted by the commit listener; synced = the count at the last read
        # of an empty outbox
        self._commits = 0
        self._synced = 0
        self._progress = threading.Condition()
        self._round = threading.Lock()  # held through each round; pause() takes it so no round runs
        self._pause_wanted = threading.Event()  # a long catch-up (a rebuild) yields between batches
        self._thread = threading.Thread(target=self._loop, name="index-sync", daemon=True)
        self.last_error: str | None = None  # the failed round's error, for the log: clients get ``sync_error()``
        self.last_failed_at: datetime | None = None

    def start(self) -> None:
        self.sync.graph.subscribe(self._on_commit)  # a graph commit wakes the sync
        self.sync.index.on_unreadable = self._on_unreadable
        self._thread.start()

    def _on_unreadable(self) -> None:
        self._check_due = True
        self._wake.set()

    def state(self) -> dict[str, Any]:
        """The index's state for readiness: ``ok``, or ``rebuilding`` after a damaged index was moved aside."""
        moved = self.rebuilding
        if moved is None:
            return {"state": "ok"}
        return {"state": "rebuilding", "damaged": moved.problem, "damaged_copy": str(moved.aside),
                "detail": "the search index was damaged and is being rebuilt from the graph; search answers "
                          "from the rows rebuilt so far until pending reaches 0"}

    def sync_error(self) -> str | None:
        """The last round's failure as clients see it (readiness, the console's stats): a fixed phrase and the
        time. The error's own text (lance's, often with file paths) stays in the appliance log."""
        if self.last_error is None or self.last_failed_at is None:
            return None
        return f"the last index sync failed at {self.last_failed_at.isoformat(timespec='seconds')}; it is " \
               "retried (see the appliance log)"

    @property
    def running(self) -> bool:
        """The sync thread is alive and not asked to stop (for the health check)."""
        return self._thread.is_alive() and not self._stop.is_set()

    def _on_commit(self) -> None:
        with self._progress:
            self._commits += 1
        self._wake.set()

    def wait_synced(self, timeout: float = 5.0) -> bool:
        """Block until every commit made before this call is in the index (bounded: after ``timeout``
        the caller goes on with the index as it is). False on timeout."""
        if self.rebuilding is not None:  # behind a whole rebuild: waiting a few seconds would not help
            return False
        with self._progress:
            target = self._commits
            return self._progress.wait_for(lambda: self._synced >= target or self._stop.is_set(), timeout)

    def stage(self, revision_krefs: list[str], vectors: dict[str, np.ndarray]) -> None:
        """Called by a writer right after its commit: these revisions were just written, ``vectors`` holds the
        embeddings the writer computed, keyed by the searchable text they embed (``searchable_text``), so that
        the sync need not embed them again."""
        self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No index write (and no outbox update in the graph) while the block runs: a round that is running
        finishes its current batch first. Backups copy the index here, and the graph's outbox flags then match
        that copy."""
        self._pause_wanted.set()
        try:
            with self._round:
                self._pause_wanted.clear()
                yield
        finally:
            self._pause_wanted.clear()
            self._wake.set()  # commits made meanwhile, and a catch-up that yielded, go on now

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Block until everything pending has been indexed (tests, read-your-writes callers)."""
        self._idle.clear()
        self._wake.set()
        return self._idle.wait(timeout)

    def _loop(self) -> None:
        first = True
        while not self._stop.is_set():
            self._wake.clear()
            with self._round:  # a paused worker waits here (see ``paused``)
                outcome = self._round_once(first)
            if outcome == "healed":
                continue  # the damaged index was replaced: refill the new one at once
            if outcome == "failed":
                self._stop.wait(self.interval)  # back off (not holding the round): a failing round must not spin
                continue
            first = False
            if self._wake.is_set():
                continue  # a commit landed during the round
            self._idle.set()
            self._wake.wait(self.interval)  # a commit wakes us early; otherwise a periodic round

    def _round_once(self, first: bool) -> str:
        """One round: repair on the first, catch up with the outbox, compact when due. "ok", "healed" (it
        failed on a damaged index, which was replaced) or "failed" (the outbox keeps the work for the next)."""
        try:
            if self._check_due:
                self._check_due = False
                self._heal()
            if first:
                self.sync.index.resident()  # load the in-memory rows now, not on the first query
                repaired = self.sync.repair()
                self._written += repaired.indexed
                log.info("search index ready: %d rows written, %d stale removed, %d requeued",
                         repaired.indexed, repaired.removed, repaired.requeued)
            self._written += self._catch_up()
            if not self._wake.is_set() and self._compaction_due():
                log.debug("index compaction: started")  # these marks let the crash suite aim its kills
                self.sync.index.optimize()  # only this thread writes the index: safe while idle
                log.debug("index compaction: finished")
                self._written = self._writes = 0
                self._check_fragments = False
            self.last_error = None
            return "ok"
        except Exception as exc:  # keep serving; the outbox keeps the work for the next round
            self.last_error, self.last_failed_at = repair.describe(exc), datetime.now(UTC)
            if self._heal():
                log.warning("index sync failed (%s); the damaged index was replaced", self.last_error)
                return "healed"
            log.error("index sync failed (%s); retrying in %.0f s", exc, self.interval)
            log.debug("index sync failure", exc_info=True)
            return "failed"

    def _heal(self) -> bool:
        """Check the index after a failure; a damaged one is moved aside and every revision requeued. True
        when it was replaced."""
        try:
            health = repair.check(self.sync.index.path)
            if not health.damaged:
                return False
            self.rebuilding = repair.replace_damaged(self.sync.index, self.sync.graph, health.detail)
        except Exception as exc:  # e.g. the directory cannot be renamed: keep retrying like any failed round
            log.error("could not replace the damaged search index: %s", exc)
            return False
        self._check_fragments = False  # a fresh table
        self._written = self._writes = 0
        return True

    def _compaction_due(self) -> bool:
        if self._written >= self.optimize_every:
            return True
        if self._writes >= OPTIMIZE_AFTER_WRITES:
            self._check_fragments = True
        if self._check_fragments:
            if self.sync.index.fragmented():
                return True
            self._check_fragments, self._writes = False, 0
        return False

    def _catch_up(self) -> int:
        """Index until the outbox is empty. An empty outbox read after commit n means every commit up to n
        is indexed (this round's own mark-indexed commits included), so n is published as synced."""
        written = 0
        while True:
            if self._pause_wanted.is_set():
                self._wake.set()  # not caught up: the round after the pause goes on (and nobody is told idle)
                return written
            with self._progress:
                seen = self._commits
            self.sync.drop_removed()  # queued before the commits counted in `seen` were announced
            docs = self.sync.graph.unindexed(self.sync.batch)
            if not docs:
                with self._progress:
                    self._synced = max(self._synced, seen)
                    self._progress.notify_all()
                if self.rebuilding is not None:
                    log.warning("the search index has been rebuilt from the graph (the damaged copy stays at %s; "
                                "delete it when you no longer need it)", self.rebuilding.aside)
                    self.rebuilding = None
                return written
            log.debug("index round: writing %d rows", len(docs))
            self.sync.index_docs(docs)
            log.debug("index round: finished")
            written += len(docs)
            self._writes += 1

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        with self._progress:
            self._progress.notify_all()
        self._thread.join(timeout=30)
        self.sync.graph.unsubscribe(self._on_commit)
