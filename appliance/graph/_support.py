"""Shared pieces of the Kùzu store: ids, row → model conversion, cursors, the audit trail."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from appliance.core.kref import SCHEME, Kref, format_kref
from appliance.core.model import Artifact, Edge, Item, Project, Revision, Space
from appliance.errors import AlreadyExists, InvalidArgument
from appliance.graph.engine import KuzuEngine, Tx
from appliance.graph.write_policy import WritePolicy

Clock = Callable[[], datetime]
T = TypeVar("T")
LOCAL_USER = "local"  # a tokenless local appliance has one user (reference §1.13)
# the recent commits whose flagged revisions are remembered, and the most remembered per commit (a bulk requeue
# flags thousands: it is remembered as "many", and a stage of such a commit leaves it to the index sync's scan)
DIRTIED_KEPT = 256
DIRTIED_MAX = 1000


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def dumps(metadata: dict[str, str]) -> str:
    return json.dumps(metadata, ensure_ascii=False, sort_keys=True)


def loads(text: str | None) -> dict[str, str]:
    return json.loads(text) if text else {}


# -- ids: the kref without its scheme is the primary key of items, revisions and artifacts ------------
def item_id(kref: Kref) -> str:
    return format_kref(kref.item())[len(SCHEME):]


def revision_id(item: str, number: int) -> str:
    return f"{item}?r={number}"


def artifact_id(revision: str, name: str) -> str:
    return f"{revision}&a={name}"


def to_kref(node_id: str) -> str:
    return SCHEME + node_id


# -- rows → model ---------------------------------------------------------------------------------------
def project_from(n: dict[str, Any]) -> Project:
    return Project(
        project_id=n["project_id"], name=n["name"], description=n["description"],
        created_at=n["created_at"], updated_at=n["updated_at"], deprecated=n["deprecated"],
        allow_public=n["allow_public"], metadata=loads(n["metadata"]),
    )


def space_from(n: dict[str, Any]) -> Space:
    return Space(
        path=n["path"], name=n["name"], project=n["project"], parent_path=n["parent"],
        type="root" if n["parent"].count("/") <= 1 else "sub",
        created_at=n["created_at"], modified_at=n["modified_at"], author=n["author"],
        username=n["username"], metadata=loads(n["metadata"]),
    )


def item_from(n: dict[str, Any]) -> Item:
    return Item(
        kref=to_kref(n["id"]), project=n["project"], space_path=n["space"], item_name=n["name"],
        kind=n["kind"], created_at=n["created_at"], modified_at=n["modified_at"], author=n["author"],
        username=n["username"], metadata=loads(n["metadata"]), deprecated=n["deprecated"],
    )


def revision_from(n: dict[str, Any], tags: list[str] | None) -> Revision:
    return Revision(
        kref=to_kref(n["id"]), item_kref=to_kref(n["item"]), number=n["number"],
        tags=sorted(t for t in tags or () if t), metadata=loads(n["metadata"]), created_at=n["created_at"],
        modified_at=n["modified_at"], author=n["author"], username=n["username"],
        deprecated=n["deprecated"], default_artifact=n["default_artifact"] or None,
    )


def artifact_from(n: dict[str, Any]) -> Artifact:
    revision = n["revision"]
    return Artifact(
        kref=to_kref(n["id"]), name=n["name"], location=n["location"], revision_kref=to_kref(revision),
        item_kref=to_kref(revision.rsplit("?r=", 1)[0]), created_at=n["created_at"],
        modified_at=n["modified_at"], author=n["author"], username=n["username"],
        metadata=loads(n["metadata"]), deprecated=n["deprecated"],
    )


def edge_from(source: str, target: str, rel: dict[str, Any]) -> Edge:
    return Edge(
        source_kref=to_kref(source), target_kref=to_kref(target), edge_type=rel["edge_type"],
        metadata=loads(rel["metadata"]), created_at=rel["created_at"], author=rel["author"],
        username=rel["username"],
    )


def item_of(revision: str) -> str:
    """A revision's id starts with its item's id: ``P/s/name.kind?r=N`` → ``P/s/name.kind``."""
    return revision.rsplit("?r=", 1)[0]


# Kùzu scans a whole relationship table when a pattern filters on relationship properties
# ({tag: …, until: …}), but follows adjacency lists from a bound node quickly; so tag spans are read from
# their item and filtered here.
def archived_projects(tx: Tx) -> set[str]:
    """The names of the archived (deprecated) projects, whose items listings and the index leave out."""
    return {r[0] for r in tx.rows("MATCH (p:Project) WHERE p.deprecated RETURN p.name")}


def tag_spans(tx: Tx, item: str) -> list[tuple[str, str, str, str]]:
    """Every tag span of an item: (revision id, tag, since, until) with until '' while it holds."""
    return [(r, tag, since, until) for r, tag, since, until in tx.rows(
        "MATCH (:Item {id: $i})-[t:TAGGED]->(r:Revision) RETURN r.id, t.tag, t.since, t.until", {"i": item})]


def current_tags(tx: Tx, item: str) -> dict[str, list[str]]:
    """Revision id → the tags it holds now, for one item."""
    held: dict[str, list[str]] = {}
    for revision, tag, _, until in tag_spans(tx, item):
        if not until:
            held.setdefault(revision, []).append(tag)
    return held


def tag_holder(tx: Tx, item: str, tag: str, at: str | None = None) -> str | None:
    """The revision id of ``item`` holding ``tag`` now, or at the ISO time ``at``."""
    return holder_in(tag_spans(tx, item), tag, at)


def holder_in(spans: list[tuple[str, str, str, str]], tag: str, at: str | None = None) -> str | None:
    for revision, name, since, until in spans:
        if name == tag and (not until if at is None else since <= at and (not until or until > at)):
            return revision
    return None


def existing(tx: Tx, query: str, params: dict[str, Any], exists_error: bool, what: str, field: str,
             convert: Callable[[dict[str, Any]], T]) -> T | None:
    """The create-if-missing rule (reference §2.3): an existing entity is returned as it is, unless the
    caller asked for ``exists_error``; None when it does not exist yet."""
    row = tx.one(query, params)
    if row is None:
        return None
    if exists_error:
        raise AlreadyExists(f"{what} already exists", field=field)
    return convert(row[0])


# -- paging -----------------------------------------------------------------------------------------
def encode_cursor(value: str | int) -> str:
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None, kind: type) -> Any:
    if not cursor:
        return None
    try:
        value = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
    except ValueError:
        value = None
    if not isinstance(value, kind):
        raise InvalidArgument("cursor: not a cursor this listing returned; start again without it",
                              field="cursor")
    return value


def check_page_size(value: int) -> int:
    if not 1 <= value <= 1000:
        raise InvalidArgument("page_size: give a page size from 1 to 1000", field="page_size")
    return value


class StoreBase:
    """What every part of the store shares: the engine, the clock and the audit trail."""

    def __init__(self, engine: KuzuEngine, clock: Clock = utc_now, default_project: str = "CognitiveMemory"):
        self._engine = engine
        self._clock = clock
        self.default_project = default_project
        # ids of revisions deleted by committed writes whose search-index rows are still to be dropped
        self._removed: list[str] = []
        self._removed_lock = threading.Lock()
        # the revisions each recent commit flagged for the index (``dirtied_in``): a writer's stage learns which
        # rows besides its own its commit changed; commits at or below ``_dirtied_floor`` fell out of the window
        self._dirtied: dict[int, list[str] | None] = {}
        self._dirtied_floor = 0
        # called on the writer thread with each committed transaction's events (GraphStore.on_events)
        self._event_listeners: list[Callable[[list[dict[str, Any]]], None]] = []
        # the operator's read-only namespaces and the audit trail (write_policy.py); the appliance sets it
        self.policy = WritePolicy()
        # the search-index outbox (revisions with ``indexed = false``), kept so that its size needs no scan of
        # every revision (``OutboxStore.pending_count``): read once, then changed by each committed write that
        # creates, flags, indexes or deletes revisions (after its commit: a rolled-back write changes nothing).
        # None until read; only the writer thread changes it.
        self._unindexed: set[str] | None = None
        self._unindexed_lock = threading.Lock()

    def _now(self) -> str:
        return iso(self._clock())

    def _dirty(self, tx: Tx, revisions: list[str]) -> None:
        """Mark revisions for (re)indexing: the search index outbox (docs/search.md). ``modified_at``
        moves too, so an index sync that read the older state cannot clear the mark."""
        if revisions:
            tx.by_keys("MATCH (r:Revision {id: $id}) SET r.indexed = false, r.modified_at = $now",
                       "UNWIND $ids AS id MATCH (r:Revision {id: id}) SET r.indexed = false, r.modified_at = $now",
                       revisions, {"now": self._now()})
        self._flagged(tx, revisions)

    def _flagged(self, tx: Tx, revisions: list[str]) -> None:
        """Remember, once ``tx`` commits, that it flagged these existing revisions (``dirtied_in``): every write
        that clears ``indexed`` on a revision it did not create calls this (``_dirty`` does)."""
        if revisions:
            tx.after_commit(lambda: self._note_dirtied(revisions))
            self._outbox_change(tx, add=revisions)

    def _created(self, tx: Tx, revisions: list[str]) -> None:
        """Every write that creates revisions (they start with ``indexed = false``) calls this: the outbox's
        size (``pending_count``) counts them once ``tx`` commits."""
        self._outbox_change(tx, add=revisions)

    def _outbox_change(self, tx: Tx, add: Sequence[str] = (), drop: Sequence[str] = ()) -> None:
        """Change the kept outbox once ``tx`` commits (on the writer thread, before the commit listeners)."""
        if not add and not drop:
            return

        def change() -> None:
            with self._unindexed_lock:
                if self._unindexed is not None:
                    self._unindexed.update(add)
                    self._unindexed.difference_update(drop)

        tx.after_commit(change)

    def _note_dirtied(self, revisions: list[str]) -> None:
        """On the writer thread, after the commit (``commits`` is its number)."""
        with self._removed_lock:
            known = self._dirtied.setdefault(self._engine.commits, [])
            if known is not None:
                known.extend(revisions)
                if len(known) > DIRTIED_MAX:
                    self._dirtied[self._engine.commits] = None
            while len(self._dirtied) > DIRTIED_KEPT:
                oldest = next(iter(self._dirtied))
                del self._dirtied[oldest]
                self._dirtied_floor = max(self._dirtied_floor, oldest)

    def _removing(self, tx: Tx, revisions: list[str]) -> None:
        """Queue the index rows of revisions this transaction deletes for dropping, once it commits (the
        index sync drops them; after a crash, its repair on start does)."""
        if revisions:
            tx.after_commit(lambda: self._queue_removed(revisions))
            self._outbox_change(tx, drop=revisions)  # a deleted revision no longer waits for the index

    def _queue_removed(self, revisions: list[str]) -> None:
        with self._removed_lock:
            self._removed.extend(revisions)

    def _event(self, tx: Tx, routing_key: str, kref: str, details: dict[str, Any] | None = None) -> None:
        """Record a change in the audit trail, in the same transaction as the change itself; once the
        transaction commits, its events go to the event listeners (the live feed), in sequence order."""
        self._event_batch(tx, [(routing_key, kref, details or {})])

    def _event_batch(self, tx: Tx, events: list[tuple[str, str, dict[str, Any]]], at: str | None = None) -> None:
        """``_event`` for many changes (routing key, kref, details) in one statement: the same guard, audit
        trail and live feed, in the order given."""
        if not events:
            return
        for routing_key, kref, detail in events:
            target = detail.get("target")
            self.policy.guard(routing_key, kref, *([target] if isinstance(target, str) else []))
        at = at or self._now()
        rows = [{"n": n, "k": key, "kref": kref, "d": json.dumps(detail, ensure_ascii=False, sort_keys=True)}
                for n, (key, kref, detail) in enumerate(events)]
        seqs = dict(tx.rows("UNWIND $rows AS row CREATE (e:Event {at: $at, routing_key: row.k, kref: row.kref, "
                            "author: $a, details: row.d}) RETURN row.n, e.seq",
                            {"rows": rows, "at": at, "a": LOCAL_USER}))
        numbered = [(int(seqs[n]), key, kref, detail) for n, (key, kref, detail) in enumerate(events)]
        self.policy.record(tx, at, [(seq, key, kref) for seq, key, kref, _ in numbered])
        if not self._event_listeners:
            return
        batch = next((action for action in tx.committed if isinstance(action, _CommittedEvents)), None)
        if batch is None:
            batch = _CommittedEvents(self._event_listeners)
            tx.after_commit(batch)
        batch.extend({"seq": seq, "at": at, "routing_key": key, "kref": kref, "author": LOCAL_USER, "details": detail}
                     for seq, key, kref, detail in sorted(numbered, key=lambda e: e[0]))

    def _events(self, tx: Tx, routing_key: str, krefs: list[str], at: str | None = None) -> None:
        """Record many changes of one kind at once (bulk writes), each an event with empty details, through the
        same guard and audit trail as ``_event``. The live feed is not told (as before: bulk writes are imports)."""
        if not krefs:
            return
        self.policy.guard(routing_key, *krefs)
        at = at or self._now()
        seqs = tx.rows("UNWIND $rows AS k CREATE (e:Event {at: $now, routing_key: $rk, kref: k, author: $u, "
                       "details: '{}'}) RETURN e.seq, k", {"rows": krefs, "now": at, "rk": routing_key,
                                                          "u": LOCAL_USER})
        self.policy.record(tx, at, [(int(seq), routing_key, kref) for seq, kref in seqs])


class _CommittedEvents(list[dict[str, Any]]):
    """The events one write transaction recorded, handed to the listeners once it has committed."""

    def __init__(self, listeners: list[Callable[[list[dict[str, Any]]], None]]) -> None:
        super().__init__()
        self._listeners = listeners

    def __call__(self) -> None:
        for listener in list(self._listeners):
            listener(list(self))
