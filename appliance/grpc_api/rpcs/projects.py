"""Projects: the top of Kumiho's hierarchy.

Kumiho's SDK names a project by its ``project_id`` (the UUID ``ProjectResponse`` carries) in every call after
``CreateProject``; the appliance accepts the project's name there too. A project that exists is refused on
create (``ALREADY_EXISTS``: its description would otherwise be dropped silently); the appliance has no project
limit, so ``RESOURCE_EXHAUSTED`` never comes. ``DeleteProject`` archives (restorable with
``UpdateProject(deprecated=false)``); with ``force`` it deletes for good, refused while another project
refers into it; ``HardDeleteProject`` is the two-call protocol (``AnalyzeProjectDeletion`` first)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from google.protobuf.message import Message

from appliance.core.model import Project
from appliance.errors import AlreadyExists, InvalidArgument, NotFound
from appliance.grpc_api import convert
from appliance.grpc_api.descriptor import message
from appliance.grpc_api.rpcs._boundary import redacted
from appliance.grpc_api.server import Rpc, RpcCall


def get_projects(call: RpcCall, request: Any) -> Message:
    projects = call.services.graph.list_projects(include_deprecated=request.include_deprecated)
    return message("GetProjectsResponse")(projects=[convert.project_response(p) for p in projects])


def create_project(call: RpcCall, request: Any) -> Message:
    args = redacted(project=request.name, description=request.description,
                    metadata=dict(request.metadata))
    graph = call.services.graph
    try:
        project = graph.create_project(args["project"], args["description"], args["metadata"], exists_error=True)
    except AlreadyExists:
        archived = " (archived: restore it with UpdateProject deprecated=false)" \
            if graph.get_project(request.name).deprecated else ""
        raise AlreadyExists(f"name: project {request.name!r} already exists{archived}; choose another name",
                            field="name") from None
    return convert.project_response(project)


def project_named(call: RpcCall, project_id: str) -> Project:
    """The project a request names by its id (or its name), archived ones included; NOT_FOUND otherwise."""
    if not project_id:
        raise InvalidArgument("project_id: give the project's id (ProjectResponse.project_id) or its name",
                              field="project_id")
    for project in call.services.graph.list_projects(include_deprecated=True):
        if project_id in (project.project_id, project.name):
            return project
    raise NotFound(f"project_id: no project has the id or name {project_id!r}", field="project_id")


def update_project(call: RpcCall, request: Any) -> Message:
    project = project_named(call, request.project_id)
    args = redacted(description=request.description, metadata=dict(request.metadata))
    updated = call.services.graph.update_project(
        project.name,
        description=args["description"] if request.HasField("description") else None,
        allow_public=request.allow_public if request.HasField("allow_public") else None,
        deprecated=request.deprecated if request.HasField("deprecated") else None,
        metadata=args["metadata"] or None)
    return convert.project_response(updated)


def analyze_project_deletion(call: RpcCall, request: Any) -> Message:
    project = project_named(call, request.project_id)
    impact = call.services.graph.deletion_impact(project.name)
    return message("ProjectDeletionImpactResponse")(
        impact_snapshot_id=impact.snapshot_id, impact_snapshot_hash=impact.snapshot_hash,
        project_id=impact.project_id, project_name=impact.project_name, blockers=impact.blockers,
        descendants=impact.descendants, created_at=datetime.now(UTC).isoformat())


def delete_project(call: RpcCall, request: Any) -> Message:
    project = project_named(call, request.project_id)
    graph = call.services.graph
    if not request.force:
        graph.delete_project(project.name)
        return convert.status(f"project {project.name!r} archived; UpdateProject(deprecated=false) restores it")
    impact = graph.deletion_impact(project.name)  # refused (FAILED_PRECONDITION) while others refer into it
    graph.hard_delete_project(project.name, impact.snapshot_id, impact.snapshot_hash)
    return convert.status(f"project {project.name!r} deleted with everything in it")


def hard_delete_project(call: RpcCall, request: Any) -> Message:
    if not request.confirmed:
        raise InvalidArgument("confirmed: set it to true to delete the project for good", field="confirmed")
    project = project_named(call, request.project_id)
    gone = call.services.graph.hard_delete_project(project.name, request.impact_snapshot_id,
                                                   request.impact_snapshot_hash)
    removed = ", ".join(f"{count} {name}" for name, count in gone.counts.items())
    return convert.status(f"project {project.name!r} deleted ({removed})")


RPCS: dict[str, Rpc] = {
    "GetProjects": get_projects, "CreateProject": create_project, "UpdateProject": update_project,
    "AnalyzeProjectDeletion": analyze_project_deletion, "DeleteProject": delete_project,
    "HardDeleteProject": hard_delete_project,
}
