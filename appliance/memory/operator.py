"""The operator tools (``memory_*``, MISSION §2 and §6): Revka's Operator-side wrappers. ``memory_engage``
floors ``min_score`` at ``[memory] min_relevance_score`` and caps ``limit`` at the client's (D10) or the
configured ``[kumiho] memory_retrieval_limit``; ``memory_graph`` returns the dashboard's graph shape."""

from __future__ import annotations

from typing import Any

from appliance.core import kref as krefs
from appliance.errors import InvalidArgument
from appliance.memory import records, views
from appliance.memory.client import Client
from appliance.memory.service import MemoryService
from appliance.memory.spaces import project_of

GRAPH_MAX = 500


class OperatorTools:
    def __init__(self, memory: MemoryService, *, min_relevance: float, retrieval_limit: int) -> None:
        self.memory, self.min_relevance, self.retrieval_limit = memory, min_relevance, retrieval_limit

    def _cap(self, client: Client) -> int:
        return client.retrieval_limit or self.retrieval_limit

    def engage(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        cap = self._cap(client)
        limit = min(int(args.get("limit") or cap), cap)
        floor = max(float(args.get("min_score", self.min_relevance)), self.min_relevance)
        recall = {**args, "limit": limit, "min_score": floor}
        result = self.memory.cached(
            "memory_engage", recall, client, lambda: self.memory.run_recall(
                recall, client, with_context=True, kind=args.get("memory_item_kind") or "conversation",
                order="latest" if args.get("mode") == "latest" else "relevance"))
        return {"context": result["context"], "results": result["results"], "source_krefs": result["source_krefs"],
                "count": result["count"], "limit": limit, "min_score": floor,
                **({"graph_augmented": result["graph_augmented"]} if "graph_augmented" in result else {})}

    def retrieve(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        return self.memory.retrieve(args, client)

    def search(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        page = self.memory.graph.search_items(
            context_filter=args.get("context_filter", ""), name_filter=args.get("name_filter", ""),
            kind_filter=args.get("kind_filter", ""))
        include = bool(args.get("include_metadata"))
        return {"items": [views.item_view(i, include) for i in page.items], "count": len(page.items),
                "total": page.total_count,
                "filters": {"context": args.get("context_filter", ""), "name": args.get("name_filter", ""),
                            "kind": args.get("kind_filter", "")}}

    def fulltext(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        return self.memory.fulltext(args, client)

    def get_item(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        return views.item_view(self.memory.graph.get_item(args["kref"]))

    def resolve_kref(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        return self.memory.resolve_kref(args, client)

    def get_revision_by_tag(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        return self.memory.get_revision_by_tag(args, client)

    def graph(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        """``{nodes, edges, spaces, stats}`` for a force-directed view (MISSION §6 gives the shape)."""
        project = project_of(args, client)
        limit = int(args.get("limit") or 100)
        if not 1 <= limit <= GRAPH_MAX:
            raise InvalidArgument(f"limit: between 1 and {GRAPH_MAX}", field="limit")
        kinds = {k.strip() for k in str(args.get("kinds") or "").split(",") if k.strip()}
        space = str(args.get("space") or "").strip().strip("/")
        context = space if space.startswith(project) else f"{project}/{space}" if space else project
        g = self.memory.graph
        self.memory.graph.get_project(project)
        items = [i for i in _all_items(g, context)
                 if (not kinds or i.kind in kinds) and i.kind != "bundle"
                 and (not space or i.space_path.strip("/") == context or i.space_path.startswith("/" + context + "/"))]
        search = str(args.get("search") or "").casefold()
        if search:
            items = [i for i in items if search in i.item_name.casefold()]
        kind_counts: dict[str, int] = {}
        for item in items:
            kind_counts[item.kind] = kind_counts.get(item.kind, 0) + 1
        if args.get("sort") == "name":
            items.sort(key=lambda i: i.item_name)
        else:
            items.sort(key=lambda i: i.created_at, reverse=True)
        items = items[:limit]
        current = g.current_revisions([i.kref for i in items])
        nodes, edges, by_revision = [], [], {}
        for item in items:
            revision = current.get(item.kref)
            meta = revision.metadata if revision else {}
            node_id = item.kref.split("//", 1)[1]
            nodes.append({"id": node_id, "name": item.item_name, "kind": item.kind,
                          "space": item.space_path.strip("/"), "created_at": item.created_at,
                          "title": meta.get("title", item.item_name), "summary": records.summary_of(meta),
                          "revision_kref": revision.kref if revision else None})
            if revision:
                by_revision[revision.item_kref] = node_id
        spaces = _space_paths(project, [i.space_path for i in items])
        for item in items:
            edges.append({"source": item.kref.split("//", 1)[1], "target": item.space_path.strip("/"),
                          "edge_type": "BELONGS_TO"})
        for path in spaces:
            if path != project:
                edges.append({"source": path, "target": path.rsplit("/", 1)[0], "edge_type": "CHILD_OF"})
        for item in items:
            revision = current.get(item.kref)
            if revision is None:
                continue
            for edge in g.get_edges(revision.kref, direction="outgoing", page_size=200).items:
                target_item = str(krefs.parse(edge.target_kref).item())
                source, target = by_revision.get(item.kref), by_revision.get(target_item)
                if target and source and source != target:
                    entry = {"source": source, "target": target, "edge_type": edge.edge_type}
                    if edge.metadata:
                        entry["metadata"] = dict(edge.metadata)
                    edges.append(entry)
        space_nodes = [{"id": p, "name": p.rsplit("/", 1)[-1], "kind": "space",
                        "space": p.rsplit("/", 1)[0] if "/" in p else "", "created_at": None, "title": p,
                        "summary": "", "revision_kref": None} for p in spaces]
        return {"nodes": space_nodes + nodes, "edges": edges, "spaces": spaces,
                "stats": {"total_items": sum(kind_counts.values()), "total_edges": len(edges),
                          "kinds": {**kind_counts, "space": len(spaces)}}}


def _all_items(graph: Any, context: str) -> list[Any]:
    items, cursor = [], None
    while True:
        page = graph.search_items(context_filter=context, page_size=1000, cursor=cursor)
        items.extend(page.items)
        cursor = page.next_cursor
        if not cursor:
            return items


def _space_paths(project: str, item_spaces: list[str]) -> list[str]:
    """Every space on the way to the items' spaces, without a leading "/", the project root first."""
    found = {project}
    for space in item_spaces:
        parts = space.strip("/").split("/")
        found.update("/".join(parts[: i + 1]) for i in range(len(parts)))
    return [project, *sorted(found - {project})]
