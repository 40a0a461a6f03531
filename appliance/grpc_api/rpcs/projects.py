"""Projects: the top of Kumiho's hierarchy."""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from appliance.grpc_api import convert
from appliance.grpc_api.descriptor import message
from appliance.grpc_api.server import Rpc, RpcCall


def get_projects(call: RpcCall, request: Any) -> Message:
    projects = call.services.graph.list_projects(include_deprecated=request.include_deprecated)
    return message("GetProjectsResponse")(projects=[convert.project_response(p) for p in projects])


RPCS: dict[str, Rpc] = {"GetProjects": get_projects}
