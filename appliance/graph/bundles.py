"""Bundles: items of the reserved kind ``bundle`` that collect other items.

Every membership change makes a new bundle revision whose metadata records it (``action``,
``member_item_kref``), so membership can be read as of any bundle revision and the history is the list of
bundle revisions.
"""

from __future__ import annotations

from typing import Any

from appliance.core import kref as krefs
from appliance.core import names
from appliance.core.model import BundleChange, BundleMember, Item
from appliance.errors import AlreadyExists, InvalidArgument, NotFound
from appliance.graph._support import LOCAL_USER, item_from, loads, to_kref
from appliance.graph.engine import Tx
from appliance.graph.resolve import item_node, locate_item, locate_item_node
from appliance.graph.revisions import RevisionStore
from appliance.graph.structure import StructureStore

_MEMBER_KEY = "member_item_kref"


class BundleStore(StructureStore, RevisionStore):
    def create_bundle(
        self, space_path: str, bundle_name: str, metadata: dict[str, str] | None = None,
        exists_error: bool = False,
    ) -> Item:
        def job(tx: Tx) -> Item:
            bundle = self._create_item(space_path, bundle_name, names.RESERVED_KIND, metadata, exists_error)
            node = item_node(tx, bundle.kref[len(krefs.SCHEME):])
            if node["next_number"] == 1:
                self._create_revision_node(tx, node, {"action": "CREATED", _MEMBER_KEY: ""})
            return bundle

        return self._engine.write(job)

    def _bundle(self, tx: Tx, bundle_kref: str) -> dict[str, Any]:
        node = locate_item_node(tx, krefs.parse(bundle_kref, "bundle_kref"), self.default_project)
        if node["kind"] != names.RESERVED_KIND:
            raise InvalidArgument(f"bundle_kref: {to_kref(node['id'])} is not a bundle", field="bundle_kref")
        return node

    def add_bundle_member(self, bundle_kref: str, item_kref: str, metadata: dict[str, str] | None = None
                          ) -> int:
        """Add an item; returns the bundle revision that records the change."""
        meta = names.metadata(metadata)

        def job(tx: Tx) -> int:
            bundle = self._bundle(tx, bundle_kref)
            member = locate_item(tx, krefs.parse(item_kref, "item_kref"), self.default_project)
            if member == bundle["id"]:
                raise InvalidArgument("item_kref: a bundle cannot contain itself", field="item_kref")
            if self._current_membership(tx, bundle["id"], member):
                raise AlreadyExists(f"{to_kref(member)} is already a member of {to_kref(bundle['id'])}")
            number = bundle["next_number"]
            self._create_revision_node(tx, bundle, {**meta, "action": "ADDED", _MEMBER_KEY: to_kref(member)})
            tx.run("MATCH (b:Item {id: $b}), (m:Item {id: $m}) CREATE (b)-[:COLLECTS {added_at: $now, "
                   "added_by: $u, added_by_username: $u, added_in: $n, removed_in: 0, metadata: '{}'}]->(m)",
                   {"b": bundle["id"], "m": member, "now": self._now(), "u": LOCAL_USER, "n": number})
            return int(number)

        return self._engine.write(job)

    def remove_bundle_member(self, bundle_kref: str, item_kref: str, metadata: dict[str, str] | None = None
                             ) -> int:
        meta = names.metadata(metadata)

        def job(tx: Tx) -> int:
            bundle = self._bundle(tx, bundle_kref)
            member = locate_item(tx, krefs.parse(item_kref, "item_kref"), self.default_project)
            if not self._current_membership(tx, bundle["id"], member):
                raise NotFound(f"{to_kref(member)} is not a member of {to_kref(bundle['id'])}", field="item_kref")
            number = bundle["next_number"]
            self._create_revision_node(tx, bundle, {**meta, "action": "REMOVED", _MEMBER_KEY: to_kref(member)})
            tx.run("MATCH (:Item {id: $b})-[c:COLLECTS {removed_in: 0}]->(:Item {id: $m}) SET c.removed_in = $n",
                   {"b": bundle["id"], "m": member, "n": number})
            return int(number)

        return self._engine.write(job)

    def _current_membership(self, tx: Tx, bundle: str, member: str) -> bool:
        return tx.one("MATCH (:Item {id: $b})-[c:COLLECTS {removed_in: 0}]->(:Item {id: $m}) RETURN c.added_in",
                      {"b": bundle, "m": member}) is not None

    def bundle_members(self, bundle_kref: str, revision_number: int | None = None
                       ) -> tuple[list[BundleMember], int]:
        """Members as of a bundle revision (default: the newest) and that revision's number."""
        def job(tx: Tx) -> tuple[list[BundleMember], int]:
            bundle = self._bundle(tx, bundle_kref)
            newest = bundle["next_number"] - 1
            number = newest if revision_number is None else names.bounded_int(
                revision_number, "revision_number", 1, newest)
            rows = tx.rows("MATCH (:Item {id: $b})-[c:COLLECTS]->(m:Item) WHERE c.added_in <= $n AND "
                           "(c.removed_in = 0 OR c.removed_in > $n) RETURN m.id, c ORDER BY c.added_in, m.id",
                           {"b": bundle["id"], "n": number})
            return [BundleMember(to_kref(m), c["added_at"], c["added_by"], c["added_by_username"],
                                 c["added_in"]) for m, c in rows], number

        return self._engine.read(job)

    def bundle_history(self, bundle_kref: str) -> list[BundleChange]:
        def job(tx: Tx) -> list[BundleChange]:
            bundle = self._bundle(tx, bundle_kref)
            rows = tx.rows("MATCH (:Item {id: $b})-[:HAS_REVISION]->(r) RETURN r ORDER BY r.number",
                           {"b": bundle["id"]})
            changes = []
            for (node,) in rows:
                meta = loads(node["metadata"])
                # the action was written by this store: CREATED, ADDED or REMOVED
                changes.append(BundleChange(
                    node["number"], meta.pop("action", "CREATED"), meta.pop(_MEMBER_KEY, ""),  # type: ignore[arg-type]
                    node["author"], node["username"], node["created_at"], meta))
            return changes

        return self._engine.read(job)

    def get_bundle(self, bundle_kref: str) -> Item:
        return item_from(self._engine.read(lambda tx: self._bundle(tx, bundle_kref)))
