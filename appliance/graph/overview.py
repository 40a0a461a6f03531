"""Reads for the operator's console: counts grouped in the database, the memory graph's items and edges in a
few reads, and the items behind search hits in one read.

Every query text here is constant (filters are parameters that may be empty), so each is compiled once per
connection (engine.Connection) however often the console asks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from appliance.core.model import Item, Revision
from appliance.errors import InvalidArgument
from appliance.graph._support import StoreBase, item_from, item_of, loads, revision_from, to_kref
from appliance.graph.engine import Tx

MAX_IDS = 10_000  # ids one batched read takes (the graph view's largest sample)

# A revision's memory type is its metadata's memory_type, else its type (memory.records.memory_type). Kùzu has
# no JSON functions here, so the value is cut out of the stored JSON text (keys sorted, ``"key": "value"``;
# inside a value every quote is escaped, so ``"key": "`` only ever starts a key). A value holding an escaped
# quote is cut at it: memory types are single words. split_part, not a regular expression: 5x faster at 10k
# revisions, and Kùzu 0.11's regexp_extract leaves the previous row's value where a row does not match.
_CUT = ("CASE WHEN contains(r.metadata, '\"{key}\": \"') "
        "THEN split_part(split_part(r.metadata, '\"{key}\": \"', 2), '\"', 1) ELSE '' END")
_MEMORY_TYPE = (f"WITH i, {_CUT.format(key='memory_type')} AS mt, {_CUT.format(key='type')} AS t "
                "RETURN i.project, i.space, i.kind, lower(CASE WHEN mt <> '' THEN mt ELSE t END)")


@dataclass(frozen=True, slots=True)
class ItemCount:
    """Items of one (project, space, kind, memory type) group; ``deprecated`` of them are hidden."""

    project: str
    space: str
    kind: str
    memory_type: str  # "" when the latest revision names none (or the item has no revision)
    items: int
    deprecated: int


@dataclass(frozen=True, slots=True)
class IndexLag:
    pending: int  # revisions waiting for the search index
    oldest_pending_at: str | None  # modified_at of the oldest of them (ISO), None when none wait


@dataclass(frozen=True, slots=True)
class GraphItem:
    """What the memory graph shows of one item: the item and its current revision (published, else latest)."""

    item_kref: str
    name: str  # the item name, without its kind
    kind: str
    space: str  # "/P/a"
    created_at: str
    revision_kref: str | None  # None while the item has no revision
    metadata: dict[str, str]  # the current revision's


@dataclass(frozen=True, slots=True)
class GraphItems:
    """The items a memory-graph query matches, newest first (ties by id), cut at the asked limit."""

    items: list[GraphItem]
    total: int  # how many matched before the cut
    kinds: dict[str, int]  # kind → items matched (before the cut)


@dataclass(frozen=True, slots=True)
class Link:
    """A typed edge between two items' revisions, named by the items."""

    source_item: str  # item krefs
    target_item: str
    edge_type: str
    metadata: dict[str, str]


