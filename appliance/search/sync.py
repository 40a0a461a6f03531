"""Keeping the search index in step with the graph (the outbox protocol of appliance/graph/outbox.py)."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import logging
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from appliance.core.ports import Embedder
from appliance.core.search import ancestors, searchable_text
from appliance.graph import GraphStore, IndexDoc
from appliance.graph._support import item_of
from appliance.search.index import IndexRow, SearchIndex

log = logging.getLogger(__name__)
Progress = Callable[[int, int], None]  # (done, total)
Shown = list[tuple[IndexDoc, IndexRow]]


class ShownStates:
    """Which state (``modified_at``) of each revision the resident rows show, kept only while it matters.

    Two paths make rows searchable: a writer's ``stage`` right after its commit, and the index worker's rounds.
    Each reads revisions from the graph, then shows what it read; a path that read earlier may show later, and
    must not put an older state over a newer one (it would stay: the newer one is marked indexed). So every
    read is bracketed by ``reading``, and a state is shown only when it is not older than the one shown. A
    shown state need only be remembered while a read that began before it was shown is still going (a read
    that begins later sees the graph at least as new): the table stays as small as the reads in flight."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clock = itertools.count(1)
        self._reads: dict[int, int] = {}  # read → the clock when it began
        self._shown: dict[str, tuple[str, int]] = {}  # revision kref → (modified_at shown, the clock then)

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        with self._lock:
            began = next(self._clock)
            self._reads[began] = began
        try:
            yield
        finally:
            with self._lock:
                del self._reads[began]
                oldest = min(self._reads.values(), default=None)
                self._shown = {} if oldest is None else {k: v for k, v in self._shown.items() if v[1] > oldest}

    def show(self, docs: list[IndexDoc], rows: list[IndexRow], show: Callable[[list[IndexRow]], None]) -> Shown:
        """Show the rows (inside ``reading``) whose state is not older than the one shown; returns them."""
        with self._lock:
            now = next(self._clock)
            kept = [(d, r) for d, r in zip(docs, rows, strict=True)
                    if d.modified_at >= self._shown.get(d.revision_kref, ("", 0))[0]]
            show([r for _, r in kept])
            for doc, _ in kept:
                self._shown[doc.revision_kref] = (doc.modified_at, now)
            return kept

    def __len__(self) -> int:
        with self._lock:
            return len(self._shown)


@dataclass(frozen=True)
class Repair:
    indexed: int  # rows written
    removed: int  # rows whose revision no longer exists
    requeued: int  # revisions that had no row although marked indexed


