"""Revisions and tags: auto-numbering, ``latest`` and ``published`` (D4), tag history, bulk creation."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from appliance.core import kref as krefs
from appliance.core import names
from appliance.core.model import Page, Revision
from appliance.errors import Conflict, InvalidArgument, InvalidKref, KumihoError, NotFound
from appliance.graph._support import (
    LOCAL_USER,
    StoreBase,
    artifact_id,
    check_page_size,
    current_tags,
    decode_cursor,
    dumps,
    encode_cursor,
    item_id,
    item_of,
    loads,
    revision_from,
    revision_id,
    tag_holder,
    tag_spans,
    to_kref,
)
from appliance.graph.engine import Tx
from appliance.graph.resolve import (
    item_node,
    locate_item,
    locate_item_node,
    locate_revision,
    selected_revision,
)

# current_revisions of up to this many items reads each by key (~1 ms each, flat in the graph's size); more, one
# scan of the tag edges (~0.1 s at 100k memories on a quiet machine, less on a small graph)
CURRENT_BY_KEY_UP_TO = 16


@dataclass(frozen=True)
class NewArtifact:
    name: str
    location: str
    metadata: dict[str, str] = field(default_factory=dict)
    is_default: bool = False


@dataclass(frozen=True)
class NewRevision:
    """One row of a bulk write: a revision of ``item_kref`` (created when missing; its space must exist)."""

    item_kref: str
    metadata: dict[str, str] = field(default_factory=dict)
    artifacts: tuple[NewArtifact, ...] = ()


@dataclass(frozen=True)
class BulkResult:
    revisions: list[Revision | None]  # positional: None where the row failed
    failures: dict[int, str]


class RevisionStore(StoreBase):
    def create_revision(self, item_kref: str, metadata: dict[str, str] | None = None) -> Revision:
        parsed = krefs.parse(item_kref, "item_kref")
        meta = names.metadata(metadata)
        return self._engine.write(lambda tx: self._create_revision_node(
            tx, locate_item_node(tx, parsed, self.default_project), meta))

    def _create_revision_node(self, tx: Tx, item: dict[str, Any], meta: dict[str, str]) -> Revision:
        """The next revision of ``item``; ``latest`` moves to it (three statements: latency matters)."""
        number, now = item["next_number"], self._now()
        node_id = revision_id(item["id"], number)
        params = {"item": item["id"], "next": number + 1, "now": now, "id": node_id, "number": number,
                  "m": dumps(meta), "u": LOCAL_USER}
        tx.run("MATCH (:Item {id: $item})-[t:TAGGED]->() WITH t WHERE t.tag = 'latest' AND t.until = '' "
               "SET t.until = $now", params)
        node = {"id": node_id, "item": item["id"], "number": number, "metadata": params["m"], "created_at": now,
                "modified_at": now, "author": LOCAL_USER, "username": LOCAL_USER, "deprecated": False,
                "default_artifact": ""}
        tx.run("MATCH (i:Item {id: $item}) SET i.next_number = $next, i.modified_at = $now "
               "CREATE (i)-[:HAS_REVISION]->(r:Revision {id: $id, item: $item, number: $number, metadata: $m, "
               "created_at: $now, modified_at: $now, author: $u, username: $u, deprecated: false, "
               "default_artifact: '', indexed: false}) "
               "CREATE (i)-[:TAGGED {tag: 'latest', since: $now, until: ''}]->(r)", params)
        self._created(tx, [node_id])
        self._event(tx, "revision.created", to_kref(node_id))
        return revision_from(node, [names.LATEST])

    def peek_next_revision(self, item_kref: str) -> int:
        parsed = krefs.parse(item_kref, "item_kref")
        return int(self._engine.read(
            lambda tx: locate_item_node(tx, parsed, self.default_project)["next_number"]))

    def get_revision(self, kref: str) -> Revision:
        """``?r=N`` → that revision; an item kref → latest; ``?t=tag`` (``&time=``) → the tag's holder."""
        parsed = krefs.parse(kref)
        return self._engine.read(lambda tx: self._find_revision(tx, parsed))

    def _find_revision(self, tx: Tx, parsed: krefs.Kref) -> Revision:
        """``locate_revision`` + ``_read_revision`` reading the item's tag spans once (the hot read path)."""
        item = locate_item(tx, parsed, self.default_project)
        spans = tag_spans(tx, item)
        node_id = (revision_id(item, parsed.revision) if parsed.revision is not None
                   else selected_revision(item, parsed, spans))
        row = tx.one("MATCH (r:Revision {id: $id}) RETURN r", {"id": node_id})
        if row is None:
            raise NotFound(f"revision {to_kref(node_id)} does not exist", field="kref")
        return revision_from(row[0], [t for r, t, _, until in spans if r == node_id and not until])

    def current_revisions(self, item_krefs: list[str]) -> dict[str, Revision]:
        """Item kref → its published revision, else its latest (what a recall shows), in one read.
        Items that do not exist are left out."""
        ids = sorted({item_id(krefs.parse(k, "item_krefs")) for k in item_krefs})
        if not ids:
            return {}

        def job(tx: Tx) -> dict[str, Revision]:
            held: dict[str, dict[str, Any]] = {}  # item → {revision id: (node, [tags])}
            # a few items (a store's stacking reads one): key lookups, flat in the graph's size; more, one scan
            # of the tag edges beats many lookups (measured)
            for item, tag, node in tx.by_keys(
                    "MATCH (i:Item {id: $id})-[t:TAGGED]->(r:Revision) WHERE t.until = '' RETURN i.id, t.tag, r",
                    "MATCH (i:Item)-[t:TAGGED]->(r:Revision) WHERE i.id IN $ids AND t.until = '' "
                    "RETURN i.id, t.tag, r", ids, up_to=CURRENT_BY_KEY_UP_TO):
                entry = held.setdefault(item, {}).setdefault(node["id"], (node, []))
                entry[1].append(tag)
            chosen = {}
            for item, revisions in held.items():
                pick = (next((r for r in revisions.values() if names.PUBLISHED in r[1]), None)
                        or next((r for r in revisions.values() if names.LATEST in r[1]), None))
                if pick is not None:
                    chosen[to_kref(item)] = revision_from(pick[0], pick[1])
            return chosen

        return self._engine.read(job)

    def revisions_by_kref(self, tagged: dict[str, tuple[str, ...]]) -> dict[str, Revision]:
        """Revision kref → its revision carrying the tags the caller gives (a caller that knows them: recall
        takes them from the search index), in one read; revisions that do not exist are left out.
        One primary-key lookup per revision with one statement text (compiled once per connection): Kùzu 0.11
        uses the key index for ``{id: $id}`` but not for ``IN`` lists or ``UNWIND`` (measured at 100k items:
        ~0.2 ms per lookup, against a scan of TAGGED edges for ``current_revisions``)."""
        prefix = len(krefs.SCHEME)
        wanted = {k: k[prefix:] for k in tagged if k.startswith(krefs.SCHEME)}

        def job(tx: Tx) -> dict[str, Revision]:
            found = {}
            for kref, node_id in wanted.items():
                row = tx.one("MATCH (r:Revision {id: $id}) RETURN r", {"id": node_id})
                if row is not None:
                    found[kref] = revision_from(row[0], list(tagged[kref]))
            return found

        return self._engine.read(job) if wanted else {}

    def revisions_with_metadata(self, project: str, key: str, values: list[str]) -> dict[str, Revision]:
        """Value → the project's revision whose metadata ``key`` holds it (the first found), with its current
        tags, in one read.
        It scans the project's revisions (tens of milliseconds per 10,000): for rare lookups such as a
        retried reflect's idempotency keys, not for a hot path."""
        wanted = set(values)
        if not wanted:
            return {}
        # every value's JSON text contains their common prefix: one filter the database applies, then exact
        texts = [json.dumps(v, ensure_ascii=False)[1:-1] for v in sorted(wanted)]
        needle = texts[0]
        for text in texts[1:]:
            while not text.startswith(needle):
                needle = needle[:-1]
        prefix = names.project_name(project, "project") + "/"

        def job(tx: Tx) -> dict[str, Revision]:
            nodes: dict[str, dict[str, Any]] = {}
            for (node,) in tx.rows("MATCH (r:Revision) WHERE r.item STARTS WITH $p AND r.metadata CONTAINS $n "
                                   "RETURN r", {"p": prefix, "n": needle}):
                value = loads(node["metadata"]).get(key)
                if value in wanted and value not in nodes:
                    nodes[value] = node
            held: dict[str, list[str]] = {}  # their current tags, in one more query
            ids = [node["id"] for node in nodes.values()]
            for revision, tag in tx.rows("MATCH (:Item)-[t:TAGGED]->(r:Revision) WHERE r.id IN $ids AND "
                                         "t.until = '' RETURN r.id, t.tag", {"ids": ids}) if ids else []:
                held.setdefault(revision, []).append(tag)
            return {value: revision_from(node, held.get(node["id"], [])) for value, node in nodes.items()}

        return self._engine.read(job)

    def _read_revision(self, tx: Tx, node_id: str) -> Revision:
        row = tx.one("MATCH (r:Revision {id: $id}) RETURN r", {"id": node_id})
        if row is None:
            raise NotFound(f"revision {to_kref(node_id)} does not exist", field="kref")
        return revision_from(row[0], current_tags(tx, item_of(node_id)).get(node_id))

    def list_revisions(
        self, item_kref: str, include_deprecated: bool = True, page_size: int = 100,
        cursor: str | None = None,
    ) -> Page[Revision]:
        """An item's revisions, newest first (as the reference server orders them)."""
        parsed = krefs.parse(item_kref, "item_kref")
        check_page_size(page_size)
        before = decode_cursor(cursor, int) or krefs.MAX_REVISION + 1

        def job(tx: Tx) -> Page[Revision]:
            item = locate_item(tx, parsed, self.default_project)
            params = {"i": item, "incl": include_deprecated, "before": before, "n": page_size + 1}
            match = "MATCH (:Item {id: $i})-[:HAS_REVISION]->(r:Revision) WHERE ($incl OR NOT r.deprecated)"
            total = tx.scalar(match + " RETURN count(r)", params)
            rows = tx.rows(match + " AND r.number < $before RETURN r ORDER BY r.number DESC LIMIT $n", params)
            tags = current_tags(tx, item)
            found = [revision_from(r[0], tags.get(r[0]["id"])) for r in rows]
            more = len(found) > page_size
            found = found[:page_size]
            return Page(found, encode_cursor(found[-1].number) if more else None, int(total))

        return self._engine.read(job)

    def update_revision_metadata(self, kref: str, metadata: dict[str, str]) -> Revision:
        """Merge keys into a revision's metadata; the previous values are kept in the audit trail."""
        parsed = krefs.parse(kref)
        meta = names.metadata(metadata)

        def job(tx: Tx) -> Revision:
            node_id = locate_revision(tx, parsed, self.default_project)
            current = loads(tx.scalar("MATCH (r:Revision {id: $id}) RETURN r.metadata", {"id": node_id}))
            tx.run("MATCH (r:Revision {id: $id}) SET r.metadata = $m, r.modified_at = $now, r.indexed = false",
                   {"id": node_id, "m": dumps({**current, **meta}), "now": self._now()})
            self._flagged(tx, [node_id])
            self._event(tx, "revision.updated", to_kref(node_id),
                        {"set": meta, "previous": {k: current[k] for k in meta if k in current}})
            return self._read_revision(tx, node_id)

        return self._engine.write(job)

    def delete_revision(self, kref: str, force: bool = False) -> Revision:
        """Delete a revision with its artifacts, edges and tag history; ``latest`` falls back to the newest
        left. Without ``force`` a revision that holds ``published`` or that other revisions link to (their
        provenance) is kept: ``Conflict`` says what holds it. A bundle's revisions record its membership
        changes and are never deleted. Returns the revision as it was."""
        parsed = krefs.parse(kref)

        def job(tx: Tx) -> Revision:
            node_id = locate_revision(tx, parsed, self.default_project)
            item = item_of(node_id)
            revision = self._read_revision(tx, node_id)
            if item_node(tx, item)["kind"] == names.RESERVED_KIND:
                raise Conflict(f"{revision.kref} records a change of its bundle's members and cannot be deleted; "
                               "remove the member instead", field="kref")
            linked = int(tx.scalar("MATCH (:Revision)-[l:LINK]->(:Revision {id: $id}) RETURN count(l)",
                                   {"id": node_id}))
            if not force and (revision.published or linked):
                held = (["it holds 'published' (tag another revision published first)"] if revision.published
                        else []) + ([f"{linked} edge(s) from other revisions point to it"] if linked else [])
                raise Conflict(f"{revision.kref} was kept: {' and '.join(held)}; pass force=true to delete it "
                               "anyway", field="force")
            artifacts = [r[0] for r in tx.rows("MATCH (:Revision {id: $id})-[:HAS_ARTIFACT]->(a) RETURN a.name "
                                               "ORDER BY a.name", {"id": node_id})]
            tx.run("MATCH (:Revision {id: $id})-[:HAS_ARTIFACT]->(a) DETACH DELETE a", {"id": node_id})
            tx.run("MATCH (r:Revision {id: $id}) DETACH DELETE r", {"id": node_id})
            self._removing(tx, [node_id])
            newest = tx.scalar("MATCH (:Item {id: $i})-[:HAS_REVISION]->(r) RETURN max(r.number)", {"i": item})
            if newest is not None and tag_holder(tx, item, names.LATEST) is None:
                self._move_tag(tx, item, revision_id(item, newest), names.LATEST)
            self._event(tx, "revision.deleted", revision.kref,
                        {"force": force, "tags": revision.tags, "artifacts": artifacts, "incoming_edges": linked})
            return revision

        return self._engine.write(job)

    # -- tags -----------------------------------------------------------------------------------------
    def tag_revision(self, kref: str, tag: str) -> Revision:
        """Apply a tag; it moves from whichever revision of the item held it (``published`` too: D4)."""
        parsed = krefs.parse(kref)
        names.user_tag(tag)

        def job(tx: Tx) -> Revision:
            node_id = locate_revision(tx, parsed, self.default_project)
            self._move_tag(tx, item_of(node_id), node_id, tag)
            return self._read_revision(tx, node_id)

        return self._engine.write(job)

    def untag_revision(self, kref: str, tag: str) -> bool:
        """Remove a tag; False when the revision did not hold it."""
        parsed = krefs.parse(kref)
        names.user_tag(tag)

        def job(tx: Tx) -> bool:
            node_id = locate_revision(tx, parsed, self.default_project)
            if tag_holder(tx, item_of(node_id), tag) != node_id:
                return False
            self._close_span(tx, item_of(node_id), tag)
            self._dirty(tx, [node_id])
            self._event(tx, "revision.untagged", to_kref(node_id), {"tag": tag})
            return True

        return self._engine.write(job)

    def _move_tag(self, tx: Tx, item: str, node_id: str, tag: str) -> bool:
        holder = tag_holder(tx, item, tag)
        if holder == node_id:
            return False
        now = self._now()
        if holder:
            self._close_span(tx, item, tag, now)
        tx.run("MATCH (i:Item {id: $i})-[:HAS_REVISION]->(r:Revision {id: $r}) "
               "CREATE (i)-[:TAGGED {tag: $t, since: $now, until: ''}]->(r)",
               {"i": item, "r": node_id, "t": tag, "now": now})
        self._dirty(tx, [node_id, holder] if holder else [node_id])  # tags are filterable in the index
        if tag != names.LATEST:
            self._event(tx, "revision.tagged", to_kref(node_id), {"tag": tag, "moved_from": holder or None})
        return True

    def _close_span(self, tx: Tx, item: str, tag: str, now: str | None = None) -> None:
        tx.run("MATCH (:Item {id: $i})-[t:TAGGED]->() WITH t WHERE t.tag = $t AND t.until = '' "
               "SET t.until = $now", {"i": item, "t": tag, "now": now or self._now()})

    def has_tag(self, kref: str, tag: str) -> bool:
        return tag in self.get_revision(kref).tags

    def was_tagged(self, kref: str, tag: str) -> bool:
        """Whether the revision ever held the tag (now or in its history)."""
        parsed = krefs.parse(kref)

        def job(tx: Tx) -> bool:
            node_id = locate_revision(tx, parsed, self.default_project)
            return any(r == node_id and t == tag for r, t, _, _ in tag_spans(tx, item_of(node_id)))

        return self._engine.read(job)

    def revision_by_tag(self, item_kref: str, tag: str = names.PUBLISHED, time: str | None = None) -> Revision:
        """The revision of an item that holds ``tag`` now, or held it at ``time`` (``YYYYMMDDHHMM`` or ISO)."""
        parsed = krefs.parse(item_kref, "item_kref").item()
        names.tag(tag)
        moment = krefs.parse_time(time) if time else None
        selector = krefs.Kref(parsed.path, parsed.kind, tag=tag, time=moment)  # not via text: a tag may hold '&'
        return self._engine.read(lambda tx: self._find_revision(tx, selector))

    def batch_revisions(self, revision_krefs: list[str], item_krefs: list[str], tag: str = names.LATEST
                        ) -> tuple[list[Revision], list[tuple[str, str]]]:
        """Revisions by kref, and the revision holding ``tag`` of each item, in one read and in the order
        asked. Returns what was found and, for what was not, (the field naming it, the kref)."""
        names.tag(tag)
        wanted: list[tuple[str, str, krefs.Kref]] = []
        for argument, texts in (("revision_krefs", revision_krefs), ("item_krefs", item_krefs)):
            for index, text in enumerate(texts):
                parsed = krefs.parse(text, f"{argument}[{index}]")
                if argument == "item_krefs":
                    parsed = krefs.Kref(parsed.path, parsed.kind, tag=tag)
                wanted.append((f"{argument}[{index}]", text, parsed))

        def job(tx: Tx) -> tuple[list[Revision], list[tuple[str, str]]]:
            holders = _tag_holders(tx, [item_id(p) for w, _, p in wanted if w.startswith("item_krefs")], tag)
            found, missing = [], []
            for where, text, parsed in wanted:
                held = holders.get(item_id(parsed)) if where.startswith("item_krefs") else None
                if held is not None:  # the item as named holds the tag now: no per-kref lookup
                    found.append(held)
                    continue
                try:  # a revision kref, a short kref, a miss: resolved (and named in errors) one by one
                    found.append(self._find_revision(tx, parsed))
                except NotFound:
                    missing.append((where, text))
                except KumihoError as exc:  # a kref naming a space, an ambiguous short kref: name the entry
                    exc.field = where
                    raise
            return found, missing

        return self._engine.read(job)

    def tag_history(self, item_kref: str, tag: str | None = None) -> list[dict[str, Any]]:
        parsed = krefs.parse(item_kref, "item_kref")

        def job(tx: Tx) -> list[dict[str, Any]]:
            item = locate_item(tx, parsed, self.default_project)
            spans = sorted(tag_spans(tx, item), key=lambda s: (s[2], int(s[0].rsplit("?r=", 1)[1])))
            return [{"tag": t, "revision_kref": to_kref(r), "since": since, "until": until or None}
                    for r, t, since, until in spans if tag in (None, t)]

        return self._engine.read(job)

    # -- bulk -----------------------------------------------------------------------------------------
    def create_revisions(self, rows: list[NewRevision]) -> BulkResult:
        """Many revisions in one transaction (BatchCreateRevisions): missing items are created, rows of
        one item get consecutive numbers in order, invalid rows are reported and the rest commit."""
        if len(rows) > 10_000:
            raise InvalidArgument("rows: at most 10000 rows per bulk write", field="rows")
        failures: dict[int, str] = {}
        checked: list[tuple[int, krefs.Kref, NewRevision]] = []
        for index, row in enumerate(rows):
            try:
                parsed = krefs.parse(row.item_kref, f"rows[{index}].item_kref")
                if not parsed.is_item:
                    raise InvalidKref(f"rows[{index}].item_kref: name the item with its kind (name.kind)")
                if (parsed.kind or "").lower() == names.RESERVED_KIND:  # an item kref has a kind
                    raise InvalidArgument(f"rows[{index}].item_kref: kind 'bundle' is reserved for bundles")
                names.metadata(row.metadata, f"rows[{index}].metadata")
                for art in row.artifacts:
                    names.artifact_name(art.name, f"rows[{index}].artifacts.name")
                    names.metadata(art.metadata, f"rows[{index}].artifacts.metadata")
                if len({art.name for art in row.artifacts}) < len(row.artifacts):
                    raise InvalidArgument(f"rows[{index}].artifacts: artifact names repeat within the row")
                checked.append((index, parsed, row))
            except KumihoError as exc:
                failures[index] = exc.message
        return self._engine.write(lambda tx: self._bulk_job(tx, rows, checked, failures))

    def _bulk_job(self, tx: Tx, rows: list[NewRevision], checked: list[Any], failures: dict[int, str]
                  ) -> BulkResult:
        now = self._now()
        wanted = sorted({item_id(parsed) for _, parsed, _ in checked})
        numbers = dict(tx.rows("UNWIND $ids AS id MATCH (i:Item {id: id}) RETURN i.id, i.next_number",
                               {"ids": wanted}))
        spaces = {parsed.space_path for _, parsed, _ in checked if item_id(parsed) not in numbers}
        present = {r[0] for r in tx.rows("UNWIND $p AS p MATCH (s:Space {path: p}) RETURN s.path",
                                         {"p": sorted(spaces)})}
        new_items: dict[str, dict[str, Any]] = {}
        plan: list[dict[str, Any]] = []
        for index, parsed, row in checked:
            node = item_id(parsed)
            if node not in numbers:
                if parsed.space_path not in present:
                    failures[index] = f"rows[{index}]: space {parsed.space_path} does not exist; create it first"
                    continue
                new_items[node] = {"id": node, "project": parsed.project, "space": parsed.space_path,
                                   "name": parsed.item_name, "kind": parsed.kind}
                numbers[node] = 1
            number = numbers[node]
            numbers[node] = number + 1
            default = next((a.name for a in row.artifacts if a.is_default), "")
            plan.append({"index": index, "item": node, "id": revision_id(node, number), "number": number,
                         "m": dumps(row.metadata), "dflt": default, "row": row})
        if not plan:
            return BulkResult([None] * len(rows), dict(sorted(failures.items())))
        # before the first COPY: Kùzu 0.11 can crash rolling back a transaction that bulk-loaded rows
        self.policy.guard("revision.created", *(to_kref(p["id"]) for p in plan))
        params = {"now": now, "u": LOCAL_USER}
        stamps = "$now AS c, $now AS mo, $u AS au, $u AS un"
        for node, fields in new_items.items():
            fields["next"] = numbers[node]
        tx.copy("Item", "row.id AS id, row.project AS p, row.space AS s, row.name AS n, row.kind AS k, "
                f"{stamps}, '{{}}' AS m, false AS d, row.next AS nx", list(new_items.values()), params)
        tx.copy("HOLDS", "row.space AS f, row.id AS t", list(new_items.values()))
        tx.copy("Revision", f"row.id AS id, row.item AS it, row.number AS n, row.m AS m, {stamps}, false AS d, "
                "row.dflt AS da, false AS ix", [{k: p[k] for k in ("item", "id", "number", "m", "dflt")}
                                                for p in plan], params)
        tx.copy("HAS_REVISION", "row.item AS f, row.id AS t", [{"item": p["item"], "id": p["id"]} for p in plan])
        self._created(tx, [p["id"] for p in plan])
        self._bulk_artifacts(tx, plan, params)
        last = {p["item"]: p["id"] for p in plan}
        existing = [{"item": i, "next": numbers[i]} for i in last if i not in new_items]
        tx.unwind("UNWIND $rows AS row MATCH (i:Item {id: row.item}) SET i.next_number = row.next, "
                  "i.modified_at = $now", existing, params)
        # the new 'latest' spans first, then the old ones end: Kùzu 0.11 crashes rolling back a COPY into a
        # relationship table after a SET on its rows (Tx.copy)
        tx.copy("TAGGED", "row.item AS f, row.rev AS t, 'latest' AS tag, $now AS since, '' AS until",
                [{"item": i, "rev": r} for i, r in last.items()], params)
        tx.unwind("UNWIND $rows AS row MATCH (:Item {id: row.item})-[t:TAGGED]->(r:Revision) "
                  "WITH t, r, row WHERE t.tag = 'latest' AND t.until = '' AND r.id <> row.rev SET t.until = $now",
                  [{**e, "rev": last[e["item"]]} for e in existing], params)
        self._events(tx, "revision.created", [to_kref(p["id"]) for p in plan], now)
        results: list[Revision | None] = [None] * len(rows)
        latest_ids = set(last.values())
        for p in plan:
            results[p["index"]] = revision_from(
                {"id": p["id"], "item": p["item"], "number": p["number"], "metadata": p["m"],
                 "created_at": now, "modified_at": now, "author": LOCAL_USER, "username": LOCAL_USER,
                 "deprecated": False, "default_artifact": p["dflt"]},
                ["latest"] if p["id"] in latest_ids else [])
        return BulkResult(results, dict(sorted(failures.items())))

    def _bulk_artifacts(self, tx: Tx, plan: list[dict[str, Any]], params: dict[str, Any]) -> None:
        arts = [{"id": artifact_id(p["id"], a.name), "rev": p["id"], "name": a.name, "loc": a.location,
                 "m": dumps(a.metadata)} for p in plan for a in p["row"].artifacts]
        tx.copy("Artifact", "row.id AS id, row.rev AS r, row.name AS n, row.loc AS l, $now AS c, $now AS mo, "
                "$u AS au, $u AS un, row.m AS m, false AS d", arts, params)
        tx.copy("HAS_ARTIFACT", "row.rev AS f, row.id AS t", arts)


def _tag_holders(tx: Tx, item_ids: list[str], tag: str) -> dict[str, Revision]:
    """Item id → the revision holding ``tag`` now, with its current tags, for the items that exist under
    exactly these ids, in one query (a batch of 500 items costs one read instead of 1,500)."""
    ids = sorted(set(item_ids))
    if not ids:
        return {}
    held: dict[str, dict[str, tuple[dict[str, Any], list[str]]]] = {}  # item → {revision id: (node, tags)}
    for item, name, node in tx.rows(
            "MATCH (i:Item)-[t:TAGGED]->(r:Revision) WHERE i.id IN $ids AND t.until = '' RETURN i.id, t.tag, r",
            {"ids": ids}):
        held.setdefault(item, {}).setdefault(node["id"], (node, []))[1].append(name)
    return {item: revision_from(node, tags) for item, revisions in held.items()
            for node, tags in revisions.values() if tag in tags}
