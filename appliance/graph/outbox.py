"""The search-index outbox: revisions whose index row is missing or stale carry ``indexed = false``.

Every graph write that changes what the index holds for a revision (creation, metadata, tags, deprecation)
clears the flag in the same transaction and moves ``modified_at``. The index sync reads flagged revisions,
writes their rows, then sets the flag back only where ``modified_at`` is unchanged, so a change that lands
in between is never lost. A crash between the graph commit and the index write leaves the flag cleared:
the sync on the next start repairs it.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from functools import partial

from appliance.graph._support import REMOVALS, StoreBase, item_of, loads, to_kref
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
    deprecated: bool  # the revision or its item
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
            tags: dict[str, list[str]] = {}
            for revision, tag in tx.rows("MATCH (:Item)-[t:TAGGED]->(r:Revision) WHERE NOT r.indexed "
                                         "AND t.until = '' RETURN r.id, t.tag"):
                tags.setdefault(revision, []).append(tag)
            return [IndexDoc(r["id"], i["project"], i["space"], i["kind"], i["name"], loads(r["metadata"]),
                             sorted(tags.get(r["id"], [])), bool(r["deprecated"] or i["deprecated"]),
                             r["created_at"], r["modified_at"]) for i, r in rows]

        return self._engine.read(job)

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

    # -- removals: rows of revisions that are gone from the graph ------------------------------------------
    def last_event(self) -> int:
        """The sequence number of the newest audit-trail entry (0 when there is none)."""
        return int(self._engine.read(lambda tx: tx.scalar("MATCH (e:Event) RETURN max(e.seq)")) or 0)

    def removals_since(self, after: int) -> tuple[list[str], int]:
        """The krefs that removals recorded after entry ``after`` name (revisions, items, spaces, projects),
        oldest first, and the entry to read after next time."""
        def job(tx: Tx) -> tuple[list[str], int]:
            newest = int(tx.scalar("MATCH (e:Event) RETURN max(e.seq)") or 0)
            rows = tx.rows("MATCH (e:Event) WHERE e.seq > $after AND e.seq <= $newest AND e.routing_key IN $keys "
                           "RETURN e.kref ORDER BY e.seq", {"after": after, "newest": newest, "keys": list(REMOVALS)})
            return [r[0] for r in rows], max(newest, after)

        return self._engine.read(job)

    def missing_revisions(self, revision_krefs: list[str]) -> list[str]:
        """Those of ``revision_krefs`` that name no revision (any more)."""
        def present(tx: Tx, chunk: list[str]) -> set[str]:
            ids = [k[len("kref://"):] for k in chunk]
            return {to_kref(r[0]) for r in tx.rows("MATCH (r:Revision) WHERE r.id IN $ids RETURN r.id", {"ids": ids})}

        missing = []
        for start in range(0, len(revision_krefs), 1000):
            chunk = revision_krefs[start: start + 1000]
            found = self._engine.read(partial(present, chunk=chunk))
            missing += [k for k in chunk if k not in found]
        return missing
