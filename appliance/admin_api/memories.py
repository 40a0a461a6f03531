"""Seed 001's Memory API at ``/api/v1/memories`` (docs/memory-api.md): store, get, list, recall, forget,
count, export, purge, health, over ``appliance.services.memory_api``. ``kumiho-ce memory …`` calls these
same routes (``appliance.cli_memory``).

Every route runs as the ``memory_api`` front door: ``appliance.server.callers``' middleware sets the caller
(door, cleaned client, route) for the audit trail and the read-only namespaces' guard; these routes never set
their own. ``/memories/{key}`` takes the rest of the path as the key ("a/b" too); the names of the other routes
(count, export, health, recall, procedural, purge; batch is POST only) are read as those routes, so such keys are
read through ``GET /api/v1/memories?key=`` and forgotten through ``DELETE /api/v1/memories?key=`` instead.
"""

from __future__ import annotations

import json
from typing import Annotated

from litestar import Controller, Response, delete, get, post
from litestar.datastructures import State
from litestar.openapi import ResponseSpec
from litestar.params import JSONBody, Parameter, QueryParameter
from litestar.response import Stream

from appliance.admin_api.memory_shapes import (
    BatchBody,
    BatchResultShape,
    BatchShape,
    CountShape,
    EntriesShape,
    EntryPageShape,
    EntryShape,
    ForgottenShape,
    MemoryHealthShape,
    ProceduralBody,
    PurgeBody,
    PurgedShape,
    RecallBody,
    SkippedShape,
    StoreBody,
)
from appliance.errors import InvalidArgument
from appliance.memory import entries, namespaces
from appliance.memory.entries import Entry
from appliance.services.memory_api import MAX_BATCH, MAX_LIMIT, MAX_OFFSET, MemoryApi, Stored

NamespaceQuery = Annotated[str | None, QueryParameter(
    max_length=namespaces.MAX_NAMESPACE, description="the namespace; none = [memory] default_namespace")]
CategoryQuery = Annotated[str | None, QueryParameter(
    max_length=entries.MAX_CATEGORY, description="only entries of this category (core, daily, conversation, custom)")]
SessionQuery = Annotated[str | None, QueryParameter(
    max_length=entries.MAX_SESSION_ID, description="only entries of this session")]
TimeQuery = Annotated[str | None, QueryParameter(
    max_length=64, description="an RFC 3339 time with its offset", schema_extra={"format": "date-time"})]
KeyPath = Annotated[str, Parameter(description="the entry's key (the rest of the path; percent-encode what a path "
                                              "cannot carry)", max_length=1024)]
NDJSON = "application/x-ndjson"
# A store the write filters refuse answers 200 (nothing written) beside the 201 of a stored entry.
SKIPPED = {200: ResponseSpec(SkippedShape, description="the seed's write filters refused it: nothing was written")}


def _api(state: State) -> MemoryApi:
    api: MemoryApi = state.services.memory_api
    return api


def _shape(entry: Entry) -> EntryShape:
    return EntryShape.model_validate(entry.to_dict())


def _stored(outcome: Stored) -> Response[EntryShape | SkippedShape]:
    if outcome.entry is None:
        return Response(SkippedShape(skipped=outcome.skipped or "filtered"), status_code=200)
    return Response(_shape(outcome.entry), status_code=201)


def _key(path_key: str) -> str:
    return path_key.lstrip("/")


