"""The services behind the operations, one per family (recall, writes, sessions, consolidation, graph structure,
provenance, maintenance, …). Each takes the typed input of its operations (``appliance.operations``) and
returns the operation's JSON result; every front door (MCP today) calls them through ``handlers``.

``Parts`` is what the appliance opened (stores, model, queues) and ``families`` builds the services on them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from appliance.config import Settings
from appliance.graph import GraphStore
from appliance.inference.chat import ChatModel
from appliance.jobs import JobQueue
from appliance.memory.cache import RecallCache
from appliance.memory.client import Client
from appliance.memory.operator import OperatorTools
from appliance.memory.recall import Recaller
from appliance.memory.service import MemoryService
from appliance.memory.working import WorkingMemory
from appliance.memory.writer import MemoryWriter
from appliance.search.service import SearchService
from appliance.services.provenance import ProvenanceService

Handler = Callable[[Any, Client], dict[str, Any]]  # (the operation's typed input, the caller) → its result


class Family(Protocol):
    def handlers(self) -> dict[str, Handler]:
        """Operation name → the bound method that performs it."""
        ...


@dataclass(frozen=True)
class Parts:
    settings: Settings
    graph: GraphStore
    search: SearchService
    working: WorkingMemory
    model: ChatModel
    jobs: JobQueue
    recaller: Recaller
    writer: MemoryWriter
    cache: RecallCache
    artifacts: Path
    memory: MemoryService  # the memory tools not yet moved to a family of their own
    operator: OperatorTools


def families(parts: Parts) -> list[Family]:
    return [_Legacy(parts.memory, parts.operator), ProvenanceService(parts.graph)]


def handlers(found: Iterable[Family]) -> dict[str, Handler]:
    table: dict[str, Handler] = {}
    for family in found:
        for name, handler in family.handlers().items():
            if name in table:
                raise ValueError(f"two services perform {name}")
            table[name] = handler
    return table


class _Legacy:
    """The memory tools whose service still reads a plain dict of arguments (absent ones left out)."""

    def __init__(self, memory: MemoryService, operator: OperatorTools) -> None:
        self.memory, self.operator = memory, operator

    def handlers(self) -> dict[str, Handler]:
        memory, operator = self.memory, self.operator
        methods: dict[str, Callable[[dict[str, Any], Client], dict[str, Any]]] = {
            "kumiho_memory_engage": memory.engage, "kumiho_memory_reflect": memory.reflect,
            "kumiho_memory_recall": memory.recall, "kumiho_memory_retrieve": memory.retrieve,
            "kumiho_fulltext_search": memory.fulltext, "kumiho_memory_store": memory.store,
            "kumiho_memory_ingest": memory.ingest, "kumiho_memory_add_response": memory.add_response,
            "kumiho_memory_store_execution": memory.store_execution,
            "kumiho_memory_consolidate": memory.consolidate,
            "kumiho_memory_discover_edges": memory.discover_edges,
            "kumiho_memory_dream_state": memory.dream_state,
            "kumiho_resolve_kref": memory.resolve_kref,
            "kumiho_get_revision_by_tag": memory.get_revision_by_tag,
            "kumiho_deprecate_item": memory.deprecate_item,
            "memory_engage": operator.engage, "memory_reflect": operator.reflect,
            "memory_retrieve": operator.retrieve, "memory_search": operator.search,
            "memory_fulltext": operator.fulltext, "memory_get_item": operator.get_item,
            "memory_resolve_kref": operator.resolve_kref,
            "memory_get_revision_by_tag": operator.get_revision_by_tag,
            "memory_store": operator.store, "memory_graph": operator.graph,
        }
        return {name: _plain(method) for name, method in methods.items()}


def _plain(method: Callable[[dict[str, Any], Client], dict[str, Any]]) -> Handler:
    return lambda args, client: method(args.model_dump(exclude_none=True), client)