class IndexSync:
    def __init__(self, graph: GraphStore, index: SearchIndex, embedder: Embedder, batch: int = 128) -> None:
        self.graph, self.index, self.embedder, self.batch = graph, index, embedder, batch
        self.shown = ShownStates()
        self.marked: Callable[[int], None] | None = None  # told the number of each mark-indexed commit

    def run_pending(self, progress: Progress | None = None) -> int:
        """Index every revision waiting in the outbox; returns how many rows were written."""
        total = self.graph.pending_count() if progress else 0  # for a progress bar
        self.drop_removed()
        done = 0
        while indexed := self.next_batch():
            done += len(indexed)
            if progress:
                progress(min(done, total), max(total, done))
        return done

    def next_batch(self) -> list[IndexDoc]:
        """Index one batch from the outbox (a scan of every revision); returns the revisions read (none: empty)."""
        with self.shown.reading():
            docs = self.graph.unindexed(self.batch)
            self.index_docs(docs)
        return docs

    def index_items(self, item_krefs: list[str], skip: Callable[[IndexDoc], bool] = lambda doc: False) -> Shown:
        """Index the waiting revisions of these items (no scan), but those ``skip`` names."""
        with self.shown.reading():
            return self.index_docs([d for d in self.graph.unindexed_of_items(item_krefs) if not skip(d)])

    def stage(self, revision_krefs: list[str], vectors: Mapping[str, np.ndarray]) -> tuple[Shown, list[IndexDoc]]:
        """Make these just-committed revisions searchable in the resident rows, with the vectors their writer
        computed (keyed by searchable text; a text not among them is embedded). Returns the rows shown, for the
        table, and the other waiting revisions of the same items (a write that stacked moved their tags)."""
        wanted = set(revision_krefs)
        with self.shown.reading():
            docs = self.graph.unindexed_of_items([item_of(k) for k in revision_krefs])
            mine = [d for d in docs if d.revision_kref in wanted]
            shown = self.shown.show(mine, self._rows(mine, vectors), self.index.show)
        return shown, [d for d in docs if d.revision_kref not in wanted]

    def drop_removed(self, dropped: list[str] | None = None) -> int:
        """Drop the index rows of revisions that committed deletions removed from the graph (before writing
        rows: a revision deleted and created again under the same kref gets its new row)."""
        removed = self.graph.removed_revisions()
        if removed:
            self.index.delete(removed)
            self.graph.forget_removed(removed)
            if dropped is not None:
                dropped += removed
        return len(removed)

    def index_docs(self, docs: list[IndexDoc]) -> Shown:
        """Index revisions read inside ``shown.reading()``: show their rows, write them to the table, then mark
        them indexed in the graph. Returns those shown (a newer state shown meanwhile is left alone: its own
        write or the outbox brings it)."""
        if not docs:
            return []
        shown = self.shown.show(docs, self._rows(docs), self.index.show)
        self.index.persist([r for _, r in shown])
        self.graph.mark_indexed([d for d, _ in shown], self.marked)
        return shown

    def _rows(self, docs: list[IndexDoc], given: Mapping[str, np.ndarray] | None = None) -> list[IndexRow]:
        """Rows with vectors: given ones (by text), the table's for an unchanged text, else embedded."""
        texts = [searchable_text(d.item_name, d.metadata, d.tags) for d in docs]
        hashes = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
        vectors: dict[int, np.ndarray] = {i: given[t] for i, t in enumerate(texts) if given and t in given}
        asked = [d.revision_kref for i, d in enumerate(docs) if i not in vectors]
        known = self.index.text_hashes(asked) if asked else {}
        fresh = [i for i, d in enumerate(docs)
                 if i not in vectors and known.get(d.revision_kref, ("",))[0] != hashes[i]]
        vectors.update(zip(fresh, self.embedder.embed([texts[i] for i in fresh]), strict=True))
        return [
            IndexRow(
                revision_kref=d.revision_kref, item_kref=d.item_kref, project=d.project, space=d.space,
                spaces=ancestors(d.space), kind=d.kind,
                memory_type=d.metadata.get("memory_type") or d.metadata.get("type") or "",
                tags=d.tags, deprecated=d.deprecated, created_at=d.created_at,
                title=d.metadata.get("title") or d.item_name, text=texts[i], text_hash=hashes[i],
                vector=vectors[i] if i in vectors else known[d.revision_kref][1],
            )
            for i, d in enumerate(docs)
        ]

    def repair(self, progress: Progress | None = None) -> Repair:
        """Make graph and index agree again (on start, after a crash): drop rows of deleted revisions,
        requeue revisions whose rows are missing, then index everything pending."""
        in_graph = self.graph.revision_krefs()
        in_index = self.index.revision_krefs()
        stale = sorted(in_index - in_graph)
        self.index.delete(stale)
        missing = sorted(in_graph - in_index)
        self.graph.mark_unindexed(missing)
        indexed = self.run_pending(progress)
        if stale or missing:
            log.info("search index repaired: %d stale rows removed, %d missing rows requeued", len(stale),
                     len(missing))
        return Repair(indexed, len(stale), len(missing))

    def reindex(self, progress: Progress | None = None) -> int:
        """Rebuild every row from the graph (e.g. after changing the embedding model)."""
        self.graph.mark_all_unindexed()
        self.index.delete(sorted(self.index.revision_krefs() - self.graph.revision_krefs()))
        written = self.run_pending(progress)
        self.index.optimize()
        return written
