"""Composition root: open the services once, build the ASGI app over them.

``open_services`` owns the data directory (its lock) and the stores, and closes them in reverse order;
``build_app`` wires the surfaces (admin API now; MCP and the UI mount here too) over those services.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from litestar import Litestar, Router
from litestar.datastructures import State
from litestar.handlers import asgi
from litestar.openapi import OpenAPIConfig
from litestar.openapi.plugins import JsonRenderPlugin

from appliance import __version__
from appliance.admin_api.audit import AuditController
from appliance.admin_api.auth import OPEN_PATHS, checked_token, configured_token, token_guard
from appliance.admin_api.backups import BackupsController
from appliance.admin_api.console import ConsoleController
from appliance.admin_api.errors import HANDLERS, schema_page_not_found
from appliance.admin_api.events import EventsController
from appliance.admin_api.health import HealthController
from appliance.admin_api.hygiene import HygieneController
from appliance.admin_api.jobs import JobsController, MovedJobsController
from appliance.admin_api.kumiho_rest import KumihoRestController
from appliance.admin_api.memories import MemoriesController
from appliance.admin_api.memory_proxy import MemoryProxyController
from appliance.admin_api.openai_compat import OpenAIController, document_openai_errors
from appliance.admin_api.openapi import document_problems
from appliance.admin_api.portability import PortabilityController
from appliance.admin_api.search import SearchController
from appliance.admin_api.ui import ui_router
from appliance.backup.capture import Sources
from appliance.backup.restore import finish_interrupted_restore, hydrate_if_empty
from appliance.backup.snapshots import Snapshots, before_migration
from appliance.backup.store import Backups, backup_directory
from appliance.config import Settings
from appliance.core.ports import ChatModel, Embedder
from appliance.datadir import DataDir
from appliance.errors import ConfigError
from appliance.feed import EventFeed
from appliance.graph import GraphStore
from appliance.graph.write_policy import WritePolicy
from appliance.health import HealthProbe
from appliance.inference.embedding import HashingEmbedder, OnnxEmbedder, default_embedder
from appliance.inference.factory import chat_model as configured_model
from appliance.inference.install import model_search_path
from appliance.inference.models import verified
from appliance.inference.response_cache import with_response_cache
from appliance.inference.selection import model_for_call
from appliance.jobs import JobQueue
from appliance.maintenance import Maintenance
from appliance.mcp_api.server import build_server, session_manager
from appliance.memory.artifacts import sweep as sweep_artifacts
from appliance.memory.cache import RecallCache
from appliance.memory.client import Client
from appliance.memory.consolidation import Consolidator
from appliance.memory.model_options import ModelOptions, Redact, patterns_only
from appliance.memory.policy import ReadOnlyNamespaces
from appliance.memory.recall import Recaller
from appliance.memory.working import WorkingMemory
from appliance.memory.writer import MemoryWriter
from appliance.search import repair
from appliance.search.index import IndexCaches, SearchIndex
from appliance.search.service import SearchService
from appliance.search.sync import IndexSync
from appliance.search.worker import IndexWorker
from appliance.server.callers import caller_middleware
from appliance.server.door import ASGIApp, DoorPolicy, bounded_body, front_door
from appliance.services import Family, Parts, families, handlers
from appliance.services.audit import AuditRetention
from appliance.services.calls import Operations
from appliance.services.hygiene import HygieneService
from appliance.services.maintenance import MaintenanceService
from appliance.services.memory_api import MemoryApi
from appliance.services.model_work import ModelWork

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Services:
    settings: Settings
    data_dir: DataDir
    graph: GraphStore
    index: SearchIndex
    search: SearchService
    index_worker: IndexWorker
    working: WorkingMemory
    families: tuple[Family, ...]
    jobs: JobQueue
    model: ChatModel
    maintenance: Maintenance
    operations: Operations
    feed: EventFeed
    hygiene: HygieneService
    backups: Backups
    snapshots: Snapshots
    memory_api: MemoryApi  # seed 001's Memory interface (/api/v1/memories, `kumiho-ce memory`)

    def perform(self, name: str, arguments: dict[str, Any] | None = None, client: Client | None = None
                ) -> dict[str, Any]:
        """Run a typed operation by name, as the MCP tool of that name does (see ``Operations.perform``)."""
        return self.operations.perform(name, arguments, client)

    @property
    def token(self) -> str:
        """The bearer token requests from beyond loopback must present; a ConfigError when it is unusable
        (empty, short, or with characters a header cannot carry), so the appliance refuses to start."""
        return configured_token(self.settings) or checked_token(
            self.data_dir.read_or_create_token(), f"the file {self.data_dir.token_path}",
            "delete the file (a new token is generated at the next start) or write a longer token into it")


@contextmanager
def open_services(settings: Settings, *, chat_model: ChatModel | None = None) -> Iterator[Services]:
    """Take the data directory (refusing when another process holds it) and open the stores.

    ``chat_model`` replaces the configured model (tests drive every branch with a ``ScriptedModel``)."""
    models = model_search_path(settings)  # first: a models_dir that is not there stops the start before any store
    data_dir = DataDir(settings.data_dir)
    data_dir.ensure()
    with data_dir.lock():
        data_dir.clear_runtime()  # whatever server.json says now, a killed owner left it: the lock was free
        finish_interrupted_restore(data_dir)  # before anything opens the graph: a restore a crash cut short
        if settings.memory.auto_hydrate:
            hydrate_if_empty(settings, data_dir)  # before the graph opens: no graph at all takes the newest snapshot
        graph = GraphStore.open(
            data_dir.graph_path,
            buffer_pool_mb=settings.graph.buffer_pool_mb,
            readers=settings.graph.readers,
            default_project=settings.kumiho.default_project,
            statements_per_connection=settings.graph.statements_per_connection,
            before_migration=before_migration(settings, data_dir),  # a snapshot first; none written, no upgrade
        )
        graph.policy = write_policy(settings)
        try:
            # before anything writes: files of writes a crash interrupted (the graph is consistent by now)
            sweep_artifacts(data_dir.root / "artifacts", graph.artifact_locations())
            feed = EventFeed(settings.events, graph.last_event_seq())  # before anything else writes
            graph.on_events(feed.graph_events)
            embedder = make_embedder(settings)
            moved = repair.set_aside_if_damaged(data_dir.root / "index")  # rebuilt in the background
            index = SearchIndex(data_dir.root / "index", embedder.dim, embedder.model_id, index_caches(settings))
            worker = IndexWorker(IndexSync(graph, index, embedder), settings.search.sync_interval_seconds,
                                 rebuilding=moved, optimize_every=settings.search.compact_every_rows)
            worker.start()
            working = WorkingMemory.open(data_dir.root / "working")
            model = chat_model or with_response_cache(
                settings, configured_model(settings.inference, models))
            jobs = JobQueue()
            jobs.subscribe(feed.job_changed)
            jobs.start()
            maintenance: Maintenance | None = None
            backups = Backups(backup_directory(settings),
                              Sources(data_dir, settings, graph.hold_writes, worker.paused, working.backup_to))
            snapshots = Snapshots(backups, jobs, settings.memory)
            try:
                search = SearchService(index, embedder)
                parts = service_parts(settings, data_dir, graph, search, worker, working, model, jobs)
                # the snapshot taken first when [memory] snapshot_on_hygiene is set
                hygiene = HygieneService(graph, jobs, settings.memory, settings.kumiho.default_project,
                                         data_dir.root / "artifacts", before_pass=lambda: snapshots.take("hygiene"))
                maintenance = Maintenance(parts.maintenance, jobs, settings.maintenance,
                                          settings.kumiho.default_project, consolidator=parts.consolidator,
                                          hygiene=hygiene,
                                          audit=AuditRetention(graph, jobs, settings.memory.audit_retention_days))
                maintenance.start()
                snapshots.start()
                built = tuple(families(parts))
                yield Services(settings, data_dir, graph, index, search, worker, working, built, jobs, model,
                               maintenance, Operations(handlers(built), settings.kumiho.default_project), feed,
                               hygiene, backups, snapshots,
                               MemoryApi(settings, graph, parts.writer, parts.recaller))
            finally:
                feed.close()  # no event stream outlives the stores (the server ends them earlier: runner.run)
                snapshots.stop()
                if maintenance is not None:
                    maintenance.stop()
                jobs.stop()
                if hasattr(model, "close"):
                    model.close()
                worker.stop()
                working.close()
        finally:
            graph.close()


def write_policy(settings: Settings) -> WritePolicy:
    """What every graph write passes: the read-only namespaces of the memory project and the audit trail."""
    memory = settings.memory
    return WritePolicy(ReadOnlyNamespaces.of(settings.kumiho.default_project, memory.policy.read_only_namespaces),
                       audit=memory.audit_enabled)


def service_parts(settings: Settings, data_dir: DataDir, graph: GraphStore, search: SearchService,
                  worker: IndexWorker, working: WorkingMemory, model: ChatModel, jobs: JobQueue) -> Parts:
    def now() -> datetime:
        return datetime.now(UTC)

    graph.ensure_project(settings.kumiho.default_project)  # agents engage before anything was stored
    cache = RecallCache()
    graph.subscribe(cache.invalidate)  # D3: any write empties the 5-second cache
    recaller = Recaller(graph, search, wait_for_index=worker.wait_synced, clock=now,
                        default_half_life=settings.memory.half_life_days)
    artifacts = data_dir.root / "artifacts"
    writer = MemoryWriter(graph, search, artifacts, stage=worker.stage)
    conf = settings.inference
    options = ModelOptions(tool_wait_seconds=conf.tool_wait_seconds,
                           reformulate_seconds=conf.reformulate_timeout_seconds,
                           call_timeout=max(conf.request_timeout_seconds, 300.0),
                           keep_raw_transcripts=settings.maintenance.keep_raw_transcripts,
                           dream_min_age_days=settings.maintenance.dream_state_min_age_days)
    redact = pii_redactor(settings)
    work = ModelWork(graph, recaller, model, jobs, options)
    maintenance = MaintenanceService(graph, work, artifact_root=artifacts, options=options, clock=now,
                                     model_for=lambda **choice: model_for_call(settings, model, **choice))
    consolidator = Consolidator(working, writer, model, redact, patterns_only, call_timeout=options.call_timeout,
                                keep_raw_transcripts=options.keep_raw_transcripts)
    return Parts(settings=settings, graph=graph, working=working, recaller=recaller, writer=writer, cache=cache,
                 artifacts=artifacts, consolidator=consolidator, work=work, maintenance=maintenance)


def pii_redactor(settings: Settings) -> Redact:
    """PII redaction for consolidation: spaCy names plus patterns; patterns alone when spaCy cannot load
    (said once in the log, and by `kumiho-ce doctor`)."""
    if not settings.inference.pii_ner:
        return patterns_only
    from appliance.inference.pii import PiiRedactor

    redactor = PiiRedactor(settings.inference.pii_model)
    fallback: list[str] = []

    def redact(texts: list[str]) -> list[str]:
        if not fallback:
            try:
                return [text for text, _ in redactor.redact_many(texts)]
            except (ConfigError, ImportError, OSError) as exc:
                fallback.append(str(exc))
                log.warning("PII redaction falls back to patterns only: %s", exc)
        return patterns_only(texts)

    return redact


def index_caches(settings: Settings) -> IndexCaches:
    search = settings.search
    return IndexCaches(search.index_cache_mb, search.metadata_cache_mb, timedelta(minutes=search.keep_versions_minutes))


def make_embedder(settings: Settings) -> Embedder:
    search = settings.search
    if search.embedder == "hashing":
        return HashingEmbedder()
    if search.embedder == "onnx":
        if not search.model_path or not search.tokenizer_path:
            raise ConfigError("search.embedder = \"onnx\" needs search.model_path and search.tokenizer_path")
        model = verified(search.model_path, search.model_sha256)
        return OnnxEmbedder(model, verified(search.tokenizer_path, None), model_id=f"onnx:{model.name}",
                            threads=search.embedding_threads)
    return default_embedder(search.embedding_threads)


def build_app(services: Services) -> ApplianceApp:
    """The ASGI app: Litestar (admin API, schema, ``/mcp``) wrapped in the front door (Host, Origin, CORS,
    cross-site writes, body size) and, beyond loopback or with ``require_token``, the token guard, so that every
    request passes them, an unknown path or method too. Raises ConfigError when the token is unusable."""
    settings = services.settings
    health = HealthProbe(services.graph, services.search, services.feed, services.index_worker)
    mcp = session_manager(
        build_server(handlers(services.families), settings.kumiho.default_project))

    @asgi("/mcp", is_mount=True, copy_scope=True, opt={"door": "mcp"})
    async def mcp_endpoint(scope: Any, receive: Any, send: Any) -> None:
        await mcp.handle_request(scope, receive, send)

    @asynccontextmanager
    async def run_mcp(app: Litestar) -> AsyncIterator[None]:
        async with mcp.run():  # the SDK's session manager needs the host's lifespan
            yield

    litestar = Litestar(
        route_handlers=[AuditController, HealthController, SearchController, JobsController, mcp_endpoint,
                        KumihoRestController, EventsController, ConsoleController, MovedJobsController, ui_router(),
                        HygieneController, PortabilityController, BackupsController, MemoriesController,
                        MemoryProxyController, OpenAIController],
        lifespan=[run_mcp],
        middleware=[caller_middleware],  # who is calling: the audit trail and the read-only guard read it
        state=State({"services": services, "health": health}),
        exception_handlers=HANDLERS,  # type: ignore[arg-type]  # each handler takes its own exception class
        request_max_body_size=settings.http.max_body_bytes,
        openapi_config=OpenAPIConfig(
            title="kumiho-ce", version=__version__, path="/api/schema",
            render_plugins=[JsonRenderPlugin()],  # offline: no UI that loads scripts from a CDN
            openapi_router=Router("/api/schema", route_handlers=[], include_in_schema=False,
                                  after_request=schema_page_not_found),
        ),
        logging_config=None,
        debug=False,
    )
    # built now, before the first request serves it: every operation's error answers, as problem documents
    document_problems(litestar.openapi_schema, open_paths=OPEN_PATHS)
    document_openai_errors(litestar.openapi_schema)  # /v1 answers its own errors in OpenAI's shape
    # outermost first: Host/Origin (CORS, cross-site writes) → the token (beyond loopback or required) → the
    # bounded body → the routes.
    # Litestar types its ASGI scope and events as TypedDicts; the wrappers take any ASGI app (plain dicts).
    app = bounded_body(settings.http.max_body_bytes)(cast(ASGIApp, litestar))
    if settings.token_required:
        app = token_guard(services.token)(app)
    return ApplianceApp(front_door(DoorPolicy.from_settings(settings))(app), litestar)


@dataclass(frozen=True)
class ApplianceApp:
    """The served ASGI app (the door and the guards around Litestar), and the Litestar app inside it, whose route
    table says what is served (tests/server/test_every_route.py walks it)."""

    asgi: ASGIApp
    litestar: Litestar

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.asgi(scope, receive, send)
