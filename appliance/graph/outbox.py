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
from dataclasses import dataclass

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


class OutboxStore(StoreBase):
    def unindexed(self, limit: int = 256) -> list[IndexDoc]:
        """Up to ``limit`` revisions waiting for the index, oldest id first."""
        def job(tx: Tx) -> list[IndexDoc]:
            rows = tx.rows("MATCH (i:Item)-[:HAS_REVISION]->(r:Revision) WHERE NOT r.indexed "
                           "RETURN i, r ORDER BY r.id LIMIT $n", {"n": limit})
            if not rows:
                return []
            archived = archived_projects(tx)
            tags: dict[str, list[str]] = {}
            for revision, tag in tx.rows("MATCH (:Item)-[t:TAGGED]->(r:Revision) WHERE NOT r.indexed "
                                         "AND t.until = '' RETURN r.id, t.tag"):
                tags.setdefault(revision, []).append(tag)
            return [IndexDoc(r["id"], i["project"], i["space"], i["kind"], i["name"], loads(r["metadata"]),
                             sorted(tags.get(r["id"], [])),
                             bool(r["deprecated"] or i["deprecated"] or i["project"] in archived),
                             r["created_at"], r["modified_at"]) for i, r in rows]

        return self._engine.read(job)

    def removed_revisions(self) -> list[str]:
        """Krefs of revisions that committed deletions removed and whose index rows are still to be dropped."""
        with self._removed_lock:
            return [to_kref(r) for r in self._removed]

    def forget_removed(self, revision_krefs: list[str]) -> None:
        """The index no longer holds these revisions' rows."""
        dropped = {k[len("kref://"):] for k in revision_krefs}
        with self._removed_lock:
            self._removed = [r for r in self._removed if r not in dropped]

    def mark_indexed(self, docs: list[IndexDoc]) -> None:
        """Clear the outbox flag of revisions whose state is still the one that was indexed."""
        self._engine.write(lambda tx: tx.unwind(
            "UNWIND $rows AS row MATCH (r:Revision {id: row.id}) WHERE r.modified_at = row.m "
            "SET r.indexed = true", [{"id": d.revision_id, "m": d.modified_at} for d in docs]))

    def mark_unindexed(self, revision_krefs: list[str]) -> None:
        """Queue these revisions for indexing (their index rows are missing)."""
        ids = [k[len("kref://"):] for k in revision_krefs]
        for start in range(0, len(ids), 5000):
            self._engine.write(functools.partial(self._dirty, revisions=ids[start: start + 5000]))

    def mark_all_unindexed(self) -> None:
        """Queue every revision for indexing (reindex)."""
        self._engine.write(lambda tx: tx.run("MATCH (r:Revision) SET r.indexed = false"))

    def revision_krefs(self) -> set[str]:
        return {to_kref(r[0]) for r in self._engine.read(lambda tx: tx.rows("MATCH (r:Revision) RETURN r.id"))}

    def pending_count(self) -> int:
        return int(self._engine.read(lambda tx: tx.scalar(
            "MATCH (r:Revision) WHERE NOT r.indexed RETURN count(r)")))

