"""The health of the appliance's parts, as ``GET /api/_health`` reports them (Kumiho's contract: Revka's
``revka doctor`` reads ``neo4j.status``, ``event_stream.status`` and ``embedding.status`` and shows anything
but ``"ok"`` as a warning).

Each check says ``ok``, ``degraded`` (works, but slowly or partly: busy, rebuilding, a failed sync round) or
``error`` (does not work), with a short detail for people and never an exception's text. A check that does
not answer within ``timeout`` seconds is ``degraded`` (busy) rather than holding the request: each runs on its
own thread, and a check still running from an earlier request is not started again. The embedder is asked to
embed a test sentence at most once per ``embed_ttl`` seconds (the answer is kept in between).
"""

from __future__ import annotations

import concurrent.futures
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from appliance.core.ports import Embedder
from appliance.feed import EventFeed
from appliance.graph import GraphStore
from appliance.search.service import SearchService
from appliance.search.worker import IndexWorker

log = logging.getLogger(__name__)
Status = Literal["ok", "degraded", "error"]
PROBE_TEXT = "kumiho-ce health check"


@dataclass(frozen=True)
class Check:
    status: Status
    detail: str | None = None


class _Bounded:
    """Runs one check at a time on a thread of its own (a daemon: a check stuck for ever never holds the
    process at exit) and waits for it at most ``timeout`` seconds."""

    def __init__(self, name: str) -> None:
        self._name = name
        self._pending: concurrent.futures.Future[Check] | None = None
        self._lock = threading.Lock()

    def run(self, check: Callable[[], Check], timeout: float, busy: str) -> Check:
        with self._lock:
            if self._pending is None or self._pending.done():
                self._pending = concurrent.futures.Future()
                threading.Thread(target=self._call, args=(check, self._pending), name=f"health-{self._name}",
                                 daemon=True).start()
            pending = self._pending
        try:
            return pending.result(timeout)
        except concurrent.futures.TimeoutError:
            return Check("degraded", busy)

    @staticmethod
    def _call(check: Callable[[], Check], result: concurrent.futures.Future[Check]) -> None:
        result.set_result(check())  # every check catches its own failures


class HealthProbe:
    def __init__(self, graph: GraphStore, search: SearchService, feed: EventFeed, worker: IndexWorker, *,
                 timeout: float = 1.0, embed_ttl: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.graph, self.search, self.feed, self.worker = graph, search, feed, worker
        self.timeout, self.embed_ttl, self._clock = timeout, embed_ttl, clock
        self._graph_check = _Bounded("graph")
        self._embed_check = _Bounded("embedding")
        self._embedded: tuple[float, Check] | None = None  # (when, what) of the last embedder check

    def graph_store(self) -> Check:
        return self._graph_check.run(self._read_graph, self.timeout,
                                     f"the graph store did not answer a read within {self.timeout:g} s (busy)")

    def _read_graph(self) -> Check:
        try:
            self.graph.schema_version()
        except Exception:
            log.warning("health: the graph store failed a read", exc_info=True)
            return Check("error", "the graph store does not answer reads; see the appliance log")
        return Check("ok")

    def event_stream(self) -> Check:
        if not self.feed.running:
            return Check("error", "the event feed is stopped (the appliance is shutting down)")
        return Check("ok")

    def embedding(self) -> Check:
        kept = self._embedded
        if kept is not None and self._clock() - kept[0] < self.embed_ttl:
            return kept[1]
        found = self._embed_check.run(self._embed, self.timeout,
                                      f"the embedder did not answer within {self.timeout:g} s (busy)")
        if found.status != "degraded":  # a busy embedder is asked again next time
            self._embedded = (self._clock(), found)
        return found

    @property
    def embedder(self) -> Embedder:
        return self.search.embedder  # the one search uses

    def _embed(self) -> Check:
        try:
            rows = self.embedder.embed([PROBE_TEXT])
        except Exception:
            log.warning("health: the embedder failed", exc_info=True)
            return Check("error", "the embedder failed to embed a test sentence; see the appliance log")
        if getattr(rows, "shape", None) != (1, self.embedder.dim) or not all(math.isfinite(v) for v in rows[0]):
            return Check("error", f"the embedder returned no usable {self.embedder.dim}-value vector")
        return Check("ok")

    def search_index(self) -> Check:
        if not self.worker.running:
            return Check("error", "the search index sync is stopped: new memories are not searchable")
        if self.worker.rebuilding is not None:
            return Check("degraded", "the search index was damaged and is being rebuilt from the graph")
        if self.worker.last_error is not None:
            return Check("degraded", "the last search index sync round failed; it is retried (see the appliance "
                                     "log)")
        return Check("ok")