class MemoriesController(Controller):
    path = "/api/v1/memories"
    tags = ("memories",)

    @post("", summary="Store an entry (201 with it; 200 {stored: false, skipped} when the write filters refuse "
          "it)", sync_to_thread=True, status_code=201, responses=SKIPPED)
    def store(self, state: State,
              data: JSONBody[StoreBody]) -> Response[EntryShape | SkippedShape]:
        return _stored(_api(state).store(**data.model_dump()))

    @post("/batch", summary=f"Store 1..{MAX_BATCH} entries in one transaction (the bulk door: the search index "
          "embeds them in the background)", sync_to_thread=True, status_code=201)
    def store_batch(self, state: State, data: JSONBody[BatchBody]) -> BatchShape:
        outcomes = _api(state).store_many([entry.model_dump() for entry in data.entries])
        results = [BatchResultShape(stored=True, entry=_shape(o.entry), created=o.created) if o.entry is not None
                   else BatchResultShape(stored=False, skipped=o.skipped or "filtered") for o in outcomes]
        stored = sum(r.stored for r in results)
        return BatchShape(stored=stored, skipped=len(results) - stored, results=results)

    @post("/procedural", summary="store_procedural: a conversation's messages as one procedural entry",
          sync_to_thread=True, status_code=201, responses=SKIPPED)
    def store_procedural(self, state: State,
                         data: JSONBody[ProceduralBody]) -> Response[EntryShape | SkippedShape]:
        messages = [m.model_dump() for m in data.messages]
        return _stored(_api(state).store_procedural(messages=messages, session_id=data.session_id,
                                                    namespace=data.namespace, key=data.key))

    @get("", summary="List entries of a namespace, newest first (one key with ?key=)", sync_to_thread=True)
    def list_entries(
        self, state: State, namespace: NamespaceQuery = None,
        category: CategoryQuery = None, session_id: SessionQuery = None,
        key: Annotated[str | None, QueryParameter(max_length=entries.MAX_KEY,
                                                  description="only the entry of this key")] = None,
        limit: Annotated[int, QueryParameter(ge=1, le=MAX_LIMIT, description="entries per page")] = 100,
        offset: Annotated[int, QueryParameter(ge=0, le=MAX_OFFSET, description="entries to skip")] = 0,
    ) -> EntryPageShape:
        api = _api(state)
        ns = api.namespace(namespace)
        if key is not None:
            found = [e for e in [api.get(key, ns)]
                     if (not category or e.category == entries.parse_category(category))
                     and (not session_id or e.session_id == session_id)]
            return EntryPageShape(entries=[_shape(e) for e in found[offset:offset + limit]], total=len(found),
                                  limit=limit, offset=offset, namespace=ns)
        page, total = api.list_entries(namespace=ns, category=category, session_id=session_id, limit=limit,
                                       offset=offset)
        return EntryPageShape(entries=[_shape(e) for e in page], total=total, limit=limit, offset=offset,
                              namespace=ns)

    @post("/recall", summary="recall: the entries that best match a query, with their score", sync_to_thread=True,
          status_code=200)
    def recall(self, state: State, data: JSONBody[RecallBody]) -> EntriesShape:
        api = _api(state)
        ns = api.namespace(data.namespace)
        found = api.recall(query=data.query, limit=data.limit, namespace=ns, since=data.since,
                           until=data.until, category=data.category, session_id=data.session_id)
        return EntriesShape(entries=[_shape(e) for e in found], namespace=ns)

    @get("/count", summary="count: entries of a namespace (forgotten ones left out)", sync_to_thread=True)
    def count(self, state: State, namespace: NamespaceQuery = None,
              category: CategoryQuery = None, session_id: SessionQuery = None) -> CountShape:
        api = _api(state)
        ns = api.namespace(namespace)
        return CountShape(count=api.count(namespace=ns, category=category, session_id=session_id), namespace=ns)

    @get("/export", summary="export: a namespace's entries as JSON Lines (one entry a line, oldest first)",
         sync_to_thread=True, media_type=NDJSON,
         response_description="application/x-ndjson: one entry (the shape GET /api/v1/memories/{key} answers) "
                              "per line")
    def export(self, state: State, namespace: NamespaceQuery = None,
               since: TimeQuery = None, until: TimeQuery = None) -> Stream:
        api = _api(state)
        ns = api.namespace(namespace)
        found = api.export(namespace=ns, since=since, until=until)  # bad arguments: refused before the answer
        lines = (json.dumps(e.to_dict(), ensure_ascii=False) + "\n" for e in found)
        return Stream(lines, media_type=NDJSON)

    @post("/purge", summary="purge_namespace / purge_session: delete entries for real (confirm required)",
          sync_to_thread=True, status_code=200)
    def purge(self, state: State, data: JSONBody[PurgeBody]) -> PurgedShape:
        api = _api(state)
        ns = api.namespace(data.namespace)
        if data.session_id:
            if data.confirm != data.session_id:
                raise InvalidArgument("confirm: repeat the session id to purge its entries (they are deleted "
                                      "for real)", field="confirm")
            deleted = api.purge_session(data.session_id, ns)
        else:
            if data.confirm != ns:
                raise InvalidArgument(f"confirm: repeat the namespace's name ({ns!r}) to purge every entry of it "
                                      "(they are deleted for real)", field="confirm")
            deleted = api.purge_namespace(ns)
        return PurgedShape(deleted=deleted, namespace=ns, session_id=data.session_id or None)

    @delete("", summary="forget the entry of ?key= (any key, including one named like a route: count, export, "
            "health, procedural, purge, recall)", sync_to_thread=True, status_code=200)
    def forget_by_query(
        self, state: State,
        key: Annotated[str, QueryParameter(min_length=1, max_length=entries.MAX_KEY,
                                           description="the key of the entry to forget")],
        namespace: NamespaceQuery = None,
    ) -> ForgottenShape:
        return ForgottenShape(entry=_shape(_api(state).forget(key, namespace)))

    @get("/health", summary="health_check: the memory answers reads", sync_to_thread=True)
    def health(self, state: State, namespace: NamespaceQuery = None) -> MemoryHealthShape:
        return MemoryHealthShape.model_validate(_api(state).health(namespace))

    @get("/{key:path}", summary="get: one entry by its key", sync_to_thread=True)
    def get_entry(self, state: State, key: KeyPath, namespace: NamespaceQuery = None) -> EntryShape:
        return _shape(_api(state).get(_key(key), namespace))

    @delete("/{key:path}", summary="forget: deprecate the key's entry (it stays in the graph, with an event)",
            sync_to_thread=True, status_code=200)
    def forget(self, state: State, key: KeyPath, namespace: NamespaceQuery = None) -> ForgottenShape:
        return ForgottenShape(entry=_shape(_api(state).forget(_key(key), namespace)))
