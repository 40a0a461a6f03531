"""The search-index outbox: revisions whose index row is missing or stale carry ``indexed = false``.

Every graph write that changes what the index holds for a revision (creation, metadata, tags, deprecation)
clears the flag in the same transaction and moves ``modified_at``. The index sync reads flagged revisions,
writes their rows, then sets the flag back only where ``modified_at`` is unchanged, so a change that lands
in between is never lost. A crash between the graph commit and the index write leaves the flag cleared:
the sync on the next start repairs it.

Deleting revisions (an item, a space, a project) leaves nothing to flag: the deleting transaction queues the
revisions' ids once it commits (``removed_revisions``) and the sync drops their rows before its next round
of writes; a crash before that leaves rows of revisions the graph no longer has, which the repair on start
removes. Archiving a project flags its revisions: their rows are then marked deprecated (hidden from search).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from appliance.errors import StorageError
from appliance.graph._support import StoreBase, archived_projects, item_of, loads, to_kref
from appliance.graph.engine import Tx


@dataclass(frozen=True)
class IndexDoc:
    """What the search index needs to know about one revision."""

    revision_id: str
    project: str
    space: str
    kind: str
    item_name: str
    metadata: dict[str, str]
    tags: list[str]
    deprecated: bool  # the revision, its item or its project (archived)
    created_at: str
    modified_at: str

    @property
    def revision_kref(self) -> str:
        return to_kref(self.revision_id)

    @property
    def item_kref(self) -> str:
        return to_kref(item_of(self.revision_id))


def _docs(tx: Tx, rows: list[list[Any]], tags: dict[str, list[str]]) -> list[IndexDoc]:
    """IndexDocs of (item, revision) rows, given their revisions' current tags."""
    archived = archived_projects(tx) if rows else set()
    return [IndexDoc(r["id"], i["project"], i["space"], i["kind"], i["name"], loads(r["metadata"]),
                     sorted(tags.get(r["id"], [])),
                     bool(r["deprecated"] or i["deprecated"] or i["project"] in archived),
                     r["created_at"], r["modified_at"]) for i, r in rows]


