"""Deprecation (soft delete) and the tenant's usage."""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from appliance.core.redaction import refuse_credential
from appliance.grpc_api import convert
from appliance.grpc_api.descriptor import message
from appliance.grpc_api.server import Rpc, RpcCall

NO_LIMIT = 0  # node_limit when the appliance sets none (it sets none: the disk is the limit)
TENANT = "local"
_NODES = ("projects", "spaces", "items", "revisions", "artifacts")


def set_deprecated(call: RpcCall, request: Any) -> Message:
    """Hide (``deprecated=true``) or restore a project, item, revision or artifact; a space is refused."""
    kref = convert.uri(request.kref, "kref")
    refuse_credential(kref, "kref")
    found = call.services.graph.set_deprecated(kref, request.deprecated)
    return convert.status(f"{found.kref} {'deprecated' if request.deprecated else 'restored'}")


def get_tenant_usage(call: RpcCall, request: Any) -> Message:
    """Nodes in the graph (projects, spaces, items, revisions and artifacts); no limit (``node_limit`` 0)."""
    counts = call.services.graph.stats()
    return message("TenantUsageResponse")(node_count=sum(counts[k] for k in _NODES), node_limit=NO_LIMIT,
                                          tenant_id=TENANT)


RPCS: dict[str, Rpc] = {"SetDeprecated": set_deprecated, "GetTenantUsage": get_tenant_usage}
