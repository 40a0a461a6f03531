"""Kumiho's REST API at ``/api/v1``: the subset Revka calls when Kumiho runs as a local CE (``revka memory
list|get|stats|clear``, its dashboard's fallback when the operator's MCP tools do not answer), with Kumiho's
paths, parameter names and entity shapes (appliance/admin_api/kumiho_shapes.py).

Each route maps its parameters onto a typed operation (the MCP tools' layer) or, where no operation fits a
listing (items of one space, paged; spaces under any parent), onto a read of the graph. ``X-Kumiho-Token`` is
accepted on every route: Revka sends its service token there, empty on a local CE."""

from __future__ import annotations

from collections.abc import MutableMapping
from types import MappingProxyType
from typing import Annotated, Any, Literal

from litestar import Controller, Request, Response, delete, get, post
from litestar.datastructures import State
from litestar.exceptions import ValidationException
from litestar.params import HeaderParameter, JSONBody, QueryParameter

from appliance.admin_api.entity_shapes import EdgeShape, ItemShape, RevisionShape
from appliance.admin_api.errors import field_as_sent, validation_error
from appliance.admin_api.kumiho_shapes import (
    MAX_BATCH,
    ArtifactShape,
    BatchRevisionsBody,
    BatchRevisionsShape,
    BundleMembersShape,
    CreateProjectBody,
    CreateSpaceBody,
    DeletedShape,
    ProjectShape,
    SearchHitShape,
    SpaceShape,
)
from appliance.core import kref as krefs
from appliance.core import names
from appliance.core.model import Item, Page, Space, every_item
from appliance.errors import AlreadyExists, InvalidArgument, NotFound
from appliance.graph import GraphStore
from appliance.memory import views

MAX_SPACES = 1000  # spaces one GET /spaces lists (Kumiho's answer is a bare list: no room to say "more")
# items one GET /items page lists: Revka's `memory list` asks for twice what it shows (limit + offset) * 2
MAX_ITEMS_PAGE = 5000
_STORE_PAGE = 1000  # the graph store's largest page
MAX_OFFSET = 100_000  # how far GET /items pages; beyond it, narrow the listing with name_filter/kind_filter
_BATCH_CHUNK = 100  # krefs per call of kumiho_batch_get_revisions (its own bound)
_DIRECTIONS: dict[str, Literal["outgoing", "incoming", "both"]] = {
    "0": "outgoing", "outgoing": "outgoing", "out": "outgoing",
    "1": "incoming", "incoming": "incoming", "in": "incoming",
    "2": "both", "both": "both"}

Kref = Annotated[str, QueryParameter(min_length=1, max_length=1024, description="a kref://… reference")]


