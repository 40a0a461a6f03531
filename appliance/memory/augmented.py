"""Graph-augmented recall (reference §4.7): the model rephrases the query from two or three angles, each
angle is recalled on its own, the results are merged by best score, and a one-hop walk over the provenance
edges of the top results adds their neighbours. Without a usable model only the original query is
recalled, and the answer says why."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from appliance.core.ports import ChatModel, ModelError, answer_budget
from appliance.errors import NotFound
from appliance.graph import GraphStore
from appliance.inference import prompts
from appliance.memory import records
from appliance.memory.recall import Recaller, RecallQuery, Stopwatch

ANGLES_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"queries": {"type": "array", "minItems": 1, "maxItems": 3,
                               "items": {"type": "string", "minLength": 3, "maxLength": 100}}},
    "required": ["queries"], "additionalProperties": False,
}
FOLLOWED = frozenset({"DERIVED_FROM", "DEPENDS_ON", "REFERENCED", "CONTAINS", "CREATED_FROM", "SUPERSEDES",
                      "SUPPORTS", "CONTRADICTS"})
# belief edges first, so a contradiction or a supersession is seen before the budget runs out
_EDGE_ORDER = {"CONTRADICTS": 0, "SUPERSEDES": 1}
_DISPUTE_BASES = {"agent", "evidence-assessor"}
SEEDS = 5
TRAVERSAL_SECONDS = 30.0


def angles(model: ChatModel, query: str, timeout: float) -> list[str]:
    """Up to three other phrasings of ``query`` (never the query itself)."""
    answer = model.complete_json(prompts.render("reformulate_query", query=query), ANGLES_SCHEMA,
                                 max_tokens=answer_budget(ANGLES_SCHEMA), timeout=timeout)
    seen = {query.casefold().strip()}
    found = []
    for text in answer["queries"]:
        text = " ".join(text.split())
        if text and text.casefold() not in seen:
            seen.add(text.casefold())
            found.append(text)
    return found


def augmented_recall(recaller: Recaller, graph: GraphStore, model: ChatModel, q: RecallQuery, *,
                     timeout: float, watch: Stopwatch | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(results, report): the merged recall plus graph neighbours (score 0, ``graph_augmented: true``)."""
    watch = watch or Stopwatch()
    report: dict[str, Any] = {"queries": [q.query]}
    try:
        with watch.stage("query_reformulation"):
            report["queries"] += angles(model, q.query, timeout)
    except ModelError as exc:
        report["note"] = f"no reformulation ({exc.message}); the original query alone was recalled"
    merged: dict[str, dict[str, Any]] = {}
    for text in report["queries"]:
        for found in recaller.recall(dataclasses.replace(q, query=text), watch):
            kept = merged.get(found["kref"])
            if kept is None or found["score"] > kept["score"]:
                merged[found["kref"]] = {**found, "angle": text} if text != q.query else found
    ranked = sorted(merged.values(), key=lambda r: -r["score"])[: 2 * q.limit]
    with watch.stage("graph_edges"):
        neighbours = _neighbours(graph, ranked, q, time.monotonic() + TRAVERSAL_SECONDS)
    report["neighbours"] = len(neighbours)
    return (ranked[: q.limit] + neighbours)[: 3 * q.limit], report


def _neighbours(graph: GraphStore, ranked: list[dict[str, Any]], q: RecallQuery,
                deadline: float) -> list[dict[str, Any]]:
    seen_items = {r["item_kref"] for r in ranked[: q.limit]}
    by_kref = {r["kref"]: r for r in ranked}
    added: list[dict[str, Any]] = []
    for seed in ranked[:SEEDS]:
        if time.monotonic() > deadline or len(added) >= q.limit:
            break
        edges = [e for e in graph.get_edges(seed["kref"], direction="both").items if e.edge_type in FOLLOWED]
        edges.sort(key=lambda e: (_EDGE_ORDER.get(e.edge_type, 2), e.edge_type, e.target_kref))
        for edge in edges:
            other = edge.target_kref if edge.source_kref == seed["kref"] else edge.source_kref
            if edge.edge_type == "CONTRADICTS" and edge.metadata.get("basis") in _DISPUTE_BASES:
                seed.setdefault("contested_by", []).append(other)
                if other in by_kref:
                    by_kref[other].setdefault("contested_by", []).append(seed["kref"])
            try:
                revision = graph.get_revision(other)
            except NotFound:
                continue
            if revision.deprecated or revision.item_kref in seen_items or not _in_scope(revision.item_kref, q):
                continue
            seen_items.add(revision.item_kref)
            space = revision.item_kref.split("//", 1)[1].rsplit("/", 1)[0]
            added.append({**records.memory(revision, 0.0, None, space, q.mode), "graph_augmented": True,
                          "edge_type": edge.edge_type, "from_kref": seed["kref"]})
            if len(added) >= q.limit:
                break
    return added


def _in_scope(item_kref: str, q: RecallQuery) -> bool:
    path, _, name = item_kref.split("//", 1)[1].rpartition("/")
    path = "/" + path
    if name.rsplit(".", 1)[-1] not in q.kinds:
        return False
    scopes = q.spaces or ("/" + q.project,)
    return any(path == s or path.startswith(s + "/") for s in scopes)
