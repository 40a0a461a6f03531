"""The background index sync: repairs the index on start, then writes pending rows soon after each commit.
A failing round, or a search that cannot read the table, gets the index checked; a damaged one is moved aside
and rebuilt from the graph (appliance/search/repair.py).

Read-your-writes. A memory write ``stage``s its new revisions right after its commit: their rows are shown in
the resident table at once (searchable by the next query), and queued here; a round then writes the queued rows
to the LanceDB table in a batch and marks them indexed in the graph. Until then the graph's outbox flag is the
durable record: a crash loses nothing the repair on start does not bring back. Readers that need their own
writes (recall, gRPC Search) call ``wait_synced``, which waits only for commits that nobody staged: every commit
is numbered (``KuzuEngine.commits``), a stage covers its writer's commit, the worker's own bookkeeping commits
cover themselves, and an uncovered commit (a tag set through the API, a deletion, an import) is in once a
round has read an empty outbox after it. A staged write whose commit also changed other revisions (stacking
moves tags off the previous revision; a Memory API store that supersedes an entry changes that entry's
metadata) covers its commit only once a round has indexed those revisions' items: a reader that waits sees every
row the commit changed, and pays for that round (tens of milliseconds) only after such writes.

The outbox read scans every revision (~120 ms per round at 100k revisions): rounds read only the items that
stages named, and scan on start, after an uncovered commit, periodically (``interval``) and for ``wait_idle``."""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import numpy as np

from appliance.graph import IndexDoc
from appliance.graph._support import item_of
from appliance.search import repair
from appliance.search.index import IndexRow
from appliance.search.repair import MovedAside
from appliance.search.sync import IndexSync

log = logging.getLogger(__name__)


# Compaction: every index write adds a LanceDB fragment; at 10k rows a merge by key took ~25 ms on a compacted
# table and ~400 ms after a few hundred single-row writes (measured), so compact after this many writes
# (batches) or rows, whichever comes first, when the sync is idle. A compaction costs ~1-3 s at 10k rows.
OPTIMIZE_EVERY = 2_000  # rows
OPTIMIZE_AFTER_WRITES = 64  # index writes (batches)
# A commit wakes the worker; it lets this much time pass first, unless a reader waits: the writes of concurrent
# clients go to the table in one batch (each write adds a file), and their stages have covered their commits by
# then (an uncovered commit costs a scan of the outbox).
SETTLE_SECONDS = 0.05


