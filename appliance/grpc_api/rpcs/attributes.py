"""Attributes: single metadata keys of any entity, addressed by kref — or, for a space, by its path.

Kumiho's SDK sends a space's *path* (``/project/a``) in ``kref.uri`` for a space's attributes; a space kref
(``kref://project/a``) names the space too. ``GetAttribute`` of a key the entity lacks answers
``exists=false``; of an entity that does not exist, ``NOT_FOUND``."""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from appliance.core import redaction
from appliance.errors import InvalidArgument
from appliance.grpc_api import convert
from appliance.grpc_api.descriptor import message
from appliance.grpc_api.rpcs._boundary import redacted
from appliance.grpc_api.server import Rpc, RpcCall


def set_attribute(call: RpcCall, request: Any) -> Message:
    """The value crosses the write boundary as metadata under its key does (``password``, ``api_key``… values
    become ``[secret]`` whole); the key addresses the attribute, so one holding a credential is refused."""
    ref, key = _address(request)
    redaction.refuse_credential(key, "key")
    args = redacted(kref=ref, metadata={key: request.value})
    [(stored_key, value)] = args["metadata"].items()
    call.services.graph.set_attribute(args["kref"], stored_key, value)
    return convert.status(f"{key} set")


def get_attribute(call: RpcCall, request: Any) -> Message:
    ref, key = _address(request)
    found = call.services.graph.get_attribute(ref, key)
    return message("GetAttributeResponse")(key=key, value=found.value or "", exists=found.exists)


def delete_attribute(call: RpcCall, request: Any) -> Message:
    ref, key = _address(request)
    existed = call.services.graph.delete_attribute(ref, key)
    return convert.status(f"{key} deleted" if existed else f"{key} was not set", success=True)


def _address(request: Any) -> tuple[str, str]:
    ref = convert.uri(request.kref, "kref").strip()
    if not request.key:
        raise InvalidArgument("key: give the attribute's key", field="key")
    return ref, request.key


RPCS: dict[str, Rpc] = {"SetAttribute": set_attribute, "GetAttribute": get_attribute,
                        "DeleteAttribute": delete_attribute}
