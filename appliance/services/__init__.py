"""The services behind the operations, one per family (recall, writes, sessions, consolidation, graph structure,
provenance, maintenance, …). Each takes the typed input of its operations (``appliance.operations``) and
returns the operation's JSON result; every front door (MCP today) calls them through ``handlers``.

``Parts`` is what the appliance opened (stores, model, queues) and ``families`` builds the services on them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from appliance.config import Settings
from appliance.core.ports import ChatModel
from appliance.errors import InvalidArgument
from appliance.graph import GraphStore
from appliance.jobs import JobQueue
from appliance.memory.cache import RecallCache
from appliance.memory.client import Client
from appliance.memory.consolidation import Consolidator
from appliance.memory.operator import OperatorTools
from appliance.memory.recall import Recaller
from appliance.memory.service import MemoryService
from appliance.memory.working import WorkingMemory
from appliance.memory.writer import MemoryWriter
from appliance.operations.operator import OperatorReflectInput, OperatorStoreInput
from appliance.operations.writes import ReflectInput
from appliance.search.service import SearchService
from appliance.services.consolidation import ConsolidationService
from appliance.services.model_work import ModelWork
from appliance.services.patterns import PatternService
from appliance.services.revisions import RevisionService
from appliance.services.sessions import SessionService
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
    consolidator: Consolidator  # the idle-session sweep shares it


def families(parts: Parts) -> list[Family]:
    # TODO(lead): the maintenance family's edge-discovery queue and the recall family's typed recall
    writes = WriteService(parts.graph, parts.writer, parts.working, parts.memory._queue_edge_discovery)
    model = ModelWork(parts.model, parts.jobs, parts.settings.inference.tool_wait_seconds)
    return [writes, SessionService(parts.working, _legacy_recall(parts.memory)),
            ConsolidationService(parts.consolidator, model), PatternService(parts.graph, parts.writer),
            RevisionService(parts.graph, parts.artifacts.parent),  # artifacts live in <data dir>/artifacts
            _Legacy(parts.memory, parts.operator, writes)]


def _legacy_recall(memory: MemoryService) -> Callable[[str, int, str, Client], list[dict[str, Any]]]:
    def recall(query: str, limit: int, project: str, client: Client) -> list[dict[str, Any]]:
        found = memory.run_recall({"query": query, "limit": limit, "project": project}, client, with_context=False)
        return list(found["results"])

    return recall


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

    def __init__(self, memory: MemoryService, operator: OperatorTools, writes: WriteService) -> None:
        self.memory, self.operator, self.writes = memory, operator, writes

    def handlers(self) -> dict[str, Handler]:
        memory, operator = self.memory, self.operator
        methods: dict[str, Callable[[dict[str, Any], Client], dict[str, Any]]] = {
            "kumiho_memory_engage": memory.engage,
            "kumiho_memory_recall": memory.recall, "kumiho_memory_retrieve": memory.retrieve,
            "kumiho_fulltext_search": memory.fulltext,
            "kumiho_memory_discover_edges": memory.discover_edges,
            "kumiho_memory_dream_state": memory.dream_state,
            "kumiho_resolve_kref": memory.resolve_kref, "kumiho_get_edges": memory.get_edges,
            "kumiho_get_revision_by_tag": memory.get_revision_by_tag,
            "kumiho_deprecate_item": memory.deprecate_item,
            "memory_engage": operator.engage,
            "memory_retrieve": operator.retrieve, "memory_search": operator.search,
            "memory_fulltext": operator.fulltext, "memory_get_item": operator.get_item,
            "memory_resolve_kref": operator.resolve_kref,
            "memory_get_revision_by_tag": operator.get_revision_by_tag,
            "memory_graph": operator.graph,
        }
        return {**{name: _plain(method) for name, method in methods.items()},
                "memory_reflect": self._operator_reflect, "memory_store": self._operator_store}

    # TODO(lead): the operator family calls WriteService with typed inputs itself
    def _operator_reflect(self, args: OperatorReflectInput, client: Client) -> dict[str, Any]:
        if args.project:
            client = dataclasses.replace(client, project=args.project)
        return self.writes.reflect(ReflectInput.model_validate(args.model_dump(exclude_none=True)), client)

    def _operator_store(self, args: OperatorStoreInput, client: Client) -> dict[str, Any]:
        if not args.title.strip():
            raise InvalidArgument("title: give the memory a title", field="title")
        return self.writes.store(args, client, operator=True)


def _plain(method: Callable[[dict[str, Any], Client], dict[str, Any]]) -> Handler:
    return lambda args, client: method(args.model_dump(exclude_none=True), client)