def _perform(state: State, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """One typed operation (its arguments checked as an MCP call's are), its errors naming their field."""
    with field_as_sent():
        result: dict[str, Any] = state.services.perform(name, args)
        return result


_ALIASES = {"text": "query"}  # handler arguments named otherwise than their query parameter (Litestar reserves it)


def _invalid_parameter(request: Request[Any, Any, Any], exc: ValidationException) -> Response[dict[str, Any]]:
    """Litestar's refusal of a parameter, naming the parameter the caller sent: ``query``, not the handler's
    ``text``."""
    if isinstance(exc.extra, list):
        exc.extra = [{**e, "key": _ALIASES.get(str(e.get("key")), e.get("key"))} if isinstance(e, dict) else e
                     for e in exc.extra]
    return validation_error(request, exc)


_REFUSALS: MutableMapping[int | type[Exception], Any] = {ValidationException: _invalid_parameter}


def _space(space: Space) -> SpaceShape:
    parent = space.path.rsplit("/", 1)[0] or "/"  # as Kumiho's: "/" for a project's own (root) space
    return SpaceShape.model_validate({**views.space_view(space), "parent_path": parent})


def _item(item: Item) -> ItemShape:
    return ItemShape.model_validate(views.item_view(item))


def _artifact(view: dict[str, Any]) -> ArtifactShape:
    item_kref = str(krefs.parse(view["revision_kref"]).item())
    return ArtifactShape.model_validate({**view, "item_kref": item_kref})


class KumihoRestController(Controller):
    path = "/api/v1"
    opt = {"door": "kumiho_rest"}  # noqa: RUF012  # Litestar declares opt an instance attribute  # who is calling (appliance/server/callers.py)
    tags = ("kumiho",)
    exception_handlers = _REFUSALS
    parameters = MappingProxyType({"x_kumiho_token": HeaderParameter(
        name="X-Kumiho-Token", annotation=str, required=False,
        description="Kumiho's service token header; accepted (empty too) where the appliance needs no token. Its "
                    "length is bounded with all the request's headers by the http.max_header_bytes setting")})

    # -- projects ---------------------------------------------------------------------------------------------
    @post("/projects", summary="Create a project (409 when it exists)", sync_to_thread=True)
    def create_project(self, state: State, data: JSONBody[CreateProjectBody]) -> ProjectShape:
        made = _perform(state, "kumiho_create_project", {"name": data.name, "description": data.description})
        return ProjectShape.model_validate(made["project"])

    @get("/projects", summary="The projects (archived ones left out)", sync_to_thread=True)
    def list_projects(self, state: State) -> list[ProjectShape]:
        return [ProjectShape.model_validate(p) for p in _perform(state, "kumiho_list_projects", {})["projects"]]

    # -- spaces -----------------------------------------------------------------------------------------------
    @post("/spaces", summary="Create a space under a project or a space (409 when it exists)", sync_to_thread=True)
    def create_space(self, state: State, data: JSONBody[CreateSpaceBody]) -> SpaceShape:
        with field_as_sent():
            project = krefs.parse_space_path(data.parent_path, "parent_path")[0]
        with field_as_sent("parent_path", "project_name"), field_as_sent("name", "space_name"):
            made = _perform(state, "kumiho_create_space",
                            {"project_name": project, "space_name": data.name, "parent_path": data.parent_path})
        path = made["space"]["path"]
        if not made["created"]:
            raise AlreadyExists(f"name: space {path} already exists; choose another name", field="name")
        return _space(state.services.graph.get_space(path))

    @get("/spaces", summary=f"Spaces under a project or a space (at most {MAX_SPACES})", sync_to_thread=True)
    def list_spaces(
        self, state: State,
        parent_path: Annotated[str, QueryParameter(
            max_length=512, description="/project or /project/space…; / or empty: every project's spaces")] = "/",
        recursive: Annotated[bool, QueryParameter(description="spaces at every depth, not only children")] = False,
    ) -> list[SpaceShape]:
        graph: GraphStore = state.services.graph
        with field_as_sent():
            spaces = every_item(lambda cursor: graph.list_spaces(parent_path, recursive=recursive,
                                                                 page_size=MAX_SPACES, cursor=cursor), MAX_SPACES)
        return [_space(s) for s in spaces[:MAX_SPACES]]

    # -- items ------------------------------------------------------------------------------------------------
    @get("/items", summary="Items directly in one space, paged by limit and offset", sync_to_thread=True)
    def list_items(
        self, state: State,
        space_path: Annotated[str, QueryParameter(min_length=1, max_length=512, description="/project/space…")],
        name_filter: Annotated[str, QueryParameter(max_length=256, description="a substring of the name")] = "",
        kind_filter: Annotated[str, QueryParameter(max_length=128)] = "",
        include_deprecated: Annotated[bool, QueryParameter(description="deprecated items too")] = False,
        limit: Annotated[int, QueryParameter(ge=1, le=MAX_ITEMS_PAGE)] = 100,
        offset: Annotated[int, QueryParameter(ge=0, le=MAX_OFFSET)] = 0,
    ) -> list[ItemShape]:
        graph: GraphStore = state.services.graph

        def page(size: int, cursor: str | None) -> Page[Item]:
            with field_as_sent():
                return graph.list_items(space_path, name_filter=name_filter, kind_filter=kind_filter,
                                        include_deprecated=include_deprecated, page_size=size, cursor=cursor)

        cursor, skipped = None, 0
        while skipped < offset:  # the store pages by cursor: walk past `offset` items first
            passed = page(min(offset - skipped, _STORE_PAGE), cursor)
            skipped += len(passed.items)
            cursor = passed.next_cursor
            if cursor is None:
                return []
        items: list[Item] = []
        while len(items) < limit:
            taken = page(min(limit - len(items), _STORE_PAGE), cursor)
            items += taken.items
            cursor = taken.next_cursor
            if cursor is None:
                break
        return [_item(i) for i in items]

    @get("/items/by-kref", summary="One item", sync_to_thread=True)
    def get_item(self, state: State, kref: Kref) -> ItemShape:
        return ItemShape.model_validate(_perform(state, "kumiho_get_item", {"kref": kref}))

    @delete("/items/by-kref", summary="Delete an item (force: with its revisions and artifacts)",
            status_code=200, sync_to_thread=True)
    def delete_item(
        self, state: State, kref: Kref,
        force: Annotated[bool, QueryParameter(
            description="false refuses (409) an item that has revisions; deprecate it instead")] = False,
    ) -> DeletedShape:
        with field_as_sent("kref", "item_kref"):
            gone = _perform(state, "kumiho_delete_item", {"item_kref": kref, "force": force})
        return DeletedShape(success=bool(gone["deleted"]), item_kref=gone["item_kref"])

    @post("/items/deprecate", summary="Deprecate an item (hidden from listings and searches) or restore it",
          status_code=200, sync_to_thread=True)
    def deprecate_item(
        self, state: State, kref: Kref,
        deprecated: Annotated[bool, QueryParameter(description="false restores it")] = True,
    ) -> ItemShape:
        with field_as_sent("kref", "item_kref"):
            _perform(state, "kumiho_deprecate_item", {"item_kref": kref, "deprecated": deprecated})
        return ItemShape.model_validate(_perform(state, "kumiho_get_item", {"kref": kref}))

    @get("/items/fulltext-search", summary="Typo-tolerant search over items, best first", sync_to_thread=True)
    def fulltext_search(
        self, state: State,
        text: Annotated[str, QueryParameter(name="query", min_length=1, max_length=2000,
                                            description="the words to look for")],
        context: Annotated[str, QueryParameter(
            max_length=512, description="a project or project/space path prefix")] = "",
        kind: Annotated[str, QueryParameter(max_length=128)] = "",
        include_deprecated: Annotated[bool, QueryParameter(description="deprecated items too")] = False,
        limit: Annotated[int, QueryParameter(ge=1, le=1000, description="at most this many items")] = 100,
    ) -> list[SearchHitShape]:
        found = _perform(state, "kumiho_fulltext_search", {
            "query": text, "context": context, "kind": kind, "include_deprecated": include_deprecated,
            "include_metadata": True, "limit": limit})
        return [SearchHitShape.model_validate(hit) for hit in found["results"]]

    # -- revisions --------------------------------------------------------------------------------------------
    @get("/revisions", summary="An item's revisions, by number (oldest first)", sync_to_thread=True)
    def list_revisions(self, state: State, item_kref: Kref) -> list[RevisionShape]:
        found = _perform(state, "kumiho_get_item_revisions", {"item_kref": item_kref, "include_metadata": True})
        # the tool lists newest first; Revka's revision strip reads them "ordered by number"
        return sorted((RevisionShape.model_validate(r) for r in found["revisions"]), key=lambda r: r.number)

    @get("/revisions/latest", summary="An item's latest revision (404 when it has none)", sync_to_thread=True)
    def latest_revision(self, state: State, item_kref: Kref) -> RevisionShape:
        return RevisionShape.model_validate(
            _perform(state, "kumiho_get_revision_by_tag", {"item_kref": item_kref, "tag": "latest"}))

    @get("/revisions/by-kref", summary="One revision: ?r=N in the kref, or the one holding a tag",
         sync_to_thread=True)
    def revision_by_kref(
        self, state: State, kref: Kref,
        t: Annotated[str, QueryParameter(max_length=128, description="a tag, for an item kref")] = "",
        tag: Annotated[str, QueryParameter(max_length=128, description="the same as t")] = "",
    ) -> RevisionShape:
        field, chosen = ("t", t) if t else ("tag", tag)
        if not chosen:
            return RevisionShape.model_validate(_perform(state, "kumiho_get_revision", {"kref": kref}))
        names.tag(chosen, field)
        if "?" in kref:  # ?r=, ?t= or &a= already choose: one of the two would be ignored
            raise InvalidArgument(f"{field}: give a tag only with an item kref (without ?r=, ?t= or &a=); kref "
                                  "already chooses its revision, so drop one of them", field=field)
        # by the tag itself, not by ?t= appended to the kref: a tag may hold '&' or '=' (t=a&r=1 is a tag); the
        # tag passed the same rules the operation applies, so what it refuses is the kref (or no holder of the tag)
        with field_as_sent("kref", "item_kref"):
            return RevisionShape.model_validate(
                _perform(state, "kumiho_get_revision_by_tag", {"item_kref": kref, "tag": chosen}))

    @post("/revisions/batch", summary=f"Many revisions in one call (at most {MAX_BATCH} krefs)",
          status_code=200, sync_to_thread=True)
    def batch_revisions(self, state: State, data: JSONBody[BatchRevisionsBody]) -> BatchRevisionsShape:
        requested = len(data.item_krefs) + len(data.revision_krefs)
        if requested > MAX_BATCH:
            raise InvalidArgument(f"item_krefs: give at most {MAX_BATCH} krefs in item_krefs and revision_krefs "
                                  f"together ({requested} given); split the batch", field="item_krefs")
        chunks = [("revision_krefs", data.revision_krefs[i:i + _BATCH_CHUNK])
                  for i in range(0, len(data.revision_krefs), _BATCH_CHUNK)]
        chunks += [("item_krefs", data.item_krefs[i:i + _BATCH_CHUNK])
                   for i in range(0, len(data.item_krefs), _BATCH_CHUNK)]
        revisions: list[RevisionShape] = []
        missing: list[tuple[str, str]] = []
        for field, krefs_ in chunks or [("revision_krefs", [])]:  # none at all: the operation says what to give
            found = _perform(state, "kumiho_batch_get_revisions",
                             {field: krefs_, "tag": data.tag, "allow_partial": True})
            revisions += [RevisionShape.model_validate(r) for r in found["revisions"]]
            missing += [(field, k) for k in found["not_found"]]
        if missing and not data.allow_partial:
            shown = ", ".join(k for _, k in missing[:5]) + (" …" if len(missing) > 5 else "")
            raise NotFound(f"{missing[0][0]}: {len(missing)} of the {requested} requested revisions do not exist "
                           f"({shown}); pass allow_partial=true to get the others", field=missing[0][0])
        return BatchRevisionsShape(revisions=revisions, not_found=[k for _, k in missing],
                                   requested_count=requested, found_count=len(revisions))

    # -- edges, bundles, artifacts ----------------------------------------------------------------------------
    @get("/edges", summary="A revision's edges (an item kref: its latest revision's)", sync_to_thread=True)
    def edges(
        self, state: State, kref: Kref,
        direction: Annotated[Literal["0", "1", "2", "outgoing", "incoming", "both", "out", "in"], QueryParameter(
            description="0 outgoing, 1 incoming, 2 both (Kumiho's numbers) or the words")] = "0",
        edge_type: Annotated[str, QueryParameter(max_length=50, description="only edges of this type")] = "",
    ) -> list[EdgeShape]:
        args: dict[str, Any] = {"revision_kref": kref, "direction": _DIRECTIONS[direction]}
        if edge_type:
            args["edge_type"] = edge_type
        with field_as_sent("kref", "revision_kref"):
            found = _perform(state, "kumiho_get_edges", args)
        return [EdgeShape.model_validate(e) for e in found["edges"]]

    @get("/bundles/members", summary="A bundle's members", sync_to_thread=True)
    def bundle_members(self, state: State, bundle_kref: Kref) -> BundleMembersShape:
        found = _perform(state, "kumiho_get_bundle_members", {"bundle_kref": bundle_kref})
        return BundleMembersShape.model_validate({"members": found["members"], "total_count": found["count"]})

    @get("/artifacts", summary="A revision's artifacts", sync_to_thread=True)
    def artifacts(self, state: State, revision_kref: Kref) -> list[ArtifactShape]:
        found = _perform(state, "kumiho_get_artifacts", {"revision_kref": revision_kref})
        return [_artifact(a) for a in found["artifacts"]]

    # -- the by-kref reads Revka's dashboard reaches through its Kumiho proxy ---------------------------------
    @get("/bundles/by-kref", summary="One bundle (an item of kind bundle)", sync_to_thread=True)
    def bundle(self, state: State, kref: Kref) -> ItemShape:
        with field_as_sent("kref", "bundle_kref"):
            return ItemShape.model_validate(_perform(state, "kumiho_get_bundle", {"bundle_kref": kref}))

    @get("/artifacts/by-kref", summary="One artifact: its kref, or a revision kref and the artifact's name",
         sync_to_thread=True)
    def artifact(
        self, state: State,
        kref: Annotated[str, QueryParameter(max_length=1024, description="the artifact's kref (…?r=N&a=name)")] = "",
        revision_kref: Annotated[str, QueryParameter(max_length=1024, description="with name")] = "",
        name: Annotated[str, QueryParameter(max_length=128, description="with revision_kref")] = "",
    ) -> ArtifactShape:
        if not kref and not (revision_kref and name):
            raise InvalidArgument("kref: give the artifact's kref, or revision_kref and name", field="kref")
        field = "kref" if kref else "revision_kref"
        with field_as_sent(field, "artifact_kref"):
            found = _perform(state, "kumiho_get_artifact", {"artifact_kref": kref or f"{revision_kref}&a={name}"})
        return _artifact(found)

    @get("/artifacts/by-location", summary="The artifacts stored at a location", sync_to_thread=True)
    def artifacts_at(
        self, state: State, location: Annotated[str, QueryParameter(min_length=1, max_length=4096)],
    ) -> list[ArtifactShape]:
        return [_artifact(a) for a in _perform(state, "kumiho_get_artifacts_by_location",
                                               {"location": location})["artifacts"]]
