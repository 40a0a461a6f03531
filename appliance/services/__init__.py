"""The services behind the operations, one per family (recall, writes, sessions, consolidation, graph structure,
provenance, maintenance, …). Each takes the typed input of its operations (``appliance.operations``) and
returns the operation's JSON result; every front door (MCP today) calls them through ``handlers``.

``Parts`` is what the appliance opened (stores, the model's work and its queue) and ``families`` builds the
services on them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from appliance.config import Settings
from appliance.graph import GraphStore
from appliance.memory.cache import RecallCache
from appliance.memory.client import Client
from appliance.memory.consolidation import Consolidator
from appliance.memory.recall import Recaller
from appliance.memory.working import WorkingMemory
from appliance.memory.writer import MemoryWriter
from appliance.services.code import CodeService
from appliance.services.consolidation import ConsolidationService
from appliance.services.maintenance import MaintenanceService
from appliance.services.model_work import ModelWork
from appliance.services.operator import OperatorService
from appliance.services.patterns import PatternService
from appliance.services.provenance import ProvenanceService
from appliance.services.recall import RecallService
from appliance.services.revisions import RevisionService
from appliance.services.sessions import SessionService
from appliance.services.structure import StructureService
from appliance.services.writes import WriteService

Handler = Callable[[Any, Client], dict[str, Any]]  # (the operation's typed input, the caller) → its result


class Family(Protocol):
    def handlers(self) -> dict[str, Handler]:
        """Operation name → the bound method that performs it."""
        ...


@dataclass(frozen=True)
class Parts:
    settings: Settings
    graph: GraphStore
    working: WorkingMemory
    recaller: Recaller
    writer: MemoryWriter
    cache: RecallCache
    artifacts: Path
    consolidator: Consolidator  # the idle-session sweep shares it
    work: ModelWork  # the model-backed work the services share (model, job queue, edge discovery)
    maintenance: MaintenanceService  # built once: its tools and the Dream State schedule share it


def families(parts: Parts) -> list[Family]:
    recall = RecallService(parts.graph, parts.recaller, parts.cache, parts.work)
    writes = WriteService(parts.graph, parts.writer, parts.working, parts.work.queue_edge_discovery)
    structure = StructureService(parts.graph)
    operator = OperatorService(recall, writes, structure, parts.graph,
                               min_relevance=parts.settings.memory.min_relevance_score,
                               retrieval_limit=parts.settings.kumiho.memory_retrieval_limit)
    return [recall, writes, SessionService(parts.working, recall), ConsolidationService(parts.consolidator, parts.work),
            PatternService(parts.graph, parts.writer),
            RevisionService(parts.graph, parts.artifacts.parent),  # artifacts live in <data dir>/artifacts
            structure, ProvenanceService(parts.graph), parts.maintenance, CodeService.of(parts), operator]


def handlers(found: Iterable[Family]) -> dict[str, Handler]:
    table: dict[str, Handler] = {}
    for family in found:
        for name, handler in family.handlers().items():
            if name in table:
                raise ValueError(f"two services perform {name}")
            table[name] = handler
    return table