class _StagesAndDrops:
    """Stages run side by side (``staging``); dropping the rows of deleted revisions (``dropping``) waits until the
    stages in flight have queued their rows, and stages that begin meanwhile wait for the drop. A stage that read a
    revision before the commit that deleted it thus never shows or queues it after its row was dropped (it would
    stay in the index until the next start), and one that begins after the drop reads the graph without it."""

    def __init__(self) -> None:
        self._turn = threading.Condition()
        self._stages = 0
        self._dropping = False

    @contextlib.contextmanager
    def staging(self) -> Iterator[None]:
        with self._turn:
            self._turn.wait_for(lambda: not self._dropping)
            self._stages += 1
        try:
            yield
        finally:
            with self._turn:
                self._stages -= 1
                self._turn.notify_all()

    @contextlib.contextmanager
    def dropping(self) -> Iterator[None]:
        with self._turn:
            self._turn.wait_for(lambda: not self._dropping)  # one drop at a time (only the worker drops)
            self._dropping = True  # no new stage begins
            self._turn.wait_for(lambda: self._stages == 0)
        try:
            yield
        finally:
            with self._turn:
                self._dropping = False
                self._turn.notify_all()


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
        # read-your-writes (see the module's note): the last commit heard of; the last commit before a read of an
        # empty outbox (synced); commits above it that need no scan (staged, or the worker's own); and the floor:
        # every commit up to it is in the index or covered
        self._commits = self._synced = self._floor = sync.graph.commit_count()
        self._covered: set[int] = set()
        self._progress = threading.Condition()
        self._hurry = threading.Event()  # a reader waits: no settling before the round
        self._scan_due = True  # the next round reads the whole outbox
        # staged rows (shown, not in the table yet), the newest per revision, and items whose other revisions
        # changed with a staged write
        self._staged: dict[str, tuple[IndexDoc, IndexRow]] = {}
        self._items: set[str] = set()
        # staged commits that also changed other revisions: covered once a round has indexed ``_items``
        self._covered_by_items: list[int] = []
        self._gate = _StagesAndDrops()
        self._queue_lock = threading.Lock()
        self._round = threading.Lock()  # held through each round; pause() takes it so no round runs
        self._pause_wanted = threading.Event()  # a long catch-up (a rebuild) yields between batches
        sync.marked = self._cover  # the worker's own commits: nothing for a reader to wait for
        self._thread = threading.Thread(target=self._loop, name="index-sync", daemon=True)
        self.last_error: str | None = None  # the failed round's error, for the log: clients get ``sync_error()``
        self.last_failed_at: datetime | None = None
        self.failed_rounds = 0  # since start (the metrics' kumiho_index_sync_failures_total)

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
        commit = self.sync.graph.commit_count()  # on the writer thread: the number of the commit heard of
        with self._progress:
            self._commits = max(self._commits, commit)
        self._wake.set()

    def wait_synced(self, timeout: float = 5.0) -> bool:
        """Block until every commit made before this call is searchable (bounded: after ``timeout`` the caller
        goes on with the index as it is). Staged commits are searchable once staged. False on timeout."""
        if self.rebuilding is not None:  # behind a whole rebuild: waiting a few seconds would not help
            return False
        with self._progress:
            target = self._commits
            if self._floor >= target:
                return True
            self._hurry.set()
            return self._progress.wait_for(lambda: self._floor >= target or self._stop.is_set(), timeout)

    def stage(self, revision_krefs: list[str], vectors: dict[str, np.ndarray]) -> None:
        """Called by a writer right after its commit: these revisions were just written, ``vectors`` holds the
        embeddings the writer computed, keyed by the searchable text they embed (``searchable_text``). Their rows
        are searchable when this returns; the table and the graph's outbox follow in the background. Never
        raises: the write is committed, and what a stage could not do the next round does."""
        if not revision_krefs:  # nothing written: the thread's last commit may be an older, unrelated one
            return
        commit = self.sync.graph.last_commit()
        with self._gate.staging():
            self._stage(commit, revision_krefs, vectors)
        self._wake.set()

    def _stage(self, commit: int, revision_krefs: list[str], vectors: dict[str, np.ndarray]) -> None:
        try:
            shown, others = self.sync.stage(revision_krefs, vectors)
            besides = self.sync.graph.dirtied_in(commit)
        except Exception as exc:  # the commit stays uncovered: readers wait for the round, which scans
            log.warning("could not make a write searchable at once (the index sync will): %s", exc)
            log.debug("stage failure", exc_info=True)
            return
        if besides is not None:
            besides = [k for k in besides if k not in set(revision_krefs)]
        with self._queue_lock:
            for doc, row in shown:
                queued = self._staged.get(doc.revision_kref)
                if queued is None or queued[0].modified_at <= doc.modified_at:
                    self._staged[doc.revision_kref] = (doc, row)
            self._items.update(d.item_kref for d in others)
            self._items.update(item_of(k) for k in besides or [])  # a revision's kref starts with its item's
            if besides:  # readers wait for the round that indexes those items (see ``_catch_up``)
                self._covered_by_items.append(commit)
        if besides is not None and not besides:
            self._cover(commit)

    def _cover(self, commit: int) -> None:
        """Commit ``commit`` needs no round before readers see it (it was staged, or it is the worker's own)."""
        with self._progress:
            if commit > self._floor:
                self._covered.add(commit)
                self._advance()

    def _advance(self) -> None:
        """Raise the floor over synced and covered commits, and wake the readers waiting (holding _progress)."""
        if self._synced > self._floor:
            self._floor = self._synced
            self._covered = {c for c in self._covered if c > self._floor}
        while self._floor + 1 in self._covered:
            self._floor += 1
            self._covered.discard(self._floor)
        self._progress.notify_all()

    def pending(self) -> int:
        """Revisions committed whose index rows are not written yet (the graph's outbox, counted as commits change
        it: no scan). Staged ones among them are searchable already (``staged``)."""
        return self.sync.graph.pending_count()

    def staged(self) -> int:
        """Rows searchable in memory whose table write is still queued."""
        with self._queue_lock:
            return len(self._staged)

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
        """Block until everything pending has been indexed and written to the table (tests, backups)."""
        self._idle.clear()
        self._scan_due = True
        self._hurry.set()
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
                self._scan_due = True
                self._stop.wait(self.interval)  # back off (not holding the round): a failing round must not spin
                continue
            first = False
            if self._wake.is_set():
                continue  # a commit landed during the round
            self._idle.set()
            if not self._wake.wait(self.interval):  # a commit wakes us early; otherwise a periodic round
                self._scan_due = True
            elif not self._stop.is_set():
                self._hurry.wait(SETTLE_SECONDS)
            self._hurry.clear()

    def _round_once(self, first: bool) -> str:
        """One round: repair on the first, catch up with the outbox, compact when due. "ok", "healed" (it
        failed on a damaged index, which was replaced) or "failed" (the outbox keeps the work for the next)."""
        try:
            if self._check_due:
                self._check_due = False
                self._heal()
            if first:
                log.info("search index sync: %d revisions wait for the index", self.pending())  # (reads the outbox)
                self.sync.index.resident()  # load the in-memory rows now, not on the first query
                repaired = self.sync.repair()
                self._written += repaired.indexed
                log.info("search index ready: %d rows written, %d stale removed, %d requeued",
                         repaired.indexed, repaired.removed, repaired.requeued)
            self._written += self._catch_up(first)
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
            self.failed_rounds += 1
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
            with self._queue_lock:  # every revision is requeued in the graph: the round after reads them all
                self._staged.clear()
                self._items.clear()
                self._covered_by_items.clear()
            self._scan_due = True
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

    def _catch_up(self, scanning: bool) -> int:
        """Index until nothing is pending: staged rows to the table first, then the items stages named, then,
        when due, the whole outbox. An empty outbox read after commit n means every commit up to n is indexed
        (this round's own mark-indexed commits included), so n is published as synced. ``scanning``: read the
        whole outbox until it is empty (on the first round; set once a scan has found rows)."""
        written = 0
        while True:
            if self._pause_wanted.is_set():
                self._wake.set()  # not caught up: the round after the pause goes on (and nobody is told idle)
                return written
            with self._progress:
                seen = self._commits
                uncovered = self._floor < seen
            if self.sync.graph.removed_revisions():  # queued before the commits counted in `seen` were announced
                with self._gate.dropping():
                    dropped: list[str] = []
                    self.sync.drop_removed(dropped)
                    with self._queue_lock:
                        for kref in dropped:
                            self._staged.pop(kref, None)
            with self._queue_lock:
                batch = list(itertools.islice(self._staged.values(), self.sync.batch))
                items = [] if batch else sorted(self._items)
                waiting: list[int] = []
                if items:
                    self._items.clear()
                    waiting, self._covered_by_items = self._covered_by_items, []
            if batch:
                written += self._write_staged(batch)
                continue
            if items:
                written += self._index_items(items)
                for commit in waiting:  # their other revisions are in now (a failed round leaves them to a scan)
                    self._cover(commit)
                continue
            if not (self._scan_due or uncovered or scanning):
                return written
            self._scan_due = False
            docs = self.sync.next_batch()
            if docs:
                log.debug("index round: wrote %d rows", len(docs))
                self._forget_staged(docs)
                written += len(docs)
                self._writes += 1
                scanning = True  # go on until the outbox reads empty
                continue
            with self._progress:
                self._synced = max(self._synced, seen)
                self._advance()
            if self.rebuilding is not None:
                log.warning("the search index has been rebuilt from the graph (the damaged copy stays at %s; "
                            "delete it when you no longer need it)", self.rebuilding.aside)
                self.rebuilding = None
            return written

    def _write_staged(self, batch: list[tuple[IndexDoc, IndexRow]]) -> int:
        """Staged rows (searchable already) to the table, then their outbox flags cleared."""
        log.debug("index round: writing %d staged rows", len(batch))
        self.sync.index.persist([row for _, row in batch])
        self.sync.graph.mark_indexed([doc for doc, _ in batch], self._cover)
        with self._queue_lock:
            for doc, _ in batch:  # a newer state staged meanwhile stays queued
                if self._staged.get(doc.revision_kref, (None,))[0] is doc:
                    del self._staged[doc.revision_kref]
        self._writes += 1
        return len(batch)

    def _index_items(self, items: list[str]) -> int:
        with self._queue_lock:  # a queued state as new as the graph's is written by its own batch
            staged = {kref: doc.modified_at for kref, (doc, _) in self._staged.items()}
        shown = self.sync.index_items(items, skip=lambda doc: staged.get(doc.revision_kref, "") >= doc.modified_at)
        if shown:
            self._forget_staged([doc for doc, _ in shown])
            self._writes += 1
        return len(shown)

    def _forget_staged(self, written: list[IndexDoc]) -> None:
        """Queued rows that a round has just written in the same or a newer state need no write of their own."""
        with self._queue_lock:
            for doc in written:
                queued = self._staged.get(doc.revision_kref)
                if queued is not None and queued[0].modified_at <= doc.modified_at:
                    del self._staged[doc.revision_kref]

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._hurry.set()
        with self._progress:
            self._progress.notify_all()
        self._thread.join(timeout=30)
        self.sync.graph.unsubscribe(self._on_commit)
