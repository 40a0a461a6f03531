"""Liveness, readiness and health. ``/api/_live`` is what Kumiho's SDK probes to find a local CE;
``/api/_health`` is Kumiho's component report that Revka's ``revka doctor`` reads (``appliance.health``)."""

from __future__ import annotations

from typing import Any, Literal

from litestar import Controller, get
from litestar.datastructures import State
from pydantic import BaseModel, Field

from appliance import __version__
from appliance.admin_api.health_shapes import Live, Ready, SearchReadiness
from appliance.health import Check, HealthProbe

DEPLOYMENT_MODE: Literal["self_hosted_ce"] = "self_hosted_ce"
ComponentStatus = Literal["ok", "degraded", "error"]


class Component(BaseModel):
    status: ComponentStatus = Field(description="\"ok\", \"degraded\" (works, but busy or partly) or \"error\"")
    detail: str | None = Field(None, description="what is wrong, for people; absent when ok")


class GraphHealth(Component):
    backend: Literal["kuzu"] = Field("kuzu", description="the graph store behind Kumiho's `neo4j` key: embedded Kùzu")


class EventStreamHealth(Component):
    subscribers: int = Field(description="event streams open now (GET /api/v1/events)")
    max_subscribers: int = Field(description="the events.max_subscribers setting")
    last_event_id: int = Field(description="the sequence number of the newest graph event")


class EmbeddingHealth(Component):
    model: str = Field(description="the embedding model's id")
    dim: int = Field(description="values per embedding vector")


class HealthReport(BaseModel):
    status: Literal["ok", "degraded"] = Field(description="\"ok\" when every component is ok")
    deployment_mode: Literal["self_hosted_ce"] = DEPLOYMENT_MODE
    version: str
    neo4j: GraphHealth = Field(description="the graph store answers a read (Kumiho's key name)")
    event_stream: EventStreamHealth = Field(description="the live event feed runs")
    embedding: EmbeddingHealth = Field(description="the embedder embeds a test sentence (checked at most every "
                                                   "30 s)")
    search_index: Component = Field(description="the background index sync runs and its last round succeeded")


class HealthController(Controller):
    path = "/api"
    tags = ("health",)

    @get("/_live", summary="Liveness (no token needed)", sync_to_thread=False)
    def live(self) -> Live:
        return Live(status="ok", deployment_mode=DEPLOYMENT_MODE, version=__version__)

    @get("/_ready", summary="Readiness: the graph is open and its schema current", sync_to_thread=True)
    def ready(self, state: State) -> Ready:
        services = state.services
        worker = services.index_worker
        return Ready(status="ready", deployment_mode=DEPLOYMENT_MODE, version=__version__,
                     schema_version=services.graph.schema_version(),
                     search=SearchReadiness(embedder=services.index.model_id, rows=services.index.count_if_readable(),
                                            pending=worker.pending(), sync_error=worker.sync_error(),
                                            **worker.state()))

    @get("/_health", summary="Component health: graph store, event feed, embedder, search index",
         description="Kumiho's health report (`neo4j`, `event_stream` and `embedding` each carry a `status`); "
                     "always 200 while the appliance answers; `status` is \"degraded\" when any part is not ok. "
                     "Answers within about a second: a part that does not answer in time is reported busy.",
         sync_to_thread=True)
    def health(self, state: State) -> HealthReport:
        probe: HealthProbe = state.health
        services = state.services
        graph, embedding, index = probe.graph_store(), probe.embedding(), probe.search_index()
        feed = probe.event_stream()
        feed_state = services.feed.state()
        report = HealthReport(
            status="ok" if all(c.status == "ok" for c in (graph, embedding, index, feed)) else "degraded",
            version=__version__,
            neo4j=GraphHealth(**_fields(graph)),
            event_stream=EventStreamHealth(**_fields(feed), subscribers=feed_state["subscribers"],
                                           max_subscribers=services.settings.events.max_subscribers,
                                           last_event_id=feed_state["last_seq"]),
            embedding=EmbeddingHealth(**_fields(embedding), model=probe.embedder.model_id, dim=probe.embedder.dim),
            search_index=Component(**_fields(index)))
        return report


def _fields(check: Check) -> dict[str, Any]:
    return {"status": check.status, "detail": check.detail}
