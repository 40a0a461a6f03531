"""Recall: what an agent reads before it answers (engage, recall, retrieve, full-text search), reference §4.4–4.6.

Engage and recall run the recall pipeline (``appliance.memory.recall``: search, one memory per item, priors,
time decay, diversity), graph-augmented when asked and a model is there (``appliance.memory.augmented``),
behind the 5-second dedup guard (``RecallCache``). Engage adds the prompt-ready context and, with
``include_insights``, the insight request the host's model answers (``appliance.core.insights``)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from appliance.core import insights
from appliance.core import kref as krefs
from appliance.core.search import SearchFilter, SearchRequest
from appliance.graph import GraphStore
from appliance.memory import records, views
from appliance.memory.augmented import augmented_recall
from appliance.memory.cache import RecallCache
from appliance.memory.client import Client
from appliance.memory.recall import Recaller, RecallQuery, Stopwatch, check_spaces
from appliance.memory.spaces import project_for, scopes
from appliance.operations.recall import EngageInput, FulltextSearchInput, RecallInput, RecallMode, RetrieveInput
from appliance.search.names import name_scores
from appliance.services.model_work import ModelWork

if TYPE_CHECKING:
    from appliance.services import Handler

MAX_RESULTS = 100  # a larger limit is accepted (Kumiho's clients send up to 1000) and treated as this
LEARNED_KINDS = ("experience", "pattern_candidate")  # what include_learned_sources searches besides memories
MAX_LEARNED = 3

@dataclass(frozen=True)
class RecallRequest:
    """One recall, as every caller (engage, recall, retrieve, ingest, the operator tools) describes it."""

    query: str
    project: str
    space_paths: tuple[str, ...] = ()  # as the caller wrote them; checked and normalised by the service
    memory_types: tuple[str, ...] = ()
    limit: int = 5
    min_score: float = 0.0
    graph_augmented: bool = False
    recall_mode: RecallMode = "summarized"
    kind: str = "conversation"
    order: Literal["relevance", "latest"] = "relevance"


@dataclass
class Recalled:
    results: list[dict[str, Any]]
    augmented: dict[str, Any] | None  # graph augmentation's report, when it was asked for
    watch: Stopwatch


class RecallService:
    def __init__(self, graph: GraphStore, recaller: Recaller, cache: RecallCache, work: ModelWork) -> None:
        self.graph, self.recaller, self.cache, self.work = graph, recaller, cache, work  # work: the model's readiness

    def handlers(self) -> dict[str, Handler]:
        return {"kumiho_memory_engage": self.engage, "kumiho_memory_recall": self.recall,
                "kumiho_memory_retrieve": self.retrieve, "kumiho_fulltext_search": self.fulltext}

    # -- the tools -------------------------------------------------------------------------------------
    def recall(self, args: RecallInput, client: Client) -> dict[str, Any]:
        request = RecallRequest(
            query=args.query, project=project_for(None, client), space_paths=tuple(args.space_paths or ()),
            memory_types=tuple(args.memory_types or ()), limit=min(args.limit, MAX_RESULTS),
            min_score=args.min_score, graph_augmented=args.graph_augmented, recall_mode=args.recall_mode)

        def run() -> dict[str, Any]:
            recalled = self.run(request)
            return {"results": recalled.results, "count": len(recalled.results), "recall_mode": request.recall_mode,
                    **_augmented(recalled), "timing_ms": recalled.watch.report()}

        return self.cached("kumiho_memory_recall", args.model_dump(), client, run)

    def engage(self, args: EngageInput, client: Client) -> dict[str, Any]:
        """Recall plus the prompt-ready ``context``; with ``include_insights`` the insight brief and the
        synthesis request (reference §4.5 step 7), which ``current_context``, ``goals`` and
        ``include_learned_sources`` feed: they shape the request the host's model answers, not the recall
        (without ``include_insights`` the first two are named in ``unused``; the input refuses the third)."""
        request = RecallRequest(
            query=args.query, project=project_for(None, client), space_paths=tuple(args.space_paths or ()),
            memory_types=tuple(args.memory_types or ()), limit=min(args.limit, MAX_RESULTS),
            min_score=args.min_score, graph_augmented=args.graph_augmented, recall_mode=args.recall_mode)

        def run() -> dict[str, Any]:
            recalled = self.run(request)
            result = self.engaged(recalled, request.recall_mode)
            if args.include_insights:
                with recalled.watch.stage("insight"):
                    result.update(self._insight(args, request, recalled))
            if unused := _unused(args):
                result["unused"] = unused
            result["timing_ms"] = recalled.watch.report()
            result["approx_payload_tokens"] = len(json.dumps(result, ensure_ascii=False, default=str)) // 4
            return result

        return self.cached("kumiho_memory_engage", args.model_dump(), client, run)

    def retrieve(self, args: RetrieveInput, client: Client) -> dict[str, Any]:
        """Modes search (relevance), latest (newest first) and first (the oldest match) — reference §4.6."""
        query = " ".join(p for p in (args.query or "", *(args.keywords or ()), *(args.topics or ())) if p.strip())
        mode = _mode_of(args, query)
        project = project_for(args.project, client)
        limit = min(args.limit, MAX_RESULTS)
        request = RecallRequest(
            query=query, project=project, space_paths=tuple(args.space_paths or ()),
            memory_types=tuple(args.memory_types or ()), limit=max(limit * 4, 20) if mode != "search" else limit,
            kind=args.memory_item_kind, order="latest" if mode == "latest" else "relevance")
        found = self.run(request).results
        if mode == "first":
            found = sorted(found, key=lambda r: r["created_at"])[:1]
            return {"item_krefs": [r["item_kref"] for r in found], "revision_krefs": [r["kref"] for r in found],
                    "spaces_used": sorted({r["space"] for r in found}), "mode": mode}
        found = found[:limit]
        if len(found) < limit and args.bundle_names:
            found += self._bundle_members(request, args.bundle_names, limit - len(found),
                                          {r["item_kref"] for r in found})
        result: dict[str, Any] = {
            "item_krefs": [r["item_kref"] for r in found], "revision_krefs": [r["kref"] for r in found],
            "scores": [r["score"] for r in found], "spaces_used": sorted({r["space"] for r in found}),
            "mode": mode, "project": project}
        if mode == "latest":
            result["created_at"] = [r["created_at"] for r in found]
        if args.include_revision_metadata:
            result["results"] = found
        return result

    def fulltext(self, args: FulltextSearchInput, client: Client) -> dict[str, Any]:
        """Typo-tolerant item search over the revisions' text and the items' names (``matched_in`` says which
        found an item); ``context`` is a project/space path prefix (by segments). ``auth_token`` is accepted
        for Kumiho's clients and ignored: a local appliance has no accounts."""
        context = args.context.strip().strip("/")
        project = context.split("/", 1)[0] if context else None
        where = SearchFilter(project=project, spaces=("/" + context,) if context else (),
                             kinds=(args.kind,) if args.kind else (), include_deprecated=args.include_deprecated)
        limit = min(args.limit, MAX_RESULTS)
        self.recaller.wait_for_index()
        hits = self.recaller.search.search(SearchRequest(args.query, where, "text", limit=limit * 3))
        best: dict[str, tuple[float, str]] = {}
        for hit in hits:
            best.setdefault(str(krefs.parse(hit.revision_kref).item()), (hit.score, "revision"))
        # items found by their names too, as Kumiho's search (and the gRPC door's Search) finds them
        named = self.graph.item_names(context + "/" if context else "", args.kind, args.include_deprecated)
        for item_kref, score in name_scores(args.query, named).items():
            if score > best.get(item_kref, (0.0, ""))[0]:
                best[item_kref] = (score, "item")
        ranked = sorted(best.items(), key=lambda kv: (-kv[1][0], kv[0]))[:limit]
        items = self.graph.items_by_kref([item_kref for item_kref, _ in ranked])  # one read for the page
        entries: list[tuple[Any, dict[str, Any]]] = []
        for item_kref, (score, leg) in ranked:
            item = items.get(item_kref)
            if item is None:  # deleted since it was indexed
                continue
            entries.append((item, {"item": views.item_view(item, args.include_metadata), "score": round(score, 4),
                                   "matched_in": leg}))
        if args.include_revision_metadata or args.include_artifact_metadata:
            self._with_revisions(entries, args)
        results = [entry for _, entry in entries]
        return {"results": results, "count": len(results), "total": len(best), "query": args.query,
                "search_mode": "fuzzy", "filters": {"context": args.context, "kind": args.kind}}

    # -- what other services call ----------------------------------------------------------------------
    def run(self, request: RecallRequest) -> Recalled:
        """One recall (no cache): the spaces named must exist; graph-augmented when asked and a model is
        there, else plain with a note saying why."""
        watch = Stopwatch()
        spaces = scopes(request.project, list(request.space_paths))
        check_spaces(self.graph, spaces)
        query = RecallQuery(
            query=request.query, project=request.project, spaces=spaces, kinds=(request.kind,),
            memory_types=tuple(t.lower() for t in request.memory_types), limit=request.limit,
            min_score=request.min_score, mode=request.recall_mode, order=request.order)
        augmented: dict[str, Any] | None = None
        with watch.stage("retrieval"):
            if request.graph_augmented and request.query.strip():
                unready = self.work.model_ready()
                if unready:
                    augmented = {"used": False, "note": f"unavailable: {unready}; plain recall was used"}
                else:
                    results, report = augmented_recall(self.recaller, self.graph, self.work.model, query,
                                                       timeout=self.work.options.reformulate_seconds, watch=watch)
                    augmented = {"used": True, **report}
            if augmented is None or not augmented["used"]:
                results = self.recaller.recall(query, watch)
        return Recalled(results, augmented, watch)

    def engaged(self, recalled: Recalled, mode: RecallMode) -> dict[str, Any]:
        """Engage's answer for a recall: the context string, the results, the krefs for reflect."""
        with recalled.watch.stage("context_assembly"):
            context = records.context(recalled.results, mode)
        return {"context": context, "results": recalled.results, "count": len(recalled.results),
                "recall_mode": mode, "source_krefs": [r["kref"] for r in recalled.results],
                "approx_tokens": len(context) // 4, **_augmented(recalled)}

    def cached(self, tool: str, key: Mapping[str, Any], client: Client,
               run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """The seed's 5-second dedup guard (MISSION D3): the same call again gets the same answer, while
        nothing was written; ``key`` is what makes two calls the same (the typed input, dumped)."""
        found = self.cache.key(tool, dict(key), client)
        hit = self.cache.get(found)
        if hit is not None:
            return {**hit, "cached": True}
        generation = self.cache.generation
        result = run()
        self.cache.put(found, result, generation)
        return result

    # -- helpers ---------------------------------------------------------------------------------------
    def _insight(self, args: EngageInput, request: RecallRequest, recalled: Recalled) -> dict[str, Any]:
        """insight_brief and synthesis_request (and learned_source_status): from the memories recalled, plus
        with include_learned_sources up to three experiences or pattern proposals (one more search)."""
        added: dict[str, Any] = {}
        learned: list[dict[str, Any]] = []
        if args.include_learned_sources:
            learned = self.recaller.recall(RecallQuery(
                query=request.query, project=request.project, spaces=scopes(request.project, list(request.space_paths)),
                kinds=LEARNED_KINDS, memory_types=tuple(t.lower() for t in request.memory_types),
                limit=MAX_LEARNED, min_score=request.min_score, mode=request.recall_mode), recalled.watch)
            added["learned_source_status"] = {
                "status": "ready" if learned else "no_sources", "source_krefs": [r["kref"] for r in learned],
                "kinds": list(LEARNED_KINDS), "retrieval_calls": 1, "semantic_support_verified": False}
        added["insight_brief"] = insights.brief(request.query, recalled.results)
        added["synthesis_request"] = insights.synthesis_request(
            request.query, [*learned, *recalled.results], current_context=args.current_context or "",
            goals=args.goals)
        return added

    def _bundle_members(self, request: RecallRequest, bundle_names: list[str], room: int,
                        seen: set[str]) -> list[dict[str, Any]]:
        """Members of the named bundles (score 0.5), within the requested spaces (reference §4.6)."""
        wanted_spaces = scopes(request.project, list(request.space_paths)) or ("/" + request.project,)
        wanted = {s for name in bundle_names for s in (name, name.casefold())}
        added: list[dict[str, Any]] = []
        for space in wanted_spaces:
            page = self.graph.search_items(context_filter=space.strip("/"), kind_filter="bundle")
            for bundle in page.items:
                if bundle.item_name not in wanted:
                    continue
                members, _ = self.graph.bundle_members(bundle.kref)
                current = self.graph.current_revisions([m.item_kref for m in members])
                for item, revision in current.items():
                    if (item in seen or revision.deprecated or len(added) >= room
                            or not item.endswith("." + request.kind)):
                        continue
                    seen.add(item)
                    space_name = item.split("//", 1)[1].rsplit("/", 1)[0]
                    added.append(records.memory(revision, 0.5, None, space_name, "summarized"))
        return added

    def _with_revisions(self, entries: list[tuple[Any, dict[str, Any]]], args: FulltextSearchInput) -> None:
        """Each result's current revision and (include_artifact_metadata) its artifacts: two reads in all."""
        current = self.graph.current_revisions([item.kref for item, _ in entries])
        artifacts = (self.graph.artifacts_of([r.kref for r in current.values()])
                     if args.include_artifact_metadata else {})
        for item, entry in entries:
            revision = current.get(item.kref)
            if args.include_revision_metadata:
                entry["revision"] = views.revision_view(revision) if revision else None
            if args.include_artifact_metadata:
                entry["artifacts"] = [views.artifact_view(a) for a in artifacts.get(revision.kref, [])] \
                    if revision else []


def _augmented(recalled: Recalled) -> dict[str, Any]:
    return {"graph_augmented": recalled.augmented} if recalled.augmented is not None else {}


UNUSED = "only the insight request (include_insights: true) reads it"


def _unused(args: EngageInput) -> dict[str, str]:
    """current_context and goals given without include_insights: accepted (Kumiho's clients may always send
    current_context), and named in the answer's ``unused`` so the caller knows they changed nothing."""
    if args.include_insights:
        return {}
    return {field: UNUSED for field, given in (("current_context", args.current_context), ("goals", args.goals))
            if given}


def _mode_of(args: RetrieveInput, query: str) -> str:
    """The mode asked for (the input has normalised it); none: first when the query asks for the first."""
    if args.mode:
        return args.mode
    return "first" if re.search(r"\b(first|earliest|oldest|initial)\b", query.lower()) else "search"
