"""Spaces: ``/project/a/b`` paths inside a project.

``CreateSpace`` with ``exists_error=false`` (what every client sends) returns the space that exists, with the
given metadata merged in; with ``exists_error=true`` it answers ``ALREADY_EXISTS``. ``GetSpace`` takes a path
or a space kref. ``GetChildSpaces`` pages with cursors (page size 1–1000, default 100); an empty parent or
``/`` lists the projects' root spaces."""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from appliance.core import kref as krefs
from appliance.errors import AlreadyExists, InvalidArgument
from appliance.grpc_api import convert
from appliance.grpc_api.descriptor import message
from appliance.grpc_api.rpcs._boundary import redacted
from appliance.grpc_api.server import Rpc, RpcCall


def create_space(call: RpcCall, request: Any) -> Message:
    args = redacted(space_path=request.parent_path, space_hint=request.space_name,
                    metadata=dict(request.metadata))
    graph = call.services.graph
    parent = krefs.space_path(krefs.parse_space_path(args["space_path"], "parent_path"))
    try:
        space = graph.create_space(parent, args["space_hint"], args["metadata"], exists_error=True)
    except AlreadyExists:
        if request.exists_error:
            raise AlreadyExists(f"space_name: space {parent}/{request.space_name} already exists",
                                field="space_name") from None
        path = f"{parent}/{request.space_name}"
        space = graph.update_space_metadata(path, args["metadata"]) if args["metadata"] else graph.get_space(path)
    return convert.space_response(space)


def get_space(call: RpcCall, request: Any) -> Message:
    return convert.space_response(call.services.graph.get_space(_path(request.path_or_kref, "path_or_kref")))


def get_child_spaces(call: RpcCall, request: Any) -> Message:
    size, cursor = convert.page_request(request)
    page = call.services.graph.list_spaces(request.parent_path.strip() if request.parent_path.strip("/") else "",
                                           recursive=request.recursive, page_size=size, cursor=cursor)
    return message("GetChildSpacesResponse")(spaces=[convert.space_response(s) for s in page.items],
                                             pagination=convert.pagination(page))


def delete_space(call: RpcCall, request: Any) -> Message:
    path = _path(request.path, "path")
    call.services.graph.delete_space(path, force=request.force)
    return convert.status(f"space {path} deleted")


def update_space_metadata(call: RpcCall, request: Any) -> Message:
    """The SDK sends the space's path (not a kref) in ``kref.uri``; a space kref works too."""
    path = _path(convert.uri(request.kref, "kref"), "kref")
    args = redacted(metadata=dict(request.metadata))
    return convert.space_response(call.services.graph.update_space_metadata(path, args["metadata"]))


def _path(value: str, field: str) -> str:
    if not value.strip("/") or value.strip() == "kref://":
        raise InvalidArgument(f"{field}: give a space path such as /CognitiveMemory/notes", field=field)
    return krefs.space_path(krefs.parse_space_path(value.strip(), field))


RPCS: dict[str, Rpc] = {
    "CreateSpace": create_space, "GetSpace": get_space, "GetChildSpaces": get_child_spaces,
    "DeleteSpace": delete_space, "UpdateSpaceMetadata": update_space_metadata,
}