class OutboxStore(StoreBase):
    def unindexed(self, limit: int = 256) -> list[IndexDoc]:
        """Up to ``limit`` revisions waiting for the index, oldest id first. It scans every revision (~120 ms
        at 100k revisions, benchmarks/index_bench.py): the index sync runs it on start, periodically and after
        writes it was not told about (``unindexed_of_items`` reads a few items' revisions in milliseconds)."""
        def job(tx: Tx) -> list[IndexDoc]:
            rows = tx.rows("MATCH (i:Item)-[:HAS_REVISION]->(r:Revision) WHERE NOT r.indexed "
                           "RETURN i, r ORDER BY r.id LIMIT $n", {"n": limit})
            if not rows:
                return []
            tags: dict[str, list[str]] = {}
            for revision, tag in tx.rows("MATCH (:Item)-[t:TAGGED]->(r:Revision) WHERE NOT r.indexed "
                                         "AND t.until = '' RETURN r.id, t.tag"):
                tags.setdefault(revision, []).append(tag)
            return _docs(tx, rows, tags)

        return self._engine.read(job)

    def unindexed_of_items(self, item_krefs: list[str]) -> list[IndexDoc]:
        """The revisions of these items that wait for the index (a write's new revisions, and the earlier ones
        whose tags or metadata it changed). Two primary-key reads per item: Kùzu plans ``UNWIND $ids … MATCH
        ({id: id})`` as a scan of the whole table (~170 ms at 100k revisions), one id at a time costs ~2-7 ms."""
        def job(tx: Tx) -> list[IndexDoc]:
            rows: list[list[Any]] = []
            tags: dict[str, list[str]] = {}
            for item in dict.fromkeys(k[len("kref://"):] for k in item_krefs):
                found = tx.rows("MATCH (i:Item {id: $item})-[:HAS_REVISION]->(r:Revision) WHERE NOT r.indexed "
                                "RETURN i, r", {"item": item})
                if not found:
                    continue
                rows += found
                for revision, tag in tx.rows("MATCH (i:Item {id: $item})-[t:TAGGED]->(r:Revision) "
                                             "WHERE t.until = '' RETURN r.id, t.tag", {"item": item}):
                    tags.setdefault(revision, []).append(tag)
            return _docs(tx, rows, tags)

        return self._engine.read(job)

    def commit_count(self) -> int:
        """Write transactions committed since the store opened (see ``KuzuEngine.commits``)."""
        return self._engine.commits

    def last_commit(self) -> int:
        """The number of the last transaction the calling thread or task committed (0: none yet)."""
        return self._engine.last_commit()

    def dirtied_in(self, commit: int) -> list[str] | None:
        """Krefs of the revisions commit ``commit`` flagged for the index besides those it created (a stacked
        write moved their tags, a supersession changed their metadata); None when not known (a bulk requeue, or
        a commit too old to be remembered)."""
        with self._removed_lock:
            if commit <= self._dirtied_floor:
                return None
            known = self._dirtied.get(commit, [])
            return None if known is None else [to_kref(r) for r in dict.fromkeys(known)]

    def removed_revisions(self) -> list[str]:
        """Krefs of revisions that committed deletions removed and whose index rows are still to be dropped."""
        with self._removed_lock:
            return [to_kref(r) for r in self._removed]

    def forget_removed(self, revision_krefs: list[str]) -> None:
        """The index no longer holds these revisions' rows."""
        dropped = {k[len("kref://"):] for k in revision_krefs}
        with self._removed_lock:
            self._removed = [r for r in self._removed if r not in dropped]

    def mark_indexed(self, docs: list[IndexDoc], committed: Callable[[int], None] | None = None) -> None:
        """Clear the outbox flag of revisions whose state is still the one that was indexed. ``committed`` is
        told the number of this commit before the commit listeners hear of it (the index worker's own commits
        change nothing a reader waits for)."""
        def job(tx: Tx) -> None:
            if docs:  # Kùzu cannot type an empty list parameter
                cleared = tx.rows("UNWIND $rows AS row MATCH (r:Revision {id: row.id}) WHERE r.modified_at = row.m "
                                  "SET r.indexed = true RETURN r.id",
                                  {"rows": [{"id": d.revision_id, "m": d.modified_at} for d in docs]})
                self._outbox_change(tx, drop=[row[0] for row in cleared])
            if committed is not None:
                tx.after_commit(lambda: committed(self._engine.commits))

        self._engine.write(job)

    def mark_unindexed(self, revision_krefs: list[str]) -> None:
        """Queue these revisions for indexing (their index rows are missing)."""
        ids = [k[len("kref://"):] for k in revision_krefs]
        for start in range(0, len(ids), 5000):
            self._engine.write(functools.partial(self._dirty, revisions=ids[start: start + 5000]))

    def mark_all_unindexed(self) -> None:
        """Queue every revision for indexing (reindex)."""
        def job(tx: Tx) -> None:
            tx.run("MATCH (r:Revision) SET r.indexed = false")
            self._outbox_change(tx, add=[row[0] for row in tx.rows("MATCH (r:Revision) RETURN r.id")])

        self._engine.write(job)

    def revision_krefs(self) -> set[str]:
        return {to_kref(r[0]) for r in self._engine.read(lambda tx: tx.rows("MATCH (r:Revision) RETURN r.id"))}

    def pending_count(self) -> int:
        """Revisions waiting for the search index, exactly, without a scan: the outbox as the commits so far left
        it (``_outbox_change``). The first call reads it (``count_unindexed``'s scan), between two commits."""
        with self._unindexed_lock:
            if self._unindexed is not None:
                return len(self._unindexed)
        if self._engine.read_only:
            return self.count_unindexed()
        try:
            self._engine.hold(self._load_unindexed)
        except StorageError:  # asked inside a write (no hold there): that transaction's own view, scanned
            return self.count_unindexed()
        with self._unindexed_lock:
            return len(self._unindexed or ())

    def _load_unindexed(self, tx: Tx) -> None:
        """Read the outbox (between two commits: see ``KuzuEngine.hold``), once."""
        with self._unindexed_lock:
            if self._unindexed is not None:
                return
        found = {row[0] for row in tx.rows("MATCH (r:Revision) WHERE NOT r.indexed RETURN r.id")}
        with self._unindexed_lock:
            self._unindexed = found

    def count_unindexed(self) -> int:
        """The outbox's size by a scan of every revision (~100 ms at 100k revisions): what ``pending_count``
        keeps without one (its tests compare the two)."""
        return int(self._engine.read(lambda tx: tx.scalar(
            "MATCH (r:Revision) WHERE NOT r.indexed RETURN count(r)")))

