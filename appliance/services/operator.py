"""The operator tools (``memory_*``, MISSION §2 and §6): Revka's Operator-side wrappers of the memory tools.
``memory_engage`` floors ``min_score`` at ``[memory] min_relevance_score`` and caps ``limit`` at the client's
(D10) or the configured ``[kumiho] memory_retrieval_limit``; ``memory_graph`` returns the dashboard's shape,
built by services/memory_graph.py (the console's graph view shares it). The wrappers call the recall, write
and structure services' typed methods."""

from __future__ import annotations

import dataclasses
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from appliance.graph import GraphStore
from appliance.memory.client import Client
from appliance.memory.spaces import project_for
from appliance.operations.graph import GetItemInput, GetRevisionByTagInput, ResolveKrefInput, SearchItemsInput
from appliance.operations.operator import (
    OperatorEngageInput,
    OperatorFulltextInput,
    OperatorGetRevisionByTagInput,
    OperatorGraphInput,
    OperatorKrefInput,
    OperatorReflectInput,
    OperatorRetrieveInput,
    OperatorSearchInput,
    OperatorStoreInput,
)
from appliance.operations.recall import FulltextSearchInput, RetrieveInput
from appliance.operations.writes import ReflectInput
from appliance.services.memory_graph import GraphQuery, memory_graph
from appliance.services.recall import RecallRequest, RecallService
from appliance.services.structure import StructureService
from appliance.services.writes import WriteService

if TYPE_CHECKING:
    from appliance.services import Handler

class OperatorService:
    def __init__(self, recall: RecallService, writes: WriteService, structure: StructureService, graph: GraphStore,
                 *, min_relevance: float, retrieval_limit: int) -> None:
        self.recall, self.writes, self.structure, self.graph = recall, writes, structure, graph
        self.min_relevance, self.retrieval_limit = min_relevance, retrieval_limit

    def handlers(self) -> dict[str, Handler]:
        return {"memory_engage": self.engage, "memory_reflect": self.reflect, "memory_retrieve": self.retrieve,
                "memory_search": self.search, "memory_fulltext": self.fulltext, "memory_get_item": self.get_item,
                "memory_resolve_kref": self.resolve_kref, "memory_get_revision_by_tag": self.get_revision_by_tag,
                "memory_store": self.store, "memory_graph": self.graph_view}

    def engage(self, args: OperatorEngageInput, client: Client) -> dict[str, Any]:
        cap = client.retrieval_limit or self.retrieval_limit
        limit = min(args.limit or cap, cap)
        floor = max(self.min_relevance if args.min_score is None else args.min_score, self.min_relevance)
        query = " ".join(p for p in (args.query, *(args.keywords or ()), *(args.topics or ())) if p.strip())
        request = RecallRequest(
            query=query, project=project_for(args.project, client), space_paths=tuple(args.space_paths or ()),
            memory_types=tuple(args.memory_types or ()), limit=limit, min_score=floor,
            graph_augmented=args.graph_augmented, kind=args.memory_item_kind,
            order="latest" if args.mode == "latest" else "relevance")
        result = self.recall.cached("memory_engage", asdict(request), client,
                                    lambda: self.recall.engaged(self.recall.run(request), request.recall_mode))
        return {"context": result["context"], "results": result["results"], "source_krefs": result["source_krefs"],
                "count": result["count"], "limit": limit, "min_score": floor,
                **({"graph_augmented": result["graph_augmented"]} if "graph_augmented" in result else {})}

    def reflect(self, args: OperatorReflectInput, client: Client) -> dict[str, Any]:
        if args.project:  # the operator's reflect may name its project
            client = dataclasses.replace(client, project=args.project)
        return self.writes.reflect(ReflectInput.model_validate(args.model_dump(exclude_none=True)), client)

    def retrieve(self, args: OperatorRetrieveInput, client: Client) -> dict[str, Any]:
        return self.recall.retrieve(RetrieveInput(
            query=args.query, project=args.project, space_paths=args.space_paths, keywords=args.keywords,
            topics=args.topics, memory_item_kind=args.memory_item_kind, memory_types=args.memory_types,
            limit=args.limit, mode=args.mode), client)

    def search(self, args: OperatorSearchInput, client: Client) -> dict[str, Any]:
        found = self.structure.search_items(SearchItemsInput(
            context_filter=args.context_filter, name_filter=args.name_filter, kind_filter=args.kind_filter,
            include_metadata=args.include_metadata), client)
        return {**found, "total": found.get("total", found["count"])}  # the operator's answer always has it

    def fulltext(self, args: OperatorFulltextInput, client: Client) -> dict[str, Any]:
        return self.recall.fulltext(FulltextSearchInput(
            query=args.query, context=args.context, kind=args.kind, include_deprecated=args.include_deprecated,
            include_revision_metadata=args.include_revision_metadata, limit=args.limit), client)

    def get_item(self, args: OperatorKrefInput, client: Client) -> dict[str, Any]:
        return self.structure.get_item(GetItemInput(kref=args.kref), client)

    def resolve_kref(self, args: OperatorKrefInput, client: Client) -> dict[str, Any]:
        return self.structure.resolve_kref(ResolveKrefInput(kref=args.kref), client)

    def get_revision_by_tag(self, args: OperatorGetRevisionByTagInput, client: Client) -> dict[str, Any]:
        return self.structure.get_revision_by_tag(GetRevisionByTagInput(item_kref=args.item_kref, tag=args.tag),
                                                  client)

    def store(self, args: OperatorStoreInput, client: Client) -> dict[str, Any]:
        return self.writes.store(args, client, operator=True)

    def graph_view(self, args: OperatorGraphInput, client: Client) -> dict[str, Any]:
        """``{nodes, edges, spaces, stats}`` for a force-directed view (services/memory_graph.py builds it)."""
        project = project_for(args.project, client)
        kinds = tuple(sorted({k.strip() for k in (args.kinds or "").split(",") if k.strip()}))
        space = (args.space or "").strip().strip("/")
        inside = space == project or space.startswith(project + "/")  # a path in another project is relative
        context = space if inside else f"{project}/{space}" if space else ""
        return memory_graph(self.graph, GraphQuery(project, context, kinds, name_contains=args.search or "",
                                                   by_name=args.sort == "name", limit=args.limit)).view
