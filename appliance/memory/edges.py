"""Edge discovery by implication queries (reference §4.12): the model imagines future situations in which a
memory would matter, each becomes a search within the memory's scope, and the best hits get an edge that
records the query and the score."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from appliance.core import kref as krefs
from appliance.core.ports import ChatModel, ModelTimeout, answer_budget
from appliance.graph import GraphStore
from appliance.inference import prompts
from appliance.memory import records
from appliance.memory.recall import Recaller, RecallQuery

# Capture types whose memories get edge discovery after reflect (reference §4.9 step 6).
EDGE_WORTHY = frozenset({"decision", "architecture", "implementation", "synthesis", "reflection"})
HITS_PER_QUERY = 3
BUDGET_SECONDS = 60.0  # the whole discovery, model call included (reference: overall 60 s)
MEMORY_CHARS = 2000


def queries_schema(count: int) -> dict[str, Any]:
    return {"type": "object", "properties": {"queries": {
        "type": "array", "minItems": 1, "maxItems": count,
        "items": {"type": "string", "minLength": 3, "maxLength": 80}}},
        "required": ["queries"], "additionalProperties": False}


def implication_queries(model: ChatModel, memory: str, count: int, *, timeout: float,
                        cancel: threading.Event | None = None) -> list[str]:
    """Up to ``count`` distinct short queries for future situations in which ``memory`` would matter."""
    schema = queries_schema(count)
    answer = model.complete_json(prompts.render("implication_queries", memory=memory[:MEMORY_CHARS], count=count),
                                 schema, max_tokens=answer_budget(schema), timeout=timeout, cancel=cancel)
    return list(dict.fromkeys(" ".join(q.split()) for q in answer["queries"] if q.strip()))


@dataclass(frozen=True)
class EdgeRequest:
    revision_kref: str
    spaces: tuple[str, ...] = ()  # normalised space paths; empty = derived from the kref
    max_queries: int = 5
    max_edges: int = 3
    min_score: float = 0.3
    edge_type: str = "REFERENCED"
    summary: str = ""  # what the model reads; the revision's title and summary when empty


def default_scope(revision_kref: str) -> tuple[str, ...]:
    """The memory's own space (every path segment but the item), or its project for a root item."""
    return (krefs.parse(revision_kref).space_path,)


class EdgeDiscovery:
    def __init__(self, graph: GraphStore, recaller: Recaller, model: ChatModel) -> None:
        self.graph, self.recaller, self.model = graph, recaller, model

    def discover(self, request: EdgeRequest, *, budget: float = BUDGET_SECONDS,
                 cancel: threading.Event | None = None) -> tuple[list[dict[str, Any]], list[str]]:
        """(edges made, the queries the model wrote)."""
        deadline = time.monotonic() + budget
        source = self.graph.get_revision(request.revision_kref)
        meta = source.metadata
        memory = request.summary.strip() or f"{meta.get('title', '')}\n{records.summary_of(meta)}".strip()
        queries = implication_queries(self.model, memory, request.max_queries, timeout=budget, cancel=cancel)
        project = krefs.parse(source.kref).project
        best: dict[str, tuple[float, str]] = {}  # target revision kref -> (score, query)
        for query in queries:
            if time.monotonic() > deadline:
                raise ModelTimeout(f"edge discovery passed its {budget:g} s budget while searching")
            hits = self.recaller.recall(RecallQuery(query=query, project=project,
                                                    spaces=request.spaces or default_scope(source.kref),
                                                    limit=HITS_PER_QUERY, min_score=request.min_score))
            for hit in hits:
                if hit["item_kref"] == source.item_kref:
                    continue
                if hit["score"] > best.get(hit["kref"], (-1.0, ""))[0]:
                    best[hit["kref"]] = (hit["score"], query)
        chosen = sorted(best.items(), key=lambda kv: -kv[1][0])[: request.max_edges]
        edges = []
        for target, (score, query) in chosen:
            self.graph.create_edge(source.kref, target, request.edge_type,
                                   {"reason": f"LLM implication: {query[:100]}", "query": query[:200],
                                    "score": f"{score:.3f}", "basis": "implication-query"})
            edges.append({"source": source.kref, "target": target, "edge_type": request.edge_type,
                          "query": query, "score": round(score, 4)})
        return edges, queries
