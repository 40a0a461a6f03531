"""Prometheus metrics at ``GET /metrics`` (the text exposition format, ``prometheus_client``).

Every appliance has its own registry (``Metrics.registry``), so that several in one process (tests) never share
a series. Label values are bounded: HTTP routes are Litestar's route templates (``/api/v1/jobs/{job_id}``, never
the path a client sent; a request no route matched is ``unmatched``), methods the HTTP ones, MCP tools the names
the appliance serves (``unknown`` for any other), error codes the appliance's own.

What the appliance is doing is read when Prometheus scrapes (``StateCollector``): the job queue, the index sync
(its pending count is kept as writes commit, so reading it costs nothing) and, cached for ``SIZES_TTL_SECONDS``,
the store sizes (two counts in the graph and one in the index: a few milliseconds). docs/operations.md lists
every metric.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from litestar import Response, get
from litestar.datastructures import State
from litestar.handlers import HTTPRouteHandler
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector

from appliance import __version__
from appliance.core.ports import ModelError
from appliance.errors import KumihoError
from appliance.jobs import Job, JobChange
from appliance.server.door import ASGIApp, Message, Receive, Scope, Send

if TYPE_CHECKING:
    from appliance.app import Services

SIZES_TTL_SECONDS = 5.0
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
UNMATCHED = "unmatched"  # the route label of a request no route matched (refused at the door, or unknown path)
# requests take milliseconds (reads) to minutes (a consolidation that waits for the model)
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300)
JOB_LANES = ("interactive", "background")
TEXT_FORMAT = "text/plain; version=0.0.4"  # the text format every Prometheus server reads


def error_codes() -> frozenset[str]:
    """Every error code the appliance answers with (its error classes'), the bound of the ``code`` label."""
    found: set[str] = set()
    pending: list[type[KumihoError]] = [KumihoError]
    while pending:
        cls = pending.pop()
        found.add(cls.code)
        pending += cls.__subclasses__()
    return frozenset(found | {ModelError.code})


class Metrics:
    """The appliance's registry and the counters the front doors move."""

    def __init__(self, services: Services, tools: Iterable[str]) -> None:
        self.registry = CollectorRegistry()
        self.tools = frozenset(tools)
        self.codes = error_codes()
        self.http_requests = Counter("kumiho_http_requests", "HTTP requests answered, by method, route template "
                                     "and status", ["method", "route", "status"], registry=self.registry)
        self.http_seconds = Histogram("kumiho_http_request_duration_seconds", "Time from a request's arrival to "
                                      "the end of its answer, by method and route template", ["method", "route"],
                                      buckets=HTTP_BUCKETS, registry=self.registry)
        self.tool_calls = Counter("kumiho_mcp_tool_calls", "MCP tool calls, by tool and outcome (ok or error)",
                                  ["tool", "outcome"], registry=self.registry)
        self.tool_errors = Counter("kumiho_mcp_tool_errors", "MCP tool calls answered with an error, by tool and "
                                   "error code (internal: a defect; the log has the traceback)", ["tool", "code"],
                                   registry=self.registry)
        self.tool_seconds = Histogram("kumiho_mcp_tool_duration_seconds", "How long MCP tool calls took, by tool",
                                      ["tool"], buckets=HTTP_BUCKETS, registry=self.registry)
        self.jobs_finished = Counter("kumiho_jobs_finished", "Background jobs that ended, by state (done, failed, "
                                     "cancelled)", ["state"], registry=self.registry)
        for state in ("done", "failed", "cancelled"):
            self.jobs_finished.labels(state)
        for collector in services.model_metrics.collectors():
            self.registry.register(collector)
        self.registry.register(StateCollector(services))
        services.jobs.subscribe(self._job_changed)

    def _job_changed(self, change: JobChange, job: Job) -> None:
        if change in ("done", "failed", "cancelled"):
            self.jobs_finished.labels(change).inc()

    def tool_called(self, name: str, seconds: float, error_code: str | None) -> None:
        """One MCP tool call answered (``error_code``: None when it succeeded)."""
        tool = name if name in self.tools else "unknown"
        self.tool_seconds.labels(tool).observe(seconds)
        self.tool_calls.labels(tool, "ok" if error_code is None else "error").inc()
        if error_code is not None:
            self.tool_errors.labels(tool, error_code if error_code in self.codes else "other").inc()

    def http_answered(self, method: str, route: str, status: int, seconds: float) -> None:
        method = method if method in HTTP_METHODS else "OTHER"
        self.http_requests.labels(method, route, str(status)).inc()
        self.http_seconds.labels(method, route).observe(seconds)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

    def middleware(self, app: ASGIApp) -> ASGIApp:
        """Count and time every HTTP request by its route template (Litestar writes it into the scope when it
        routes the request; the door's refusals and unknown paths have none: ``unmatched``)."""
        async def measured(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            started = time.perf_counter()
            status = [500]  # what the client gets when the app fails before it answers (uvicorn sends a 500)

            async def sending(message: Message) -> None:
                if message["type"] == "http.response.start":
                    status[0] = int(message["status"])
                await send(message)

            try:
                await app(scope, receive, sending)
            finally:
                self.http_answered(str(scope.get("method", "")), route_of(scope), status[0],
                                   time.perf_counter() - started)

        return measured


@dataclass(frozen=True)
class Sizes:
    items: int
    revisions: int
    index_rows: int | None  # None: the index cannot be read (a damaged one is being rebuilt)


def route_of(scope: Scope) -> str:
    """The route template of a request Litestar routed (a mounted app such as ``/mcp`` has none of its own: the
    path its handler is mounted at), else ``UNMATCHED``."""
    template = scope.get("path_template")
    if template:
        return str(template)
    handler = scope.get("route_handler")
    mounted = sorted(getattr(handler, "paths", None) or ())
    return str(mounted[0]) if mounted else UNMATCHED


class StateCollector(Collector):
    """What the appliance holds and is doing, read when Prometheus scrapes."""

    def __init__(self, services: Services, ttl: float = SIZES_TTL_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.services, self.ttl, self.clock = services, ttl, clock
        self._lock = threading.Lock()
        self._sizes: tuple[float, Sizes] | None = None

    def sizes(self) -> Sizes:
        """Items, revisions and index rows, read at most once per ``ttl`` (scrapes from several Prometheus
        servers, or a quick one, cost nothing more)."""
        with self._lock:
            if self._sizes is not None and self.clock() - self._sizes[0] < self.ttl:
                return self._sizes[1]
            graph = self.services.graph.sizes()
            counted = Sizes(graph["items"], graph["revisions"], self.services.index.count_if_readable())
            self._sizes = (self.clock(), counted)
            return counted

    def collect(self) -> Iterator[Metric]:
        services = self.services
        info = GaugeMetricFamily("kumiho_build_info", "The appliance's version (the value is 1)",
                                 labels=["version"])
        info.add_metric([__version__], 1)
        yield info
        sizes = self.sizes()
        yield _gauge("kumiho_store_items", "Items in the graph (memories and other entities)", sizes.items)
        yield _gauge("kumiho_store_revisions", "Revisions in the graph", sizes.revisions)
        if sizes.index_rows is not None:  # absent while a damaged index is set aside and rebuilt
            yield _gauge("kumiho_index_rows", "Rows in the search index", sizes.index_rows)
        worker = services.index_worker
        yield _gauge("kumiho_index_pending_revisions", "Revisions committed whose search index rows are not "
                     "written yet (the index lag; kept exact as writes commit)", worker.pending())
        yield _gauge("kumiho_index_staged_rows", "Of those, rows searchable already (held in memory) whose index "
                     "write is queued", worker.staged())
        yield _gauge("kumiho_index_rebuilding", "1 while a damaged search index is rebuilt from the graph",
                     int(worker.rebuilding is not None))
        yield _gauge("kumiho_index_sync_failing", "1 when the last index sync round failed (it is retried)",
                     int(worker.last_error is not None))
        failures = CounterMetricFamily("kumiho_index_sync_failures", "Index sync rounds that failed since start")
        failures.add_metric([], worker.failed_rounds)
        yield failures
        jobs = GaugeMetricFamily("kumiho_jobs", "Background jobs queued or running, by lane and state",
                                 labels=["lane", "state"])
        counts = {(lane, state): 0 for lane in JOB_LANES for state in ("queued", "running")}
        for job in services.jobs.list():
            if job.active:
                counts[(job.lane, job.state)] = counts.get((job.lane, job.state), 0) + 1
        for (lane, state), count in sorted(counts.items()):
            jobs.add_metric([lane, state], count)
        yield jobs
        yield _gauge("kumiho_event_stream_subscribers", "Event streams open (GET /api/v1/events)",
                     services.feed.state()["subscribers"])


def _gauge(name: str, documentation: str, value: float) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, documentation, value=value)


def metrics_route() -> HTTPRouteHandler:
    """``GET /metrics`` (a new handler for each app): the text exposition format. Like the API routes (all but
    ``/api/_live``), it passes the Host and Origin checks and, beyond loopback or with ``require_token``, needs the
    bearer token (Prometheus: ``authorization: credentials_file``). Not in the OpenAPI document: it is not JSON."""
    @get("/metrics", summary="Prometheus metrics", include_in_schema=False, sync_to_thread=True)
    def metrics_endpoint(state: State) -> Response[bytes]:
        metrics: Metrics = state.metrics
        return Response(metrics.exposition(), media_type=TEXT_FORMAT)  # Litestar adds "; charset=utf-8"

    return metrics_endpoint
