"""Keeping the search index in step with the graph (the outbox protocol of appliance/graph/outbox.py)."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass

from appliance.core.ports import Embedder
from appliance.core.search import ancestors, searchable_text
from appliance.graph import GraphStore, IndexDoc
from appliance.search.index import IndexRow, SearchIndex

log = logging.getLogger(__name__)
Progress = Callable[[int, int], None]  # (done, total)


@dataclass(frozen=True)
class Repair:
    indexed: int  # rows written
    removed: int  # rows whose revision no longer exists
    requeued: int  # revisions that had no row although marked indexed


class IndexSync:
    def __init__(self, graph: GraphStore, index: SearchIndex, embedder: Embedder, batch: int = 128) -> None:
        self.graph, self.index, self.embedder, self.batch = graph, index, embedder, batch

    def run_pending(self, progress: Progress | None = None) -> int:
        """Index every revision waiting in the outbox; returns how many rows were written."""
        total = self.graph.pending_count() if progress else 0  # a full scan: only for a progress bar
        self.drop_removed()
        done = 0
        while docs := self.graph.unindexed(self.batch):
            self.index_docs(docs)
            done += len(docs)
            if progress:
                progress(min(done, total), max(total, done))
        return done

    def drop_removed(self) -> int:
        """Drop the index rows of revisions that committed deletions removed from the graph (before writing
        rows: a revision deleted and created again under the same kref gets its new row)."""
        removed = self.graph.removed_revisions()
        if removed:
            self.index.delete(removed)
            self.graph.forget_removed(removed)
        return len(removed)

    def index_docs(self, docs: list[IndexDoc]) -> None:
        """Write one batch of outbox entries to the index, then mark them indexed in the graph."""
        self.index.upsert(self._rows(docs))
        self.graph.mark_indexed(docs)

    def _rows(self, docs: list[IndexDoc]) -> list[IndexRow]:
        texts = [searchable_text(d.item_name, d.metadata, d.tags) for d in docs]
        hashes = [hashlib.sha1(t.encode()).hexdigest() for t in texts]
        known = self.index.text_hashes([d.revision_kref for d in docs])
        fresh = [i for i, d in enumerate(docs) if known.get(d.revision_kref, ("",))[0] != hashes[i]]
        vectors = dict(zip(fresh, self.embedder.embed([texts[i] for i in fresh]), strict=True))
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
