"""Raw reads and the bulk write behind export and import (``appliance.portability``).

Export pages through the graph with keyset reads (each page one read transaction, never the whole graph);
import writes a batch of already validated nodes and relationships in one transaction with ``COPY … FROM
(UNWIND …)``, keeping every stored field as the file gives it (ids, numbers, times, authors, deprecation,
tag spans, bundle membership). Rows are Kùzu's property dicts; ``appliance.portability.records`` turns them
into export records and back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from appliance.graph._support import StoreBase
from appliance.graph.engine import Tx

Row = dict[str, Any]


@dataclass
class ItemParts:
    """What hangs off a page of items: their revisions, tag spans and artifacts (raw rows)."""

    revisions: dict[str, list[Row]] = field(default_factory=dict)  # item id → revisions by number
    tags: dict[str, list[Row]] = field(default_factory=dict)  # item id → spans {revision, tag, since, until}
    artifacts: dict[str, list[Row]] = field(default_factory=dict)  # item id → artifacts by revision, name


@dataclass
class LoadBatch:
    """New nodes and relationships for one import transaction (rows in the graph's own columns), plus the
    updates that adopt an empty project the store made itself (its record, root space and creation event)."""

    projects: list[Row] = field(default_factory=list)
    spaces: list[Row] = field(default_factory=list)
    items: list[Row] = field(default_factory=list)
    revisions: list[Row] = field(default_factory=list)
    tags: list[Row] = field(default_factory=list)
    artifacts: list[Row] = field(default_factory=list)
    links: list[Row] = field(default_factory=list)
    members: list[Row] = field(default_factory=list)
    events: list[Row] = field(default_factory=list)
    adopt_projects: list[Row] = field(default_factory=list)
    adopt_spaces: list[Row] = field(default_factory=list)
    adopt_events: list[Row] = field(default_factory=list)  # {seq, at, author, details}
    changes: list[tuple[str, str]] = field(default_factory=list)  # (what, kref) per record, for the audit trail

    def __len__(self) -> int:
        return sum(len(getattr(self, name)) for name in self.__dataclass_fields__ if name != "changes")


_PROJECT_FILTER = "($project = '' OR n.project = $project)"


class PortableStore(StoreBase):
    # -- reads (export, and the import's comparison with what the store holds) ------------------------
    def portable_projects(self, project: str = "") -> list[Row]:
        return [r[0] for r in self._engine.read(lambda tx: tx.rows(
            "MATCH (p:Project) WHERE $project = '' OR p.name = $project RETURN p ORDER BY p.name",
            {"project": project}))]

    def portable_spaces(self, after: str, limit: int, project: str = "") -> list[Row]:
        """Spaces after ``after`` in path order: a parent's path sorts before its children's."""
        return [r[0] for r in self._engine.read(lambda tx: tx.rows(
            f"MATCH (n:Space) WHERE n.path > $after AND {_PROJECT_FILTER} RETURN n ORDER BY n.path LIMIT $n",
            {"after": after, "project": project, "n": limit}))]

    def portable_items(self, after: str, limit: int, project: str = "", kind: str = "") -> list[Row]:
        return [r[0] for r in self._engine.read(lambda tx: tx.rows(
            f"MATCH (n:Item) WHERE n.id > $after AND {_PROJECT_FILTER} AND ($kind = '' OR n.kind = $kind) "
            "RETURN n ORDER BY n.id LIMIT $n", {"after": after, "project": project, "kind": kind, "n": limit}))]

    def portable_nodes(self, table: str, keys: list[str]) -> dict[str, Row]:
        """Nodes of ``table`` (Project, Space, Item, Revision, Artifact) by primary key; absent keys left out."""
        key = {"Project": "name", "Space": "path"}.get(table, "id")
        if not keys:
            return {}
        rows = self._engine.read(lambda tx: tx.rows(
            f"UNWIND $keys AS k MATCH (n:{table} {{{key}: k}}) RETURN n", {"keys": sorted(set(keys))}))
        return {r[0][key]: r[0] for r in rows}

    def portable_parts(self, item_ids: list[str]) -> ItemParts:
        parts = ItemParts()
        if not item_ids:
            return parts

        def job(tx: Tx) -> None:
            ids = {"ids": item_ids}
            for item, node in tx.rows("UNWIND $ids AS id MATCH (:Item {id: id})-[:HAS_REVISION]->(r:Revision) "
                                      "RETURN id, r ORDER BY id, r.number", ids):
                parts.revisions.setdefault(item, []).append(node)
            for item, revision, tag, since, until in tx.rows(
                    "UNWIND $ids AS id MATCH (:Item {id: id})-[t:TAGGED]->(r:Revision) "
                    "RETURN id, r.id, t.tag, t.since, t.until", ids):
                parts.tags.setdefault(item, []).append(
                    {"revision": revision, "tag": tag, "since": since, "until": until})
            for item, node in tx.rows("UNWIND $ids AS id MATCH (:Item {id: id})-[:HAS_REVISION]->(:Revision)"
                                      "-[:HAS_ARTIFACT]->(a:Artifact) RETURN id, a", ids):
                parts.artifacts.setdefault(item, []).append(node)

        self._engine.read(job)
        return parts

    def portable_links(self, item_ids: list[str]) -> list[Row]:
        """Edges leaving the revisions of these items: {source, target, target_project, edge_type, …}."""
        if not item_ids:
            return []
        rows = self._engine.read(lambda tx: tx.rows(
            "UNWIND $ids AS id MATCH (:Item {id: id})-[:HAS_REVISION]->(a:Revision)-[e:LINK]->(b:Revision) "
            "RETURN a.id, b.id, e", {"ids": item_ids}))
        return [{"source": a, "target": b, **rel} for a, b, rel in rows]

    def portable_members(self, bundle_ids: list[str]) -> list[Row]:
        """Bundle memberships (current and removed) of these bundles: {bundle, member, added_in, …}."""
        if not bundle_ids:
            return []
        rows = self._engine.read(lambda tx: tx.rows(
            "UNWIND $ids AS id MATCH (:Item {id: id})-[c:COLLECTS]->(m:Item) RETURN id, m.id, c",
            {"ids": bundle_ids}))
        return [{"bundle": b, "member": m, **rel} for b, m, rel in rows]

    def portable_events(self, after: int, limit: int) -> list[Row]:
        """Events with ``after < seq <= after + limit`` (the sequence has no gaps: a range, not a sort)."""
        return [r[0] for r in self._engine.read(lambda tx: tx.rows(
            "MATCH (e:Event) WHERE e.seq > $after AND e.seq <= $upto RETURN e ORDER BY e.seq",
            {"after": after, "upto": after + limit}))]

    def portable_next_event_seq(self, after: int) -> int | None:
        """The first sequence number after ``after`` (events may have been pruned), or None."""
        found = self._engine.read(lambda tx: tx.scalar("MATCH (e:Event) WHERE e.seq > $after RETURN min(e.seq)",
                                                       {"after": after}))
        return None if found is None else int(found)

    def portable_events_at(self, earliest: str, latest: str) -> list[Row]:
        """Events whose time lies in [earliest, latest] (an import's check for events it already holds)."""
        return [r[0] for r in self._engine.read(lambda tx: tx.rows(
            "MATCH (e:Event) WHERE e.at >= $lo AND e.at <= $hi RETURN e", {"lo": earliest, "hi": latest}))]

    def portable_creation_events(self, kref: str) -> list[Row]:
        """The store's ``project.created`` events of a project, oldest first."""
        return [r[0] for r in self._engine.read(lambda tx: tx.rows(
            "MATCH (e:Event) WHERE e.routing_key = 'project.created' AND e.kref = $k RETURN e ORDER BY e.seq",
            {"k": kref}))]

    def portable_project_holds_anything(self, name: str) -> bool:
        """Whether a project has a space below its root or an item (an empty one may be adopted by an import)."""
        def job(tx: Tx) -> bool:
            params = {"p": name}
            return bool(tx.scalar("MATCH (s:Space) WHERE s.project = $p AND s.parent <> '' RETURN count(s)", params)
                        or tx.scalar("MATCH (i:Item) WHERE i.project = $p RETURN count(i)", params))

        return self._engine.read(job)

    # -- the bulk write -------------------------------------------------------------------------------
    def portable_load(self, prepare: Callable[[], LoadBatch]) -> LoadBatch:
        """Write one batch in one transaction. ``prepare`` runs first, inside that transaction: the reads it
        makes through this store see the transaction's state, so what it decides to write (new, already held,
        in conflict) cannot be overtaken by another write before the load. It raises to write nothing, before
        any COPY (a rolled-back bulk load is what Kùzu handles worst). New revisions carry ``indexed = false``:
        the index sync (woken by the commit) indexes them, as it does any write. The batch's ``changes`` go to
        the audit trail as one row, with the events the batch copied."""
        def job(tx: Tx) -> LoadBatch:
            batch = prepare()
            if len(batch):
                at = self._now()
                seqs = _load(tx, batch)
                self._created(tx, [revision["id"] for revision in batch.revisions])
                self.policy.record(tx, at, [(-1, routing_key, kref) for routing_key, kref in batch.changes]
                                   + [(seq, "event.imported", kref) for seq, kref in seqs])
            return batch

        return self._engine.write(job)


def _load(tx: Tx, b: LoadBatch) -> list[tuple[int, str]]:
    """Write the batch; the (new sequence number, kref) of each event it created."""
    tx.unwind("UNWIND $rows AS row CREATE (:Project {name: row.name, project_id: row.project_id, "
              "description: row.description, created_at: row.created_at, updated_at: row.updated_at, "
              "deprecated: row.deprecated, allow_public: row.allow_public, metadata: row.metadata})", b.projects)
    tx.unwind("UNWIND $rows AS row MATCH (p:Project {name: row.name}) SET p.project_id = row.project_id, "
              "p.description = row.description, p.created_at = row.created_at, p.updated_at = row.updated_at, "
              "p.deprecated = row.deprecated, p.allow_public = row.allow_public, p.metadata = row.metadata",
              b.adopt_projects)
    tx.unwind("UNWIND $rows AS row MATCH (s:Space {path: row.path}) SET s.created_at = row.created_at, "
              "s.modified_at = row.modified_at, s.author = row.author, s.username = row.username, "
              "s.metadata = row.metadata", b.adopt_spaces)
    tx.copy("Space", "row.path AS p, row.name AS n, row.project AS pr, row.parent AS pa, row.created_at AS c, "
            "row.modified_at AS mo, row.author AS au, row.username AS un, row.metadata AS md", b.spaces)
    tx.copy("SUBSPACE", "row.parent AS f, row.path AS t", [s for s in b.spaces if s["parent"]])
    tx.copy("Item", "row.id AS id, row.project AS p, row.space AS s, row.name AS n, row.kind AS k, "
            "row.created_at AS c, row.modified_at AS mo, row.author AS au, row.username AS un, row.metadata AS md, "
            "row.deprecated AS d, row.next_number AS nx", b.items)
    tx.copy("HOLDS", "row.space AS f, row.id AS t", b.items)
    tx.copy("Revision", "row.id AS id, row.item AS it, row.number AS n, row.metadata AS md, row.created_at AS c, "
            "row.modified_at AS mo, row.author AS au, row.username AS un, row.deprecated AS d, "
            "row.default_artifact AS da, false AS ix", b.revisions)
    tx.copy("HAS_REVISION", "row.item AS f, row.id AS t", b.revisions)
    tx.copy("TAGGED", "row.item AS f, row.revision AS t, row.tag AS tg, row.since AS s, row.until AS u", b.tags)
    tx.copy("Artifact", "row.id AS id, row.revision AS r, row.name AS n, row.location AS l, row.created_at AS c, "
            "row.modified_at AS mo, row.author AS au, row.username AS un, row.metadata AS md, row.deprecated AS d",
            b.artifacts)
    tx.copy("HAS_ARTIFACT", "row.revision AS f, row.id AS t", b.artifacts)
    tx.copy("LINK", "row.source AS f, row.target AS t, row.edge_type AS et, row.metadata AS md, "
            "row.created_at AS c, row.author AS au, row.username AS un", b.links)
    tx.copy("COLLECTS", "row.bundle AS f, row.member AS t, row.added_at AS aa, row.added_by AS ab, "
            "row.added_by_username AS abu, row.added_in AS ai, row.removed_in AS ri, row.metadata AS md", b.members)
    tx.unwind("UNWIND $rows AS row MATCH (e:Event {seq: row.seq}) SET e.at = row.at, e.author = row.author, "
              "e.details = row.details", b.adopt_events)
    if not b.events:
        return []
    # in file order: each gets the next sequence number
    return [(int(seq), kref) for seq, kref in tx.rows(
        "UNWIND $rows AS row CREATE (e:Event {at: row.at, routing_key: row.routing_key, kref: row.kref, "
        "author: row.author, details: row.details}) RETURN e.seq, e.kref", {"rows": b.events})]
