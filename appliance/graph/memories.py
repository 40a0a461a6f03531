"""Memories: an item's next revision with its artifact and tags, for one memory or many, in a few statements.

The memory writer (appliance/memory/writer.py) used the general methods one after another (ensure the space,
create the item, the revision, the artifact, set the default artifact, move each tag), ~29 statements per
memory, most of them reads of what the previous statement had just written. ``create_memories`` writes the
same graph (the same nodes, spans, outbox marks, events and audit row) reading the spaces once and the
items' current state once for the whole call:

* one read of the spaces (a missing one is made by ``ensure_space``, the first time only);
* one read of the items and the tags their revisions hold now;
* the new items with their first revision, artifact and tags: one statement for all of them (it finds its
  space by key; spaces are few);
* a revision of an existing item: one statement that ends the spans of the tags it takes over, one that
  creates it with its artifact and tags (they look the item up by key: fast at any size), and the outbox
  mark of the revisions that lost a tag the index filters on;
* the events of every memory: one statement.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from appliance.core import kref as krefs
from appliance.core import names
from appliance.errors import InvalidArgument, NotFound
from appliance.graph._support import (
    LOCAL_USER,
    StoreBase,
    artifact_id,
    dumps,
    item_id,
    revision_id,
    to_kref,
)
from appliance.graph.engine import Tx


@dataclass(frozen=True)
class NewMemory:
    """One memory to write: a new revision of ``item_kref`` (an existing item), else of the item
    ``item_name`` of ``kind`` in ``space`` (created when it does not exist yet)."""

    space: str  # a space path, "/P/a/b" (created with its parents when missing)
    item_name: str
    kind: str
    metadata: dict[str, str]
    artifact_name: str
    artifact_location: str
    tags: tuple[str, ...] = ()  # besides ``latest``, which every new revision takes
    item_kref: str = ""


@dataclass(frozen=True)
class CreatedMemory:
    space: str
    item_kref: str
    revision_kref: str
    artifact_kref: str
    item_created: bool


@dataclass
class _ItemState:
    next_number: int
    holders: dict[str, str] = field(default_factory=dict)  # tag → revision id holding it now


_NEW_ITEMS = (
    "UNWIND $rows AS row MATCH (s:Space {path: row.space}) "
    "CREATE (s)-[:HOLDS]->(i:Item {id: row.item, project: row.project, space: row.space, name: row.name, "
    "kind: row.kind, created_at: $now, modified_at: $now, author: $u, username: $u, metadata: '{}', "
    "deprecated: false, next_number: 2}) "
    "CREATE (i)-[:HAS_REVISION]->(r:Revision {id: row.id, item: row.item, number: 1, metadata: row.m, "
    "created_at: $now, modified_at: $now, author: $u, username: $u, deprecated: false, default_artifact: row.an, "
    "indexed: false}) "
    "CREATE (r)-[:HAS_ARTIFACT]->(:Artifact {id: row.aid, revision: row.id, name: row.an, location: row.loc, "
    "created_at: $now, modified_at: $now, author: $u, username: $u, metadata: '{}', deprecated: false}) "
    "WITH i, r, row UNWIND row.tags AS tag CREATE (i)-[:TAGGED {tag: tag, since: $now, until: ''}]->(r)")
_END_SPANS = ("MATCH (:Item {id: $item})-[t:TAGGED]->() WITH t WHERE t.until = '' AND t.tag IN $tags "
              "SET t.until = $now")
_NEXT_REVISION = (
    "MATCH (i:Item {id: $item}) SET i.next_number = $next, i.modified_at = $now "
    "CREATE (i)-[:HAS_REVISION]->(r:Revision {id: $id, item: $item, number: $number, metadata: $m, "
    "created_at: $now, modified_at: $now, author: $u, username: $u, deprecated: false, default_artifact: $an, "
    "indexed: false}) "
    "CREATE (r)-[:HAS_ARTIFACT]->(:Artifact {id: $aid, revision: $id, name: $an, location: $loc, "
    "created_at: $now, modified_at: $now, author: $u, username: $u, metadata: '{}', deprecated: false}) "
    "WITH i, r UNWIND $tags AS tag CREATE (i)-[:TAGGED {tag: tag, since: $now, until: ''}]->(r)")


class MemoryStore(StoreBase):
    def create_memories(self, memories: list[NewMemory]) -> list[CreatedMemory]:
        """Write every memory in one transaction (the caller's, inside ``GraphStore.atomic``): all or none.
        Everything that could refuse a memory is checked before the first write."""
        planned = [_checked(memory, f"memories[{n}]." if len(memories) > 1 else "")
                   for n, memory in enumerate(memories)]
        return self._engine.write(lambda tx: self._create_memories(tx, planned)) if planned else []

    def _create_memories(self, tx: Tx, planned: list[tuple[NewMemory, str, tuple[str, ...]]]
                         ) -> list[CreatedMemory]:
        spaces = sorted({space for _, _, segments in planned for space in [krefs.space_path(segments)]})
        present = {r[0] for r in tx.rows("MATCH (s:Space) WHERE s.path IN $p RETURN s.path", {"p": spaces})}
        for space in spaces:
            if space not in present:
                self.ensure_space(space)  # type: ignore[attr-defined]  # StructureStore, in GraphStore
        items = sorted({node for _, node, _ in planned})
        state: dict[str, _ItemState] = {}
        for node, number, tag, holder in tx.by_keys(
                "MATCH (i:Item {id: $id}) OPTIONAL MATCH (i)-[t:TAGGED]->(r:Revision) WHERE t.until = '' "
                "RETURN i.id, i.next_number, t.tag, r.id",
                "MATCH (i:Item) WHERE i.id IN $ids OPTIONAL MATCH (i)-[t:TAGGED]->(r:Revision) WHERE t.until = '' "
                "RETURN i.id, i.next_number, t.tag, r.id", items):
            held = state.setdefault(node, _ItemState(int(number)))
            if tag is not None:
                held.holders[tag] = holder
        now = self._now()
        events: list[tuple[str, str, dict[str, Any]]] = []
        created: list[CreatedMemory] = []
        new_rows: list[dict[str, Any]] = []
        later: list[tuple[dict[str, Any], list[str]]] = []  # revisions of items that exist: (params, dirtied)
        for memory, node, segments in planned:
            tags = ["latest", *memory.tags]
            item_new = node not in state
            if item_new and memory.item_kref:
                raise NotFound(f"item {memory.item_kref} does not exist", field="item_kref")
            current = state.setdefault(node, _ItemState(1))
            number = current.next_number
            revision = revision_id(node, number)
            row: dict[str, Any] = {"item": node, "project": segments[0], "space": krefs.space_path(segments),
                   "name": memory.item_name, "kind": memory.kind, "id": revision, "number": number,
                   "next": number + 1, "m": dumps(memory.metadata), "an": memory.artifact_name,
                   "aid": artifact_id(revision, memory.artifact_name), "loc": memory.artifact_location,
                   "tags": tags}
            moved = {tag: current.holders.get(tag) for tag in memory.tags}
            if item_new:
                new_rows.append(row)
                events.append(("item.created", to_kref(node), {}))
            else:
                later.append((row, sorted({h for h in moved.values() if h})))
            events += [("revision.created", to_kref(revision), {}),
                       ("artifact.created", to_kref(row["aid"]), {}),
                       ("revision.default_artifact", to_kref(revision), {"name": memory.artifact_name})]
            events += [("revision.tagged", to_kref(revision),
                        {"tag": tag, "moved_from": holder or None})  # an id, as _move_tag says it
                       for tag, holder in moved.items()]
            current.next_number = number + 1
            current.holders.update({tag: revision for tag in tags})
            created.append(CreatedMemory(row["space"], to_kref(node), to_kref(revision), to_kref(row["aid"]),
                                         item_new))
        # the guard refuses a read-only namespace's memories before anything is written
        for routing_key, kref, _ in events:
            self.policy.guard(routing_key, kref)
        params = {"now": now, "u": LOCAL_USER}
        tx.unwind(_NEW_ITEMS, new_rows, params)
        self._created(tx, [row["id"] for row in new_rows] + [row["id"] for row, _ in later])
        for row, dirtied in later:
            tx.run(_END_SPANS, {**params, "item": row["item"], "tags": row["tags"]})
            tx.run(_NEXT_REVISION, {**params, **row})
            self._dirty(tx, dirtied)  # the tags they lost are filterable in the index
        self._event_batch(tx, events, now)
        return created


def _checked(memory: NewMemory, where: str) -> tuple[NewMemory, str, tuple[str, ...]]:
    """The memory as the graph will hold it (its item's id and space segments), after every check the general
    methods make (names, kind, metadata, tags, artifact)."""
    if memory.item_kref:
        parsed = krefs.parse(memory.item_kref, f"{where}item_kref")
        if not parsed.is_item:
            raise InvalidArgument(f"{where}item_kref: name an item (name.kind)", field=f"{where}item_kref")
        segments = krefs.parse_space_path(parsed.space_path, f"{where}space_path")
        memory = NewMemory(krefs.space_path(segments), parsed.item_name, parsed.kind or "", memory.metadata,
                           memory.artifact_name, memory.artifact_location, memory.tags, memory.item_kref)
    else:
        segments = krefs.parse_space_path(memory.space, f"{where}space_path")
        names.item_name(memory.item_name)
        names.kind(memory.kind, f"{where}memory_item_kind")
        if memory.kind.lower() == names.RESERVED_KIND:
            raise InvalidArgument(f"{where}memory_item_kind: 'bundle' is reserved for bundles",
                                  field=f"{where}memory_item_kind")
        parsed = krefs.item_kref(segments[0], segments[1:], memory.item_name, memory.kind)
    names.metadata(memory.metadata, f"{where}metadata")
    names.artifact_name(memory.artifact_name, f"{where}artifact_name")
    for tag in memory.tags:
        names.user_tag(tag, f"{where}tags")
    if names.LATEST in memory.tags or len(set(memory.tags)) < len(memory.tags):
        raise InvalidArgument(f"{where}tags: 'latest' moves by itself and a tag is given once",
                              field=f"{where}tags")
    if not memory.artifact_location.strip():
        raise InvalidArgument(f"{where}artifact_location: give a file path or URI", field=f"{where}artifact_location")
    return memory, item_id(parsed), segments
