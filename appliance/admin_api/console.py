"""The appliance's own console API under ``/api/v1``: statistics, the memory graph, one memory inspected,
deprecate/restore, tags in use and the effective settings (docs/admin-api.md).

Thin routes: the reads are assembled in console_reads.py, the graph view in services/memory_graph.py, and
deprecation runs the typed operations the MCP tools run (``kumiho_set_metadata``, ``kumiho_deprecate_item``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from litestar import Controller, Response, get, post
from litestar.datastructures import State
from litestar.params import JSONBody, QueryParameter

from appliance.admin_api import console_reads
from appliance.admin_api import console_shapes as shapes
from appliance.admin_api.config_view import settings_view
from appliance.admin_api.errors import field_as_sent
from appliance.admin_api.params import (
    MAX_KINDS,
    MAX_MEMORY_TYPE,
    MAX_MEMORY_TYPES,
    Kinds,
    MemoryTypes,
    filter_values,
    moment,
    time_parameter,
    values_parameter,
)
from appliance.core import kref as krefs
from appliance.core import names
from appliance.errors import InvalidArgument, NotFound
from appliance.memory.views import item_view
from appliance.services.memory_graph import GraphQuery, memory_graph

if TYPE_CHECKING:
    from appliance.app import Services

DEPRECATION_REASON = "deprecation_reason"  # the item metadata key a deprecation's reason is kept under
GRAPH_DEFAULT = 2000  # memories one graph answer shows unless asked
GRAPH_MAX = 10_000

Kref = Annotated[str, QueryParameter(description="an item kref (kref://project/space/name.kind), or a revision's "
                                     "(…?r=N)", min_length=1, max_length=shapes.KREF_MAX)]


class ConsoleController(Controller):
    path = "/api/v1"
    tags = ("console",)

    @get("/stats", summary="Counts per project, space, kind and memory type; index lag; disk use",
         sync_to_thread=True)
    def stats(self, state: State) -> shapes.StatsResponse:
        return console_reads.stats(state.services)

    @get("/graph", summary="The memory graph (nodes, edges, spaces), filtered and bounded", sync_to_thread=True)
    def graph(
        self,
        state: State,
        project: Annotated[str | None, QueryParameter(
            description="the project (default: the space's project, else the default project)", max_length=256)] = None,
        space: Annotated[str | None, QueryParameter(
            description="a space path (/project/a/b): it and the spaces below it", max_length=1024)] = None,
        kind: Annotated[Kinds, values_parameter(MAX_KINDS, names.MAX_SEGMENT, "item kinds")] = (),
        memory_type: Annotated[MemoryTypes, values_parameter(
            MAX_MEMORY_TYPES, MAX_MEMORY_TYPE, "memory types of the latest revision")] = (),
        since: Annotated[str | None, time_parameter("created at or after this RFC 3339 time")] = None,
        until: Annotated[str | None, time_parameter("created before this RFC 3339 time")] = None,
        limit: Annotated[int, QueryParameter(
            description=f"memories shown at most (newest first); 1..{GRAPH_MAX}", ge=1, le=GRAPH_MAX)] = GRAPH_DEFAULT,
    ) -> Response[shapes.GraphResponse]:
        services = state.services
        project, context = _project_and_space(project, space, services.settings.kumiho.default_project)
        kinds = filter_values(kind)
        for value in kinds:
            names.kind(value, "kind")
        start, end = moment(since, "since"), moment(until, "until")
        if start and end and start >= end:
            raise InvalidArgument("until: give a time after since", field="until")
        services.graph.get_project(project)  # before the space: a missing project is what to say
        if context:
            try:
                services.graph.get_space("/" + context)
            except NotFound as exc:
                raise NotFound(exc.message, field="space") from None
        found = memory_graph(services.graph, GraphQuery(
            project, context, kinds, filter_values(memory_type), since=start, until=end, limit=limit))
        sampling = None
        if found.truncated:
            sampling = shapes.Sampling(method="newest_first", detail=(
                f"{found.total} memories match; the {limit} newest are shown (with the spaces on the way to them "
                "and the edges among them). Narrow the filters or raise limit (at most "
                f"{GRAPH_MAX}) to see more."))
        # built to GraphResponse's shape by memory_graph and sent as it is: validating 10k nodes and 30k edges
        # into models cost more (0.4-0.8 s) than reading them from the graph; the tests validate the shape
        answer = {**found.view, "truncated": found.truncated, "total_nodes": found.total,
                  "sampling": sampling.model_dump() if sampling else None}
        return Response(answer)  # type: ignore[arg-type]  # GraphResponse's shape, not the model

    @get("/inspect", summary="One memory: item, revision, revisions, tags, artifact text, provenance",
         sync_to_thread=True)
    def inspect(self, state: State, kref: Kref) -> shapes.InspectResponse:
        return console_reads.inspect(state.services, kref)

    @post("/deprecate", summary="Deprecate a memory (hidden from search and listings; restorable)",
          sync_to_thread=True, status_code=200)
    def deprecate(self, state: State, data: JSONBody[shapes.DeprecateRequest]) -> shapes.ItemView:
        return _set_deprecated(state.services, data.kref, True, data.reason)

    @post("/restore", summary="Restore a deprecated memory", sync_to_thread=True, status_code=200)
    def restore(self, state: State, data: JSONBody[shapes.RestoreRequest]) -> shapes.ItemView:
        return _set_deprecated(state.services, data.kref, False, None)

    @get("/tags", summary="Tags in use, with how many revisions hold each now (the 1000 most held)",
         sync_to_thread=True)
    def tags_in_use(self, state: State, project: Annotated[str | None, QueryParameter(
            description="one project (default: every project)", max_length=256)] = None) -> shapes.TagsResponse:
        graph = state.services.graph
        if project is not None:
            names.project_name(project, "project")
            graph.get_project(project)
        tags, truncated = console_reads.tags_in_use(graph, project or "")
        return shapes.TagsResponse(project=project, tags=tags, truncated=truncated)

    @get("/config", summary="The effective settings, secrets masked", sync_to_thread=False)
    def config(self, state: State) -> shapes.ConfigResponse:
        view, secrets = settings_view(state.services.settings)
        return shapes.ConfigResponse(settings=view, secrets=secrets)


def _project_and_space(project: str | None, space: str | None, default: str) -> tuple[str, str]:
    """(project, space path without the leading "/" or "") from the query; a space names its project."""
    if project is not None:
        names.project_name(project, "project")
    if not space or not space.strip("/"):
        return project or default, ""
    segments = krefs.parse_space_path(space, "space")
    if project is not None and segments[0] != project:
        raise InvalidArgument(f"space: {space!r} is not in project {project!r}; give a path that starts with "
                              f"/{project}/ (or leave project out)", field="space")
    return segments[0], "/".join(segments)


def _set_deprecated(services: Services, kref: str, deprecated: bool, reason: str | None) -> shapes.ItemView:
    """Run the typed operations in one transaction: the reason lands with the deprecation or not at all, and a
    restore takes the reason away with the deprecation (a restored memory has none)."""
    parsed = krefs.parse(kref, "kref")
    if not parsed.is_item or parsed.revision is not None or parsed.tag or parsed.time or parsed.artifact:
        raise InvalidArgument("kref: name an item (kref://project/space/name.kind), not a revision", field="kref")

    def job() -> dict[str, Any]:
        if deprecated and reason and reason.strip():
            services.perform("kumiho_set_metadata", {"kref": kref, "metadata": {DEPRECATION_REASON: reason}},
                             client=None)
        services.perform("kumiho_deprecate_item", {"item_kref": kref, "deprecated": deprecated}, client=None)
        if not deprecated:
            services.graph.delete_attribute(kref, DEPRECATION_REASON)
        return item_view(services.graph.get_item(kref))

    with field_as_sent("kref", None, "item_kref", "kref"):
        return shapes.ItemView.model_validate(services.graph.atomic(job))
