"""The memory tools not yet moved to a service family of their own (appliance/services), reading a plain dict
of arguments."""

from __future__ import annotations

from typing import Any

from appliance.graph import GraphStore
from appliance.memory import views
from appliance.memory.client import Client


class MemoryService:
    def __init__(self, graph: GraphStore) -> None:
        self.graph = graph

    def get_edges(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        direction = args.get("direction") or "both"
        edge_type = args.get("edge_type") or None
        edges, cursor = [], None
        while True:  # every edge: agents read one answer
            page = self.graph.get_edges(args["revision_kref"], edge_type=edge_type or "", direction=direction,
                                        cursor=cursor)
            edges += page.items
            cursor = page.next_cursor
            if not cursor:
                break
        return {"revision_kref": args["revision_kref"], "direction": direction,
                "edges": [views.edge_view(e) for e in edges], "count": len(edges)}
