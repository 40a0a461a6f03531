"""Artifacts: named pointers from a revision to a file path or URI (the appliance never reads the file). A
location inside the data directory is kept resolved (``..`` and symbolic links), as the MCP tools keep it."""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from appliance.core import kref as krefs
from appliance.core import names
from appliance.core.model import Artifact
from appliance.errors import AlreadyExists, InvalidArgument, NotFound
from appliance.grpc_api import convert
from appliance.grpc_api.descriptor import message
from appliance.grpc_api.rpcs._boundary import named, redacted
from appliance.grpc_api.server import Rpc, RpcCall
from appliance.services.revisions import artifact_location

MAX_LOCATION = 4096  # characters of a file path or URI (the MCP tools take the same bound)


def location(call: RpcCall, value: str) -> str:
    if len(value) > MAX_LOCATION:
        raise InvalidArgument(f"location: at most {MAX_LOCATION} characters", field="location")
    return artifact_location(call.services.data_dir.root, value)


def _revision_kref(request: Any, field: str = "revision_kref") -> str:
    text = convert.uri(getattr(request, field), field)
    krefs.parse(text, field)
    return text


def create_artifact(call: RpcCall, request: Any) -> Message:
    """An artifact of that name already there is returned when it points to the same location
    (``ALREADY_EXISTS`` with ``exists_error``); pointing elsewhere, it is ``ALREADY_EXISTS`` rather than a
    silent keep of the old location."""
    text = _revision_kref(request)
    names.artifact_name(request.name, "name")
    args = redacted(revision_kref=text, artifact_name=request.name, location=location(call, request.location),
                    metadata=dict(request.metadata))
    names.metadata(args["metadata"])
    graph = call.services.graph

    def job() -> Artifact:
        with named("revision_kref"):
            revision = graph.get_revision(args["revision_kref"])
        try:
            found = graph.get_artifact(f"{revision.kref}&a={args['artifact_name']}")
        except NotFound:
            return graph.create_artifact(revision.kref, args["artifact_name"], args["location"], args["metadata"])
        if request.exists_error or found.location != args["location"]:
            elsewhere = "" if found.location == args["location"] else f" and points to {found.location!r}"
            raise AlreadyExists(f"name: {found.kref} already exists{elsewhere}", field="name")
        return found

    return convert.artifact_response(graph.atomic(job))


def get_artifact(call: RpcCall, request: Any) -> Message:
    text = _revision_kref(request)
    names.artifact_name(request.name, "name")
    graph = call.services.graph
    with named("revision_kref"):
        revision = graph.get_revision(text)
    with named("name"):
        return convert.artifact_response(graph.get_artifact(f"{revision.kref}&a={request.name}"))


def get_artifacts(call: RpcCall, request: Any) -> Message:
    text = _revision_kref(request)
    graph = call.services.graph
    with named("revision_kref"):
        artifacts = graph.list_artifacts(graph.get_revision(text).kref)
    return message("GetArtifactsResponse")(artifacts=[convert.artifact_response(a) for a in artifacts])


def get_artifacts_by_location(call: RpcCall, request: Any) -> Message:
    artifacts = call.services.graph.artifacts_by_location(location(call, request.location))
    return message("GetArtifactsByLocationResponse")(artifacts=[convert.artifact_response(a) for a in artifacts])


def delete_artifact(call: RpcCall, request: Any) -> Message:
    text = convert.uri(request.kref, "kref")
    if krefs.parse(text, "kref").artifact is None:
        raise InvalidArgument("kref: name the artifact to delete with ?r=<number>&a=<name>", field="kref")
    graph = call.services.graph

    def job() -> Artifact:
        artifact = graph.get_artifact(text)
        graph.delete_artifact(artifact.kref)
        return artifact

    with named("kref"):
        gone = graph.atomic(job)
    return convert.status(f"deleted {gone.kref}")


def update_artifact_metadata(call: RpcCall, request: Any) -> Message:
    text = convert.uri(request.kref, "kref")
    krefs.parse(text, "kref")
    args = redacted(kref=text, metadata=dict(request.metadata))
    with named("kref"):
        return convert.artifact_response(call.services.graph.update_artifact_metadata(args["kref"],
                                                                                      args["metadata"]))


def set_default_artifact(call: RpcCall, request: Any) -> Message:
    """The artifact a revision or item kref without ``&a=`` resolves to (ResolveLocation, GetArtifact)."""
    text = _revision_kref(request)
    names.artifact_name(request.artifact_name, "artifact_name")
    graph = call.services.graph

    def job() -> str:
        revision = graph.get_revision(text)
        graph.set_default_artifact(revision.kref, request.artifact_name)
        return revision.kref

    try:
        with named("revision_kref"):
            kref = graph.atomic(job)
    except NotFound as exc:
        if exc.field == "name":  # the store's argument; the request's is artifact_name
            exc.field, exc.message = "artifact_name", f"artifact_name: {exc.message}"
        raise
    return convert.status(f"{request.artifact_name!r} is the default artifact of {kref}")


RPCS: dict[str, Rpc] = {
    "CreateArtifact": create_artifact, "GetArtifact": get_artifact, "GetArtifacts": get_artifacts,
    "GetArtifactsByLocation": get_artifacts_by_location, "DeleteArtifact": delete_artifact,
    "UpdateArtifactMetadata": update_artifact_metadata, "SetDefaultArtifact": set_default_artifact,
}
