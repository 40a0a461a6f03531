"""Liveness and readiness. ``/api/_live`` is what Kumiho's SDK probes to find a local CE."""

from __future__ import annotations

from litestar import Controller, get
from litestar.datastructures import State

from appliance import __version__
from appliance.admin_api.health_shapes import Live, Ready, SearchReadiness

DEPLOYMENT_MODE = "self_hosted_ce"


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
        try:
            rows: int | None = services.index.count()
        except Exception:  # a damaged table: the index worker repairs it, and state/sync_error say so
            rows = None
        return Ready(status="ready", deployment_mode=DEPLOYMENT_MODE, version=__version__,
                     schema_version=services.graph.schema_version(),
                     search=SearchReadiness(embedder=services.index.model_id, rows=rows,
                                            pending=services.graph.pending_count(), sync_error=worker.last_error,
                                            **worker.state()))
