"""Finding what a kref names, inside a transaction: the D8 short-form rules live here.

A kref with a kind names an item (and maybe a revision and an artifact). A kref without one names, in
order: a project (first segment is an existing project and nothing follows), a space, or an item whose
name is unique in its space; the default project is implied when the first segment is not a project.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from appliance.core import kref as krefs
from appliance.core.kref import Kref
from appliance.errors import AmbiguousKref, InvalidArgument, NotFound
from appliance.graph._support import holder_in, item_id, revision_id, tag_spans, to_kref
from appliance.graph.engine import Tx


@dataclass(frozen=True)
class Located:
    target: Literal["project", "space", "item"]
    project: str
    space_path: str = ""  # for a space: itself; for an item: its parent space
    item: str = ""  # item id


def project_exists(tx: Tx, name: str) -> bool:
    return tx.one("MATCH (p:Project {name: $n}) RETURN p.name", {"n": name}) is not None


def space_node(tx: Tx, path: str) -> dict[str, Any]:
    row = tx.one("MATCH (s:Space {path: $p}) RETURN s", {"p": path})
    if row is None:
        raise NotFound(f"space {path} does not exist; create it first", field="space_path")
    node: dict[str, Any] = row[0]  # a node comes back as a dict of its properties
    return node


def item_node(tx: Tx, node_id: str) -> dict[str, Any]:
    row = tx.one("MATCH (i:Item {id: $id}) RETURN i", {"id": node_id})
    if row is None:
        raise NotFound(f"item {to_kref(node_id)} does not exist", field="kref")
    node: dict[str, Any] = row[0]  # a node comes back as a dict of its properties
    return node


def locate(tx: Tx, kref: Kref, default_project: str) -> Located:
    if kref.is_item:
        return Located("item", kref.project, kref.space_path, item_id(kref))
    segments = kref.path
    if project_exists(tx, segments[0]):
        project, rest = segments[0], segments[1:]
    else:
        project, rest = default_project, segments
    plain = kref.revision is None and kref.tag is None and kref.time is None
    if not rest:
        if not plain or not project_exists(tx, project):
            raise NotFound(f"{kref} names no item and project {project!r} does not exist", field="kref")
        return Located("project", project)
    path = krefs.space_path((project, *rest))
    if plain and tx.one("MATCH (s:Space {path: $p}) RETURN s.path", {"p": path}):
        return Located("space", project, path)
    parent = krefs.space_path((project, *rest[:-1]))
    found = [
        row[0]
        for row in tx.rows(
            "MATCH (s:Space {path: $p})-[:HOLDS]->(i:Item) WHERE i.name = $n RETURN i.id ORDER BY i.id",
            {"p": parent, "n": rest[-1]},
        )
    ]
    if len(found) == 1:
        return Located("item", project, parent, found[0])
    if not found:
        raise NotFound(f"no item named {rest[-1]!r} in space {parent} (from {kref})", field="kref")
    candidates = [to_kref(f) for f in found]
    raise AmbiguousKref(
        f"{kref} matches {len(found)} items in {parent}; name one with its kind: {', '.join(candidates)}",
        candidates,
    )


def locate_item_node(tx: Tx, kref: Kref, default_project: str) -> dict[str, Any]:
    """The item a kref names (D8 rules for short forms), as its stored node."""
    located = locate(tx, kref, default_project)
    if located.target != "item":
        raise InvalidArgument(f"{kref} names a {located.target}, not an item", field="kref")
    return item_node(tx, located.item)


def locate_item(tx: Tx, kref: Kref, default_project: str) -> str:
    return str(locate_item_node(tx, kref, default_project)["id"])


def selected_revision(item: str, kref: Kref, spans: list[tuple[str, str, str, str]]) -> str:
    """The revision id of ``item`` that the kref's ``?t=tag`` (``latest`` without one) selects, now or at
    ``&time=``, among the item's tag spans."""
    tag = kref.tag or "latest"
    at = krefs.parse_time(kref.time) if kref.time else None
    holder = holder_in(spans, tag, at)
    if holder is None:
        when = f" at {at}" if at else ""
        raise NotFound(f"no revision of {to_kref(item)} holds tag {tag!r}{when}", field="kref")
    return holder


def locate_revision(tx: Tx, kref: Kref, default_project: str) -> str:
    """The revision id a kref leads to: ``?r=N``, else the tag (``?t=``) at ``&time=``, else latest."""
    item = locate_item(tx, kref, default_project)
    if kref.revision is None:
        return selected_revision(item, kref, tag_spans(tx, item))
    node_id = revision_id(item, kref.revision)
    if tx.one("MATCH (r:Revision {id: $id}) RETURN r.id", {"id": node_id}) is None:
        raise NotFound(f"revision {to_kref(node_id)} does not exist", field="kref")
    return node_id
