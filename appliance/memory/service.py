"""The memory tools' behaviour (reference §4, MISSION §2–§3), independent of MCP: each public method takes
the tool's validated arguments and returns its JSON result. Errors are KumihoError subclasses; the MCP
surface turns them into tool errors (D9)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from appliance.core import kref as krefs
from appliance.core.ports import ChatModel, NoModel
from appliance.errors import InvalidArgument
from appliance.graph import GraphStore
from appliance.jobs import JobQueue
from appliance.memory import views
from appliance.memory.client import Client
from appliance.memory.model_tools import (
    ModelBackedTools,
    ModelOptions,
    Redact,
    _configured_model_only,
    patterns_only,
)
from appliance.memory.recall import Recaller
from appliance.memory.working import WorkingMemory
from appliance.memory.writer import MemoryWriter

log = logging.getLogger(__name__)


class MemoryService(ModelBackedTools):
    def __init__(self, graph: GraphStore, recaller: Recaller, writer: MemoryWriter, working: WorkingMemory, *,
                 model: ChatModel | None = None,
                 jobs: JobQueue | None = None, redact_pii: Redact = patterns_only,
                 artifact_root: Path | None = None, options: ModelOptions | None = None,
                 model_for: Callable[[dict[str, Any]], ChatModel] | None = None,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.graph, self.recaller, self.writer, self.working = graph, recaller, writer, working
        self.model: ChatModel = model or NoModel("no chat model is configured")
        self.jobs = jobs
        self.redact_pii = redact_pii
        self.artifact_root = artifact_root or writer.artifact_root
        self.options = options or ModelOptions()
        self.model_for = model_for or _configured_model_only
        self._clock = clock


    # -- maintenance -----------------------------------------------------------------------------------
    def resolve_kref(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        found = self.graph.resolve(args["kref"])
        location = None
        if found.artifact is not None:
            location = found.artifact.location
        elif found.revision is not None and found.revision.default_artifact:
            location = self.graph.get_artifact(f"{found.revision.kref}&a={found.revision.default_artifact}").location
        return {"kref": found.kref, "target": found.target, "location": location, "resolved": location is not None}

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

    def get_revision_by_tag(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        return views.revision_view(self.graph.revision_by_tag(args["item_kref"], args.get("tag") or "published"))

    def deprecate_item(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        parsed = krefs.parse(args["item_kref"], "item_kref")
        if not parsed.is_item or parsed.revision is not None:
            raise InvalidArgument("item_kref: name an item (kref://project/space/name.kind)", field="item_kref")
        deprecated = bool(args.get("deprecated", True))
        found = self.graph.set_deprecated(args["item_kref"], deprecated)
        return {"updated": True, "item_kref": found.kref, "deprecated": deprecated}


def _positive(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument(f"{field}: must be a positive whole number (got {value!r})", field=field)
    return min(value, 100)