class OverviewStore(StoreBase):
    def item_counts(self) -> list[ItemCount]:
        """Items grouped by project, space, kind and the memory type of their latest revision, counted in the
        database (the rows are groups, not items)."""
        def job(tx: Tx) -> list[ItemCount]:
            typed = tx.rows(
                "MATCH (i:Item)-[l:TAGGED]->(r:Revision) WHERE l.tag = 'latest' AND l.until = '' "
                f"{_MEMORY_TYPE}, i.deprecated, count(*)")
            every = tx.rows("MATCH (i:Item) RETURN i.project, i.space, i.kind, i.deprecated, count(*)")
            return _merge(typed, every)

        return self._engine.read(job)

    def revision_counts(self) -> dict[str, int]:
        """Project → revisions of its items."""
        rows = self._engine.read(lambda tx: tx.rows(
            "MATCH (i:Item)-[:HAS_REVISION]->(r:Revision) RETURN i.project, count(r)"))
        return {project: int(count) for project, count in rows}

    def index_lag(self) -> IndexLag:
        row = self._engine.read(lambda tx: tx.one(
            "MATCH (r:Revision) WHERE NOT r.indexed RETURN count(r), min(r.modified_at)"))
        pending = int(row[0]) if row else 0
        return IndexLag(pending, row[1] if row and pending else None)

    def tag_counts(self, project: str = "") -> dict[str, int]:
        """Tag → revisions holding it now, over one project ('' = every project); ``latest`` included."""
        rows = self._engine.read(lambda tx: tx.rows(
            "MATCH (i:Item)-[t:TAGGED]->(:Revision) WHERE t.until = '' AND ($p = '' OR i.project = $p) "
            "RETURN t.tag, count(*)", {"p": project}))
        return {tag: int(count) for tag, count in rows}

    def graph_items(self, project: str, space: str = "", kinds: list[str] | None = None,
                    memory_types: list[str] | None = None, name_contains: str = "", since: str = "",
                    until: str = "", limit: int = 2000, by_name: bool = False) -> GraphItems:
        """Live items (not deprecated, no bundles) of ``project``: in ``space`` (a path without the leading
        "/", e.g. ``P/a``: that space and the ones below it), of ``kinds``, whose latest revision has one of
        ``memory_types``, whose name contains ``name_contains`` (any case), created in [since, until) (ISO
        text, compared as stored), each when given. Newest first (by name with ``by_name``), cut at ``limit``;
        the count and the per-kind counts are of every match."""
        if not 1 <= limit <= MAX_IDS:
            raise InvalidArgument(f"limit: give 1 to {MAX_IDS}", field="limit")
        params = {"p": project, "s": "/" + space if space else "", "sp": "/" + space + "/", "any_kind": not kinds,
                  "kinds": kinds or [""], "types": [t.lower() for t in memory_types or ()],
                  "q": name_contains.lower(), "since": since, "until": until}
        match = ("MATCH (i:Item) WHERE i.project = $p AND NOT i.deprecated AND i.kind <> 'bundle' "
                 "AND ($s = '' OR i.space = $s OR starts_with(i.space, $sp)) "
                 "AND ($any_kind OR list_contains($kinds, i.kind)) AND ($q = '' OR contains(lower(i.name), $q)) "
                 "AND ($since = '' OR i.created_at >= $since) AND ($until = '' OR i.created_at < $until) ")
        if memory_types:  # the type lives in the latest revision's metadata: follow the item's tag to it
            match += ("MATCH (i)-[l:TAGGED]->(r:Revision) WHERE l.tag = 'latest' AND l.until = '' "
                      f"WITH i, {_CUT.format(key='memory_type')} AS mt, {_CUT.format(key='type')} AS t "
                      "WITH i, lower(CASE WHEN mt <> '' THEN mt ELSE t END) AS mtype "
                      "WHERE list_contains($types, mtype) ")
        else:
            params.pop("types")
        order = "i.name, i.id" if by_name else "i.created_at DESC, i.id"
        # the cut first, then each shown item's current revision: only the columns the view shows are read
        # (a whole node costs Kùzu's driver far more to hand over than a few strings)
        shown = (f"WITH i ORDER BY {order} LIMIT $n "
                 "OPTIONAL MATCH (i)-[t:TAGGED]->(r:Revision) WHERE t.until = '' AND t.tag IN ['published', 'latest'] "
                 "RETURN i.id, i.name, i.kind, i.space, i.created_at, t.tag, r.id, r.metadata")

        def job(tx: Tx) -> GraphItems:
            kinds_found = {kind: int(n) for kind, n in tx.rows(match + "RETURN i.kind, count(*)", params)}
            rows = tx.rows(match + shown, {**params, "n": limit})
            return GraphItems(_current(rows, by_name), sum(kinds_found.values()), kinds_found)

        return self._engine.read(job)

    def links_between(self, revision_krefs: list[str], item_krefs: list[str]) -> list[Link]:
        """Edges leaving the given exact revisions (``…?r=N``) for any revision of the given items, oldest
        first, in one read."""
        ids = _ids(revision_krefs)
        items = {k[len("kref://"):] for k in item_krefs if k.startswith("kref://")}
        if not ids or not items:
            return []
        # key lookups from each source; the targets are filtered here: `IN $list` tests a list row by row
        # (at 10k sources and 20k edges: ~3 s against ~0.3 s)
        rows = self._engine.read(lambda tx: tx.rows(
            "UNWIND $ids AS id MATCH (a:Revision {id: id})-[e:LINK]->(b:Revision) "
            "RETURN e.created_at, a.item, b.item, e.edge_type, e.metadata", {"ids": ids}))
        rows = sorted(r for r in rows if r[2] in items)
        return [Link(to_kref(a), to_kref(b), edge_type, loads(meta) if meta != "{}" else {})
                for _, a, b, edge_type, meta in rows]

    def revisions_with_items(self, revision_krefs: list[str]) -> dict[str, tuple[Revision, Item]]:
        """Exact revision kref → (the revision with its current tags, its item), in one read; revisions that
        do not exist are left out (search hits may name a revision deleted since)."""
        ids = _ids(revision_krefs)
        if not ids:
            return {}

        def job(tx: Tx) -> dict[str, tuple[Revision, Item]]:
            tags: dict[str, list[str]] = {}
            for revision, tag in tx.rows("MATCH (:Item)-[t:TAGGED]->(r:Revision) WHERE r.id IN $ids "
                                         "AND t.until = '' RETURN r.id, t.tag", {"ids": ids}):
                tags.setdefault(revision, []).append(tag)
            rows = tx.rows("MATCH (i:Item)-[:HAS_REVISION]->(r:Revision) WHERE r.id IN $ids RETURN i, r",
                           {"ids": ids})
            return {to_kref(r["id"]): (revision_from(r, tags.get(r["id"])), item_from(i)) for i, r in rows}

        return self._engine.read(job)


