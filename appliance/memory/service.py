"""The memory tools' behaviour (reference §4, MISSION §2–§3), independent of MCP: each public method takes
the tool's validated arguments and returns its JSON result. Errors are KumihoError subclasses; the MCP
surface turns them into tool errors (D9)."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from appliance.core import kref as krefs
from appliance.core.ports import ChatModel, NoModel
from appliance.core.search import SearchFilter, SearchRequest
from appliance.errors import InvalidArgument, NotFound
from appliance.graph import GraphStore
from appliance.jobs import JobQueue
from appliance.memory import records, views
from appliance.memory.augmented import augmented_recall
from appliance.memory.cache import RecallCache
from appliance.memory.client import Client
from appliance.memory.model_tools import (
    ModelBackedTools,
    ModelOptions,
    Redact,
    _configured_model_only,
    patterns_only,
)
from appliance.memory.recall import Recaller, RecallQuery
from appliance.memory.spaces import project_of, scopes
from appliance.memory.working import WorkingMemory
from appliance.memory.writer import MemoryWriter

log = logging.getLogger(__name__)


class MemoryService(ModelBackedTools):
    def __init__(self, graph: GraphStore, recaller: Recaller, writer: MemoryWriter, working: WorkingMemory, *,
                 cache: RecallCache, half_lives: dict[str, float] | None = None, model: ChatModel | None = None,
                 jobs: JobQueue | None = None, redact_pii: Redact = patterns_only,
                 artifact_root: Path | None = None, options: ModelOptions | None = None,
                 model_for: Callable[[dict[str, Any]], ChatModel] | None = None,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.graph, self.recaller, self.writer, self.working = graph, recaller, writer, working
        self.cache = cache
        self.half_lives = half_lives or {}
        self.model: ChatModel = model or NoModel("no chat model is configured")
        self.jobs = jobs
        self.redact_pii = redact_pii
        self.artifact_root = artifact_root or writer.artifact_root
        self.options = options or ModelOptions()
        self.model_for = model_for or _configured_model_only
        self._clock = clock

    # -- recall ----------------------------------------------------------------------------------------
    def recall(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        return self.cached("recall", args, client, lambda: self.run_recall(args, client, with_context=False))

    def engage(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        return self.cached("engage", args, client, lambda: self.run_recall(args, client, with_context=True))

    def cached(self, tool: str, args: dict[str, Any], client: Client,
                run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        key = self.cache.key(tool, args, client)
        hit = self.cache.get(key)
        if hit is not None:
            return {**hit, "cached": True}
        generation = self.cache.generation
        result = run()
        self.cache.put(key, result, generation)
        return result

    def run_recall(self, args: dict[str, Any], client: Client, *, with_context: bool,
                floor: float = 0.0, kind: str = "conversation", order: str = "relevance") -> dict[str, Any]:
        started = time.perf_counter()
        project = project_of(args, client)
        mode = args.get("recall_mode", "summarized")
        query = _query_text(args)
        spaces = scopes(project, args.get("space_paths"))
        self._check_spaces(spaces)
        recall = RecallQuery(
            query=query, project=project, spaces=spaces,
            kinds=(kind,), memory_types=tuple(t.lower() for t in args.get("memory_types") or ()),
            limit=_positive(args.get("limit", 5), "limit"), min_score=max(floor, float(args.get("min_score", 0.0))),
            mode=mode, order=order, half_lives=self.half_lives)
        augmented: dict[str, Any] | None = None
        if args.get("graph_augmented") and query.strip():
            unready = self.model_ready()
            if unready:
                augmented = {"used": False, "note": f"unavailable: {unready}; plain recall was used"}
            else:
                results, augmented = augmented_recall(self.recaller, self.graph, self.model, recall,
                                                      timeout=self.options.reformulate_seconds)
                augmented = {"used": True, **augmented}
        if augmented is None or not augmented["used"]:
            results = self.recaller.recall(recall)
        result: dict[str, Any] = {"results": results, "count": len(results), "recall_mode": mode}
        if with_context:
            context = records.context(results, mode)
            result = {"context": context, **result, "source_krefs": [r["kref"] for r in results],
                      "approx_tokens": len(context) // 4}
        if augmented is not None:
            result["graph_augmented"] = augmented
        result["timing_ms"] = {"total": round((time.perf_counter() - started) * 1000, 1)}
        return result

    def _check_spaces(self, spaces: tuple[str, ...]) -> None:
        for space in spaces:
            if space.count("/") == 1:  # a project's root: an empty or new project just recalls nothing
                continue
            try:
                self.graph.get_space(space)
            except NotFound:
                raise NotFound(f"space_paths: {space} does not exist; name an existing space (engage results "
                               "show theirs) or the project itself for everything", field="space_paths") from None

    def retrieve(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        """Modes search (relevance), latest (newest first) and first (the oldest match) — reference §4.6."""
        mode = _retrieve_mode(args.get("mode", "search"), str(args.get("query") or ""))
        project = project_of(args, client)
        limit = _positive(args.get("limit", 5), "limit")
        kind = args.get("memory_item_kind") or "conversation"
        recall_args = {**args, "limit": max(limit * 4, 20) if mode != "search" else limit}
        found = self.run_recall(recall_args, client, with_context=False, kind=kind,
                             order="latest" if mode == "latest" else "relevance")["results"]
        if mode == "first":
            found = sorted(found, key=lambda r: r["created_at"])[:1]
            return {"item_krefs": [r["item_kref"] for r in found], "revision_krefs": [r["kref"] for r in found],
                    "spaces_used": sorted({r["space"] for r in found}), "mode": mode}
        found = found[:limit]
        if len(found) < limit and args.get("bundle_names"):
            found += self._bundle_fallback(project, args, kind, limit - len(found), {r["item_kref"] for r in found})
        result = {"item_krefs": [r["item_kref"] for r in found], "revision_krefs": [r["kref"] for r in found],
                  "scores": [r["score"] for r in found], "spaces_used": sorted({r["space"] for r in found}),
                  "mode": mode, "project": project}
        if mode == "latest":
            result["created_at"] = [r["created_at"] for r in found]
        if args.get("include_revision_metadata", True):
            result["results"] = found
        return result

    def _bundle_fallback(self, project: str, args: dict[str, Any], kind: str, room: int,
                         seen: set[str]) -> list[dict[str, Any]]:
        """Members of the named bundles (score 0.5), within the requested spaces (reference §4.6)."""
        wanted_spaces = scopes(project, args.get("space_paths")) or ("/" + project,)
        wanted = {s for name in args["bundle_names"] for s in (name, name.casefold())}
        added: list[dict[str, Any]] = []
        for space in wanted_spaces:
            page = self.graph.search_items(context_filter=space.strip("/"), kind_filter="bundle")
            for bundle in page.items:
                if bundle.item_name not in wanted:
                    continue
                members, _ = self.graph.bundle_members(bundle.kref)
                current = self.graph.current_revisions([m.item_kref for m in members])
                for item, revision in current.items():
                    if item in seen or revision.deprecated or len(added) >= room or not item.endswith("." + kind):
                        continue
                    seen.add(item)
                    space_name = item.split("//", 1)[1].rsplit("/", 1)[0]
                    added.append(records.memory(revision, 0.5, None, space_name, "summarized"))
        return added

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

    def fulltext(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        """Typo-tolerant item search; ``context`` is a project/space path prefix (by segments)."""
        query = str(args["query"])
        context = str(args.get("context") or "").strip().strip("/")
        project = context.split("/", 1)[0] if context else None
        where = SearchFilter(project=project, spaces=("/" + context,) if context else (),
                             kinds=(args["kind"],) if args.get("kind") else (),
                             include_deprecated=bool(args.get("include_deprecated")))
        limit = _positive(args.get("limit", 20), "limit")
        self.recaller.wait_for_index()
        hits = self.recaller.search.search(SearchRequest(query, where, "text", limit=limit * 3))
        best: dict[str, float] = {}
        for hit in hits:
            item = str(krefs.parse(hit.revision_kref).item())
            best.setdefault(item, hit.score)
        results = []
        for item_kref, score in list(best.items())[:limit]:
            try:
                item = self.graph.get_item(item_kref)
            except NotFound:
                continue
            entry: dict[str, Any] = {"item": views.item_view(item, bool(args.get("include_metadata"))),
                                     "score": round(score, 4), "matched_in": "revision"}
            if args.get("include_revision_metadata"):
                current = self.graph.current_revisions([item_kref]).get(item_kref)
                entry["revision"] = views.revision_view(current) if current else None
            results.append(entry)
        return {"results": results, "count": len(results), "total": len(best), "query": query,
                "search_mode": "fuzzy", "filters": {"context": args.get("context", ""), "kind": args.get("kind", "")}}


def _query_text(args: dict[str, Any]) -> str:
    parts = [str(args.get("query") or "")] + [str(k) for k in args.get("keywords") or []] + \
        [str(t) for t in args.get("topics") or []]
    return " ".join(p for p in parts if p.strip())


def _positive(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument(f"{field}: must be a positive whole number (got {value!r})", field=field)
    return min(value, 100)


def _retrieve_mode(mode: str, query: str) -> str:
    normal = re.sub(r"[\s-]+", "_", (mode or "").strip().lower())
    if normal in ("latest", "newest", "recent", "most_recent"):
        return "latest"
    if normal in ("first", "earliest", "oldest", "initial"):
        return "first"
    if normal == "" and re.search(r"\b(first|earliest|oldest|initial)\b", query.lower()):
        return "first"
    if normal in ("search", ""):
        return "search"
    raise InvalidArgument(f"mode: {mode!r} is not a retrieve mode; use search, latest or first", field="mode")
