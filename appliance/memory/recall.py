"""Recall (reference §4.4): search, then one memory per item (published else latest), priors, the seed's
time decay, supersession order and diversity (appliance/core/ranking.py), as agent-facing dicts."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from appliance.core import ranking
from appliance.core.kref import parse
from appliance.core.model import Revision
from appliance.core.ranking import Candidate
from appliance.core.search import SearchFilter, SearchRequest
from appliance.errors import NotFound
from appliance.graph import GraphStore
from appliance.memory import records
from appliance.search.service import SearchService

# Recall of conversation memories (engage's and recall's default kind) also finds the Memory API's entries
# (kind ``memory``, the kind Revka's ``revka memory`` reads): they are memories like any other.
ALSO_RECALLED = {"conversation": ("memory",)}
POOL_FACTOR = 4  # search hits per requested result: collapse, filters and diversity need room
MIN_POOL = 20
# From this many index rows recall reads current revisions by key (Recaller._current); below it the graph's tag
# join is cheaper (measured, benchmarks/current_read_bench.py: 40 items, join 19 ms vs key reads 29 ms at 10k
# items, 96 ms vs 30 ms at 100k).
KEY_READS_FROM = 20_000


@dataclass(frozen=True)
class RecallQuery:
    query: str
    project: str
    spaces: tuple[str, ...] = ()  # normalised space paths; empty = the whole project
    kinds: tuple[str, ...] = ("conversation",)
    memory_types: tuple[str, ...] = ()
    limit: int = 5
    min_score: float = 0.0
    mode: str = "summarized"  # context rendering: summarized | full
    order: str = "relevance"  # relevance | latest
    half_lives: dict[str, float] = field(default_factory=dict)
    # The Memory API's narrower recall: only memories directly in ``spaces`` (not in spaces below them: a
    # namespace's space holds the others' spaces), created in [since, until], whose metadata holds each pair.
    exact_spaces: bool = False
    since: datetime | None = None
    until: datetime | None = None
    metadata_equals: tuple[tuple[str, str], ...] = ()
    pool: int = 0  # search hits to rank; 0 = limit × POOL_FACTOR (at least MIN_POOL)


class Stopwatch:
    """Milliseconds spent per stage of one call (engage's ``timing_ms``); a stage run twice adds up."""

    def __init__(self) -> None:
        self.started = time.perf_counter()
        self.stages: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.stages[name] = self.stages.get(name, 0.0) + (time.perf_counter() - start) * 1000

    def report(self) -> dict[str, float]:
        total = (time.perf_counter() - self.started) * 1000
        return {**{name: round(ms, 1) for name, ms in self.stages.items()}, "total": round(total, 1)}


def check_spaces(graph: GraphStore, spaces: tuple[str, ...]) -> None:
    """Every space a call names must exist (a typo would otherwise recall nothing, silently); a project's
    root is always fine: an empty or new project just recalls nothing."""
    for space in spaces:
        if space.count("/") == 1:
            continue
        try:
            graph.get_space(space)
        except NotFound:
            raise NotFound(f"space_paths: {space} does not exist; name an existing space (engage results "
                           "show theirs) or the project itself for everything", field="space_paths") from None


class Recaller:
    def __init__(self, graph: GraphStore, search: SearchService, *, wait_for_index: Callable[[], object],
                 clock: Callable[[], datetime], default_half_life: float = ranking.DEFAULT_HALF_LIFE_DAYS
                 ) -> None:
        self.graph, self.search = graph, search
        self.wait_for_index = wait_for_index  # read-your-writes: what was stored before the call is found
        self._clock, self.default_half_life = clock, default_half_life
        self.key_reads_from = KEY_READS_FROM

    def recall(self, q: RecallQuery, watch: Stopwatch | None = None) -> list[dict[str, Any]]:
        """The ranked memories; ``watch`` (when given) learns how long the search and the graph read took."""
        ranked = self.ranked(q, watch)
        return [records.memory(revision, c.score, c.base_score, _space_of(revision), q.mode) for c, revision in ranked]

    def ranked(self, q: RecallQuery, watch: Stopwatch | None = None) -> list[tuple[Candidate, Revision]]:
        """The ranked candidates with the revision each one shows."""
        if not q.query.strip():
            return []
        watch = watch or Stopwatch()
        with watch.stage("search"):
            self.wait_for_index()
            kinds = tuple(dict.fromkeys(k for kind in q.kinds for k in (kind, *ALSO_RECALLED.get(kind, ()))))
            # The Memory API narrows the search itself (its space alone, its category: stored lower-cased, as the
            # index holds it), so that better matches elsewhere do not fill the pool and leave its entries out.
            where = SearchFilter(project=q.project, spaces=q.spaces or ("/" + q.project,), kinds=kinds,
                                 exact_spaces=q.exact_spaces and bool(q.spaces),
                                 memory_types=q.memory_types if q.exact_spaces else ())
            pool = q.pool or max(q.limit * POOL_FACTOR, MIN_POOL)
            hits = self.search.search(SearchRequest(q.query, where, "hybrid", limit=pool))
        best: dict[str, float] = {}
        for hit in hits:  # an item scores as its best-matching revision
            item = str(parse(hit.revision_kref).item())
            best[item] = max(best.get(item, 0.0), hit.score)
        with watch.stage("revisions"):
            current = self._current(list(best))
        candidates = []
        for item, revision in current.items():
            kind_ok = not q.memory_types or records.memory_type(revision.metadata) in q.memory_types
            if revision.deprecated or not kind_ok or not _narrowed(q, revision):
                continue
            meta = revision.metadata
            candidates.append(Candidate(
                revision.kref, item, best[item], memory_type=records.memory_type(meta),
                created_at=revision.created_at, tags=tuple(revision.tags),
                evidence_level=meta.get("evidence_level", ""),
                superseded_by=meta.get("superseded_by_kref") or meta.get("superseded_by", ""),
                text=f"{meta.get('title', '')} {records.summary_of(meta)}",
                importance=_importance(meta), decays=_entry_decays(meta)))
        ranked = ranking.rank(candidates, now=self._clock(), limit=q.limit, min_score=q.min_score,
                              half_lives=q.half_lives, default_half_life=self.default_half_life)
        if q.order == "latest":
            ranked.sort(key=lambda c: (c.created_at, c.score), reverse=True)
        return [(c, current[c.item_kref]) for c in ranked]

    def _current(self, item_krefs: list[str]) -> dict[str, Revision]:
        """Item kref → the revision a recall shows (published, else latest), as ``current_revisions`` reads
        it, but chosen from the resident index's rows and then read by primary key: the graph's tag join scans
        every TAGGED edge (hundreds of ms at 100k items), the key lookups do not.
        The index's tags are current here: ``ranked`` called ``wait_for_index`` first, which waits for every
        commit nobody staged (a tag move, a deprecation or a deletion through the graph API is synced before
        it returns), and a staged write is in the resident rows already, its new revision tagged ``latest``
        with the highest number (current_of picks it even while the old row still says ``latest``). Items the
        index does not know, or whose chosen revision the graph no longer has, are read the old way, and so is
        everything while the index holds fewer than ``key_reads_from`` rows (the join is cheaper there)."""
        if len(self.search.index.resident()) < self.key_reads_from:
            return self.graph.current_revisions(item_krefs)
        chosen = self.search.index.current_of(item_krefs)
        current = {revision.item_kref: revision
                   for revision in self.graph.revisions_by_kref(dict(chosen.values())).values()}
        missing = [item for item in item_krefs if item not in current]
        if missing:
            current.update(self.graph.current_revisions(missing))
        return current


def _space_of(revision: Revision) -> str:
    return revision.item_kref.split("//", 1)[1].rsplit("/", 1)[0]


def _narrowed(q: RecallQuery, revision: Revision) -> bool:
    """Whether a memory passes the Memory API's narrower filters (see RecallQuery)."""
    if q.exact_spaces and "/" + _space_of(revision) not in q.spaces:
        return False
    if any(revision.metadata.get(key) != value for key, value in q.metadata_equals):
        return False
    if q.since is None and q.until is None:
        return True
    try:
        created = datetime.fromisoformat(revision.created_at)
    except ValueError:
        return False
    return (q.since is None or created >= q.since) and (q.until is None or created <= q.until)


def _importance(meta: dict[str, str]) -> float:
    """A Memory API entry's importance (0..1; 0 when absent or unreadable)."""
    try:
        value = float(meta.get("importance") or 0.0)
    except ValueError:
        return 0.0
    return value if 0.0 <= value <= 1.0 else 0.0


def _entry_decays(meta: dict[str, str]) -> bool | None:
    """A Memory API entry decays unless its category is core (custom categories too); other memories decay
    by their type (None)."""
    if meta.get("kind") == "memory" and meta.get("category"):
        return meta["category"] != "core"
    return None