def _current(rows: list[list[Any]], by_name: bool) -> list[GraphItem]:
    """One GraphItem per item from rows of (item columns, tag, revision id, metadata): published wins."""
    found: dict[str, GraphItem] = {}
    for node, name, kind, space, created_at, tag, revision, metadata in rows:
        if node in found and (tag != "published" or revision is None):
            continue
        found[node] = GraphItem(to_kref(node), name, kind, space, created_at,
                                to_kref(revision) if revision else None, loads(metadata))
    items = sorted(found.values(), key=lambda i: (i.name, i.item_kref) if by_name else i.item_kref)
    if not by_name:  # newest first; equal times keep the kref order (the sort is stable)
        items.sort(key=lambda i: i.created_at, reverse=True)
    return items


def _ids(revision_krefs: list[str]) -> list[str]:
    if len(revision_krefs) > MAX_IDS:
        raise InvalidArgument(f"revision_krefs: at most {MAX_IDS} per read", field="revision_krefs")
    ids = sorted({k[len("kref://"):] for k in revision_krefs if k.startswith("kref://") and "?r=" in k})
    return [i for i in ids if item_of(i) != i]


def _merge(typed: list[list[Any]], every: list[list[Any]]) -> list[ItemCount]:
    """Groups by memory type, plus the items without a latest revision (memory type "")."""
    counts: dict[tuple[str, str, str, str], list[int]] = {}
    typed_items: dict[tuple[str, str, str, bool], int] = {}

    def add(key: tuple[str, str, str, str], deprecated: bool, n: int) -> None:
        entry = counts.setdefault(key, [0, 0])
        entry[0] += n
        entry[1] += n if deprecated else 0

    for project, space, kind, memory_type, deprecated, n in typed:
        add((project, space, kind, memory_type or ""), deprecated, int(n))
        group = (project, space, kind, bool(deprecated))
        typed_items[group] = typed_items.get(group, 0) + int(n)
    for project, space, kind, deprecated, n in every:
        untyped = int(n) - typed_items.get((project, space, kind, bool(deprecated)), 0)
        if untyped > 0:
            add((project, space, kind, ""), deprecated, untyped)
    return [ItemCount(p, s, k, m, n, d) for (p, s, k, m), (n, d) in sorted(counts.items())]
