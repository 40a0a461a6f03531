"""Projects, spaces and items: the containers of the graph."""

from __future__ import annotations

import uuid
from typing import Any

from appliance.core import deletion, names
from appliance.core import kref as krefs
from appliance.core.model import Item, Page, Project, Space
from appliance.errors import Conflict, InvalidArgument, NotFound
from appliance.graph._support import (
    LOCAL_USER,
    StoreBase,
    archived_projects,
    check_page_size,
    decode_cursor,
    dumps,
    encode_cursor,
    existing,
    item_from,
    item_id,
    loads,
    project_from,
    space_from,
    to_kref,
)
from appliance.graph.engine import Tx
from appliance.graph.resolve import locate_item, locate_item_node, space_node


class StructureStore(StoreBase):
    # -- projects -----------------------------------------------------------------------------------
    def create_project(
        self, name: str, description: str = "", metadata: dict[str, str] | None = None,
        allow_public: bool = False, exists_error: bool = False,
    ) -> Project:
        names.project_name(name, "name")
        meta = names.metadata(metadata)

        def job(tx: Tx) -> Project:
            found = existing(tx, "MATCH (p:Project {name: $n}) RETURN p", {"n": name}, exists_error,
                             f"project {name!r}", "name", project_from)
            if found:
                return found
            now = self._now()
            row = tx.returned_row(
                "CREATE (p:Project {name: $n, project_id: $id, description: $d, created_at: $now, "
                "updated_at: $now, deprecated: false, allow_public: $pub, metadata: $m}) RETURN p",
                {"n": name, "id": str(uuid.uuid4()), "d": description, "now": now, "pub": allow_public,
                 "m": dumps(meta)},
            )
            self._create_space_node(tx, "/" + name, "", name, {})
            self._event(tx, "project.created", "kref://" + name)
            return project_from(row[0])

        return self._engine.write(job)

    def ensure_project(self, name: str, description: str = "") -> Project:
        return self.create_project(name, description)

    def get_project(self, name: str) -> Project:
        row = self._engine.read(lambda tx: tx.one("MATCH (p:Project {name: $n}) RETURN p", {"n": name}))
        if row is None:
            raise NotFound(f"project {name!r} does not exist", field="project")
        return project_from(row[0])

    def list_projects(self, include_deprecated: bool = False) -> list[Project]:
        rows = self._engine.read(lambda tx: tx.rows(
            "MATCH (p:Project) WHERE $incl OR NOT p.deprecated RETURN p ORDER BY p.name",
            {"incl": include_deprecated}))
        return [project_from(r[0]) for r in rows]

    def update_project(
        self, name: str, *, description: str | None = None, allow_public: bool | None = None,
        deprecated: bool | None = None, metadata: dict[str, str] | None = None,
    ) -> Project:
        meta = names.metadata(metadata)

        def job(tx: Tx) -> Project:
            current = project_from(self._project_node(tx, name))
            row = tx.returned_row(
                "MATCH (p:Project {name: $n}) SET p.description = $d, p.allow_public = $pub, "
                "p.deprecated = $dep, p.metadata = $m, p.updated_at = $now RETURN p",
                {"n": name, "now": self._now(),
                 "d": current.description if description is None else description,
                 "pub": current.allow_public if allow_public is None else allow_public,
                 "dep": current.deprecated if deprecated is None else deprecated,
                 "m": dumps({**current.metadata, **meta})},
            )
            archiving = deprecated is not None and deprecated != current.deprecated
            if archiving:  # the search index hides an archived project's memories (outbox.py)
                self._dirty(tx, self._project_revisions(tx, name))
            routing = ("project.archived" if deprecated else "project.restored") if archiving else "project.updated"
            self._event(tx, routing, "kref://" + name, {"deprecated": deprecated, "metadata": meta or None})
            return project_from(row[0])

        return self._engine.write(job)

    def delete_project(self, name: str, force: bool = False) -> bool:
        """Archive the project (``force=False``: hidden from listings and search, restorable with
        ``update_project(deprecated=False)``) or delete it and everything in it (``force=True``; agents go
        through ``deletion_impact`` and ``hard_delete_project`` instead)."""
        if not force:
            self.update_project(name, deprecated=True)
            return True

        def job(tx: Tx) -> bool:
            self._project_node(tx, name)
            self._hard_delete(tx, name)
            return True

        return self._engine.write(job)

    def deletion_impact(self, name: str) -> deletion.DeletionImpact:
        """What deleting the project for good would remove and what stands in the way, under a new snapshot
        id and its hash (core/deletion.py)."""
        snapshot_id = deletion.new_snapshot_id(self._clock())
        return self._engine.read(lambda tx: self._impact(tx, name, snapshot_id))

    def hard_delete_project(self, name: str, snapshot_id: str, snapshot_hash: str) -> deletion.DeletionImpact:
        """Delete the project and everything in it, if it is still as the snapshot described it and no other
        project refers into it."""
        deletion.check_snapshot(snapshot_id, snapshot_hash)

        def job(tx: Tx) -> deletion.DeletionImpact:
            now = self._impact(tx, name, snapshot_id)
            if now.snapshot_hash != snapshot_hash:
                raise Conflict(f"impact_snapshot_hash: project {name!r} changed since this snapshot was taken (or "
                               "the id and hash do not belong together); call again with force=true for a fresh "
                               "snapshot and confirm that one", field="impact_snapshot_hash")
            if now.blocker_count:
                raise Conflict(f"project_name: {now.blocker_count} reference(s) from other projects point into "
                               f"project {name!r} ({'; '.join(now.blockers[:5])}); delete those edges or bundle "
                               "memberships first", field="project_name")
            self._hard_delete(tx, name)
            return now

        return self._engine.write(job)

    def _hard_delete(self, tx: Tx, name: str) -> None:
        revisions = self._project_revisions(tx, name)
        self._delete_subtree(tx, "/" + name)
        tx.run("MATCH (p:Project {name: $n}) DELETE p", {"n": name})
        self._removing(tx, revisions)
        self._event(tx, "project.deleted", "kref://" + name, {"revisions": len(revisions)})

    def _impact(self, tx: Tx, name: str, snapshot_id: str) -> deletion.DeletionImpact:
        project = project_from(self._project_node(tx, name))
        params = {"n": name, "p": "/" + name, "prefix": "/" + name + "/", "id": name + "/"}
        spaces = [r[0] for r in tx.rows("MATCH (s:Space) WHERE starts_with(s.path, $prefix) "
                                        "RETURN s.path ORDER BY s.path", params)]
        items = [r[0] for r in tx.rows("MATCH (i:Item {project: $n}) RETURN i.id ORDER BY i.id", params)]
        mine = "MATCH (i:Item {project: $n})-[:HAS_REVISION]->(r:Revision)"
        counts = {
            "spaces": len(spaces), "items": len(items),
            "revisions": int(tx.scalar(mine + " RETURN count(r)", params)),
            "artifacts": int(tx.scalar(mine + "-[:HAS_ARTIFACT]->(a) RETURN count(a)", params)),
        }
        links = tx.rows(mine + "<-[e:LINK]-(o:Revision) WHERE NOT starts_with(o.id, $id) "
                        "RETURN o.id, e.edge_type, r.id ORDER BY o.id, e.edge_type, r.id", params)
        counts["edges"] = int(tx.scalar(mine + "-[e:LINK]->() RETURN count(e)", params)) + len(links)
        bundles = tx.rows("MATCH (i:Item {project: $n})<-[:COLLECTS {removed_in: 0}]-(b:Item) "
                          "WHERE b.project <> $n RETURN b.id, i.id ORDER BY b.id, i.id", params)
        blockers = [f"{to_kref(o)} {edge} {to_kref(r)}" for o, edge, r in links]
        blockers += [f"bundle {to_kref(b)} holds {to_kref(i)}" for b, i in bundles]
        descendants = ["kref:/" + p for p in spaces] + [to_kref(i) for i in items]
        return deletion.impact(snapshot_id, project.project_id, name, descendants, blockers, counts)

    def _project_revisions(self, tx: Tx, name: str) -> list[str]:
        return [r[0] for r in tx.rows("MATCH (:Item {project: $n})-[:HAS_REVISION]->(r:Revision) RETURN r.id",
                                      {"n": name})]

    def _project_node(self, tx: Tx, name: str) -> dict[str, Any]:
        row = tx.one("MATCH (p:Project {name: $n}) RETURN p", {"n": name})
        if row is None:
            raise NotFound(f"project {name!r} does not exist; create it first", field="project")
        node: dict[str, Any] = row[0]  # a node comes back as a dict of its properties
        return node

    # -- spaces -------------------------------------------------------------------------------------
    def create_space(
        self, parent_path: str, name: str, metadata: dict[str, str] | None = None,
        exists_error: bool = False,
    ) -> Space:
        parent = krefs.space_path(krefs.parse_space_path(parent_path, "parent_path"))
        names.space_segment(name)
        meta = names.metadata(metadata)

        def job(tx: Tx) -> Space:
            path = f"{parent}/{name}"
            found = existing(tx, "MATCH (s:Space {path: $p}) RETURN s", {"p": path}, exists_error,
                             f"space {path}", "space_name", space_from)
            if found:
                return found
            space_node(tx, parent)
            return space_from(self._create_space_node(tx, path, parent, name, meta))

        return self._engine.write(job)

    def ensure_space(self, path: str) -> Space:
        """Create a space path segment by segment (the project too); return the deepest space."""
        segments = krefs.parse_space_path(path)

        def job(tx: Tx) -> Space:
            if tx.one("MATCH (p:Project {name: $n}) RETURN p.name", {"n": segments[0]}) is None:
                self.create_project(segments[0])
            node = space_node(tx, "/" + segments[0])
            for depth in range(2, len(segments) + 1):
                current = krefs.space_path(segments[:depth])
                row = tx.one("MATCH (s:Space {path: $p}) RETURN s", {"p": current})
                node = row[0] if row else self._create_space_node(
                    tx, current, krefs.space_path(segments[: depth - 1]), segments[depth - 1], {})
            return space_from(node)

        return self._engine.write(job)

    def _create_space_node(self, tx: Tx, path: str, parent: str, name: str, meta: dict[str, str]) -> Any:
        now = self._now()
        row = tx.returned_row(
            "CREATE (s:Space {path: $p, name: $n, project: $proj, parent: $parent, created_at: $now, "
            "modified_at: $now, author: $u, username: $u, metadata: $m}) RETURN s",
            {"p": path, "n": name, "proj": path.split("/")[1], "parent": parent, "now": now,
             "u": LOCAL_USER, "m": dumps(meta)},
        )
        if parent:
            tx.run("MATCH (a:Space {path: $a}), (b:Space {path: $b}) CREATE (a)-[:SUBSPACE]->(b)",
                   {"a": parent, "b": path})
            self._event(tx, "space.created", "kref:/" + path)
        return row[0]

    def get_space(self, path: str) -> Space:
        normal = krefs.space_path(krefs.parse_space_path(path))
        return space_from(self._engine.read(lambda tx: space_node(tx, normal)))

    def list_spaces(
        self, parent_path: str = "", recursive: bool = False, page_size: int = 100,
        cursor: str | None = None,
    ) -> Page[Space]:
        check_page_size(page_size)
        after = decode_cursor(cursor, str) or ""
        if parent_path.strip("/"):
            parent = krefs.space_path(krefs.parse_space_path(parent_path, "parent_path"))
            where = "starts_with(s.path, $prefix)" if recursive else "s.parent = $parent"
        else:
            parent = ""
            where = "true" if recursive else "s.parent = ''"

        def job(tx: Tx) -> Page[Space]:
            if parent:
                space_node(tx, parent)
            params = {"parent": parent, "prefix": parent + "/", "after": after, "n": page_size + 1}
            total = tx.scalar(f"MATCH (s:Space) WHERE {where} RETURN count(s)", params)
            rows = tx.rows(f"MATCH (s:Space) WHERE {where} AND s.path > $after "
                           "RETURN s ORDER BY s.path LIMIT $n", params)
            return _page([space_from(r[0]) for r in rows], page_size, total, lambda s: s.path)

        return self._engine.read(job)

    def update_space_metadata(self, path: str, metadata: dict[str, str]) -> Space:
        normal = krefs.space_path(krefs.parse_space_path(path))
        meta = names.metadata(metadata)

        def job(tx: Tx) -> Space:
            node = space_node(tx, normal)
            row = tx.returned_row("MATCH (s:Space {path: $p}) SET s.metadata = $m, s.modified_at = $now RETURN s",
                                  {"p": normal, "m": dumps({**loads(node["metadata"]), **meta}), "now": self._now()})
            self._event(tx, "space.updated", "kref:/" + normal, {"metadata": meta})
            return space_from(row[0])

        return self._engine.write(job)

    def delete_space(self, path: str, force: bool = False) -> bool:
        segments = krefs.parse_space_path(path)
        if len(segments) < 2:
            raise InvalidArgument("space_path: a project's root space goes with the project; "
                                  "use delete_project", field="space_path")
        normal = krefs.space_path(segments)

        def job(tx: Tx) -> bool:
            space_node(tx, normal)
            has_children = tx.one("MATCH (s:Space) WHERE s.parent = $p RETURN s.path LIMIT 1", {"p": normal})
            has_items = tx.one("MATCH (:Space {path: $p})-[:HOLDS]->(i:Item) RETURN i.id LIMIT 1", {"p": normal})
            if not force and (has_children or has_items):
                raise Conflict(f"space {normal} is not empty; delete its contents or pass force=true",
                               field="space_path")
            revisions = [r[0] for r in tx.rows(
                "MATCH (s:Space)-[:HOLDS]->(:Item)-[:HAS_REVISION]->(r:Revision) WHERE s.path = $p OR "
                "starts_with(s.path, $prefix) RETURN r.id", {"p": normal, "prefix": normal + "/"})]
            self._delete_subtree(tx, normal)
            self._removing(tx, revisions)
            self._event(tx, "space.deleted", "kref:/" + normal, {"revisions": len(revisions)})
            return True

        return self._engine.write(job)

    def _delete_subtree(self, tx: Tx, path: str) -> None:
        """Delete a space, its sub-spaces and every item, revision and artifact in them."""
        params = {"p": path, "prefix": path + "/"}
        inside = "WHERE s.path = $p OR starts_with(s.path, $prefix)"
        tx.run(f"MATCH (s:Space)-[:HOLDS]->(:Item)-[:HAS_REVISION]->(:Revision)-[:HAS_ARTIFACT]->(a) "
               f"{inside} DETACH DELETE a", params)
        tx.run(f"MATCH (s:Space)-[:HOLDS]->(:Item)-[:HAS_REVISION]->(r) {inside} DETACH DELETE r", params)
        tx.run(f"MATCH (s:Space)-[:HOLDS]->(i:Item) {inside} DETACH DELETE i", params)
        tx.run(f"MATCH (s:Space) {inside} DETACH DELETE s", params)

    # -- items --------------------------------------------------------------------------------------
    def create_item(
        self, space_path: str, item_name: str, kind: str, metadata: dict[str, str] | None = None,
        exists_error: bool = False,
    ) -> Item:
        if isinstance(kind, str) and kind.lower() == names.RESERVED_KIND:
            raise InvalidArgument("kind: 'bundle' is reserved; create bundles with create_bundle",
                                  field="kind")
        return self._create_item(space_path, item_name, kind, metadata, exists_error)

    def _create_item(
        self, space_path: str, item_name: str, kind: str, metadata: dict[str, str] | None,
        exists_error: bool,
    ) -> Item:
        segments = krefs.parse_space_path(space_path)
        names.item_name(item_name)
        names.kind(kind)
        meta = names.metadata(metadata)
        node_id = item_id(krefs.item_kref(segments[0], segments[1:], item_name, kind))

        def job(tx: Tx) -> Item:
            found = existing(tx, "MATCH (i:Item {id: $id}) RETURN i", {"id": node_id}, exists_error,
                             f"item {to_kref(node_id)}", "item_name", item_from)
            if found:
                return found
            space_node(tx, krefs.space_path(segments))
            node = self._create_item_node(tx, node_id, segments, item_name, kind, meta)
            self._event(tx, "item.created", to_kref(node_id))
            return item_from(node)

        return self._engine.write(job)

    def _create_item_node(
        self, tx: Tx, node_id: str, segments: tuple[str, ...], name: str, kind: str, meta: dict[str, str]
    ) -> dict[str, Any]:
        now = self._now()
        space = krefs.space_path(segments)
        row = tx.returned_row(
            "MATCH (s:Space {path: $space}) CREATE (s)-[:HOLDS]->(i:Item {id: $id, project: $proj, "
            "space: $space, name: $n, kind: $k, created_at: $now, modified_at: $now, author: $u, "
            "username: $u, metadata: $m, deprecated: false, next_number: 1}) RETURN i",
            {"id": node_id, "proj": segments[0], "space": space, "n": name, "k": kind, "now": now,
             "u": LOCAL_USER, "m": dumps(meta)},
        )
        node: dict[str, Any] = row[0]
        return node

    def get_item(self, kref: str) -> Item:
        parsed = krefs.parse(kref)
        return item_from(self._engine.read(
            lambda tx: locate_item_node(tx, parsed, self.default_project)))

    def list_items(
        self, space_path: str, name_filter: str = "", kind_filter: str = "",
        include_deprecated: bool = False, page_size: int = 100, cursor: str | None = None,
    ) -> Page[Item]:
        """Items directly in one space, by id, paged."""
        path = krefs.space_path(krefs.parse_space_path(space_path))
        check_page_size(page_size)
        after = decode_cursor(cursor, str) or ""
        where = ("($incl OR NOT i.deprecated) AND ($kind = '' OR i.kind = $kind) "
                 "AND ($name = '' OR contains(i.name, $name))")

        def job(tx: Tx) -> Page[Item]:
            space_node(tx, path)
            params = {"p": path, "incl": include_deprecated, "kind": kind_filter, "name": name_filter,
                      "after": after, "n": page_size + 1}
            match = "MATCH (:Space {path: $p})-[:HOLDS]->(i:Item) WHERE " + where
            total = tx.scalar(match + " RETURN count(i)", params)
            rows = tx.rows(match + " AND i.id > $after RETURN i ORDER BY i.id LIMIT $n", params)
            return _page([item_from(r[0]) for r in rows], page_size, total, lambda i: i.kref[7:])

        return self._engine.read(job)

    def search_items(
        self, context_filter: str = "", name_filter: str = "", kind_filter: str = "",
        include_deprecated: bool = False, page_size: int = 100, cursor: str | None = None,
    ) -> Page[Item]:
        """Items across spaces. ``context_filter`` is a string prefix of ``project/space…`` or a glob
        (``project-*``, ``*/characters/*``); ``name_filter`` a substring or a glob (``hero*``). Deprecated
        items and the items of archived projects are left out unless ``include_deprecated``."""
        check_page_size(page_size)
        names.glob_filter(context_filter, "context_filter")
        names.glob_filter(name_filter, "name_filter")
        offset = decode_cursor(cursor, int) or 0
        context = context_filter.lstrip("/")  # a trailing "/" stops the prefix at a whole segment
        prefix = "" if names.is_glob(context) else context

        def job(tx: Tx) -> tuple[list[list[Any]], set[str]]:
            archived = set() if include_deprecated else archived_projects(tx)
            return tx.rows(
                "MATCH (i:Item) WHERE starts_with(i.id, $prefix) AND ($incl OR NOT i.deprecated) "
                "AND ($kind = '' OR i.kind = $kind) RETURN i ORDER BY i.id",
                {"prefix": prefix, "incl": include_deprecated, "kind": kind_filter}), archived

        rows, archived = self._engine.read(job)
        items = [item for item in (item_from(r[0]) for r in rows) if item.project not in archived]
        if names.is_glob(context):
            regex = names.glob_regex(context)
            items = [i for i in items
                     if regex.match(i.space_path.strip("/")) or regex.match(i.space_path.strip("/") + "/")]
        if name_filter:
            items = [i for i in items if _name_matches(i.item_name, name_filter)]
        chunk = items[offset: offset + page_size]
        more = offset + page_size < len(items)
        return Page(chunk, encode_cursor(offset + page_size) if more else None, len(items))

    def item_names(self, prefix: str = "", kind_filter: str = "", include_deprecated: bool = False
                   ) -> list[tuple[str, str, str]]:
        """(item kref, item name, kind) of every item whose kref, after ``kref://``, starts with ``prefix``:
        what a search by name scans, three columns and no metadata (a tenth of ``search_items``' time).
        Deprecated items and archived projects' items are left out unless ``include_deprecated``."""

        def job(tx: Tx) -> tuple[list[list[Any]], set[str]]:
            archived = set() if include_deprecated else archived_projects(tx)
            return tx.rows(
                "MATCH (i:Item) WHERE starts_with(i.id, $prefix) AND ($kind = '' OR i.kind = $kind) "
                "AND ($incl OR NOT i.deprecated) RETURN i.id, i.project, i.name, i.kind ORDER BY i.id",
                {"prefix": prefix, "kind": kind_filter, "incl": include_deprecated}), archived

        rows, archived = self._engine.read(job)
        return [(to_kref(node_id), name, kind) for node_id, project, name, kind in rows if project not in archived]

    def items_by_kref(self, item_krefs: list[str]) -> dict[str, Item]:
        """Item kref → item, for those of ``item_krefs`` that exist, in one read."""
        ids = sorted({item_id(krefs.parse(k, "item_krefs")) for k in item_krefs})
        if not ids:
            return {}
        rows = self._engine.read(lambda tx: tx.by_keys("MATCH (i:Item {id: $id}) RETURN i",
                                                       "MATCH (i:Item) WHERE i.id IN $ids RETURN i", ids))
        return {item.kref: item for item in (item_from(r[0]) for r in rows)}

    def update_item_metadata(self, kref: str, metadata: dict[str, str]) -> Item:
        parsed = krefs.parse(kref)
        meta = names.metadata(metadata)

        def job(tx: Tx) -> Item:
            node = locate_item_node(tx, parsed, self.default_project)
            row = tx.returned_row("MATCH (i:Item {id: $id}) SET i.metadata = $m, i.modified_at = $now RETURN i",
                                  {"id": node["id"], "m": dumps({**loads(node["metadata"]), **meta}),
                                   "now": self._now()})
            self._event(tx, "item.updated", to_kref(node["id"]), {"metadata": meta})
            return item_from(row[0])

        return self._engine.write(job)

    def delete_item(self, kref: str, force: bool = False) -> bool:
        parsed = krefs.parse(kref)

        def job(tx: Tx) -> bool:
            node_id = locate_item(tx, parsed, self.default_project)
            revisions = [r[0] for r in tx.rows("MATCH (:Item {id: $id})-[:HAS_REVISION]->(r) RETURN r.id",
                                               {"id": node_id})]
            count = len(revisions)
            if count and not force:
                raise Conflict(f"item {to_kref(node_id)} has {count} revision(s); deprecate it to hide it, "
                               "or pass force=true to delete it with its revisions", field="kref")
            tx.run("MATCH (:Item {id: $id})-[:HAS_REVISION]->(:Revision)-[:HAS_ARTIFACT]->(a) "
                   "DETACH DELETE a", {"id": node_id})
            tx.run("MATCH (:Item {id: $id})-[:HAS_REVISION]->(r) DETACH DELETE r", {"id": node_id})
            tx.run("MATCH (i:Item {id: $id}) DETACH DELETE i", {"id": node_id})
            self._removing(tx, revisions)
            self._event(tx, "item.deleted", to_kref(node_id), {"revisions": count})
            return True

        return self._engine.write(job)


def _page(rows: list[Any], size: int, total: int, key: Any) -> Page[Any]:
    more = len(rows) > size
    rows = rows[:size]
    return Page(rows, encode_cursor(key(rows[-1])) if more else None, int(total))


def _name_matches(name: str, pattern: str) -> bool:
    if names.is_glob(pattern):
        return names.glob_regex(pattern.casefold()).match(name.casefold()) is not None
    return pattern.casefold() in name.casefold()
