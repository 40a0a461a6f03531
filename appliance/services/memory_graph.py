"""The memory graph as a force-directed view draws it. The ``memory_graph`` tool and the console's
``GET /api/v1/graph`` both build it here, in this shape:

- ``nodes``: ``{id, name, kind, space, created_at, title, summary, revision_kref}`` for each memory (``id`` is
  its item kref without ``kref://``) and each space on the way to them (``id`` is its path without the leading
  "/", ``kind`` is ``"space"``, no time nor revision);
- ``edges``: ``{source, target, edge_type}`` between node ids, with the edge's ``metadata`` when it has some;
- ``spaces``: the space paths (without the leading "/"), the project's root first;
- ``stats``: ``{total_items, shown_items, total_edges, kinds}``, ``kinds`` counting every match per kind.

Nodes are the matching memories (newest first, cut at the limit) plus the spaces on the way to them; edges are
``BELONGS_TO`` (memory → its space), ``CHILD_OF`` (space → parent space) and the typed edges between the shown
memories' current revisions. Two graph reads whatever the size: the items with their current revisions,
then the edges among them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from appliance.graph import GraphStore
from appliance.graph.overview import GraphItems
from appliance.memory import records


@dataclass(frozen=True)
class GraphQuery:
    project: str
    space: str = ""  # "P/a" (no leading "/"): that space and those below it; "" = the whole project
    kinds: tuple[str, ...] = ()
    memory_types: tuple[str, ...] = ()
    name_contains: str = ""
    since: str = ""  # ISO, inclusive; compared with items' created_at
    until: str = ""  # ISO, exclusive
    by_name: bool = False  # else newest first
    limit: int = 100


@dataclass(frozen=True)
class MemoryGraph:
    view: dict[str, Any]  # {nodes, edges, spaces, stats}
    total: int  # memories that matched
    shown: int  # memories in ``view``: the first ``limit`` of them

    @property
    def truncated(self) -> bool:
        return self.total > self.shown


def memory_graph(graph: GraphStore, query: GraphQuery) -> MemoryGraph:
    """The view of ``query``; NotFound (naming ``project``) when the project does not exist. An archived
    project shows no memories: they are hidden as from search."""
    if graph.get_project(query.project).deprecated:
        found = GraphItems([], 0, {})
    else:
        found = graph.graph_items(query.project, query.space, list(query.kinds), list(query.memory_types),
                                  query.name_contains, query.since, query.until, query.limit, query.by_name)
    items = found.items
    node_of = {item.item_kref: _node_id(item.item_kref) for item in items}
    nodes = [{"id": node_of[item.item_kref], "name": item.name, "kind": item.kind, "space": item.space.strip("/"),
              "created_at": item.created_at, "title": item.metadata.get("title", item.name),
              "summary": records.summary_of(item.metadata), "revision_kref": item.revision_kref} for item in items]
    spaces = _space_paths(query.project, [i.space for i in items])
    edges: list[dict[str, Any]] = [{"source": node_of[i.item_kref], "target": i.space.strip("/"),
                                    "edge_type": "BELONGS_TO"} for i in items]
    edges += [{"source": path, "target": path.rsplit("/", 1)[0], "edge_type": "CHILD_OF"}
              for path in spaces if path != query.project]
    current = [i.revision_kref for i in items if i.revision_kref]
    for link in graph.links_between(current, list(node_of)):
        source, target = node_of.get(link.source_item), node_of.get(link.target_item)
        if source and target and source != target:
            entry: dict[str, Any] = {"source": source, "target": target, "edge_type": link.edge_type}
            if link.metadata:
                entry["metadata"] = link.metadata
            edges.append(entry)
    space_nodes = [{"id": p, "name": p.rsplit("/", 1)[-1], "kind": "space",
                    "space": p.rsplit("/", 1)[0] if "/" in p else "", "created_at": None, "title": p,
                    "summary": "", "revision_kref": None} for p in spaces]
    stats = {"total_items": found.total, "shown_items": len(items), "total_edges": len(edges),
             "kinds": {**found.kinds, "space": len(spaces)}}
    return MemoryGraph({"nodes": space_nodes + nodes, "edges": edges, "spaces": spaces, "stats": stats},
                       found.total, len(items))


def _node_id(item_kref: str) -> str:
    return item_kref.split("//", 1)[1]


def _space_paths(project: str, item_spaces: list[str]) -> list[str]:
    """Every space on the way to the items' spaces, without a leading "/", the project root first."""
    found = {project}
    for space in item_spaces:
        parts = space.strip("/").split("/")
        found.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    return [project, *sorted(found - {project})]
