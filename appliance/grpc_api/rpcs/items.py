"""Items: ``(space, item_name, kind)``, the things revisions are made of.

``CreateItem`` with ``exists_error=false`` returns the item that exists; ``true`` answers ``ALREADY_EXISTS``.
``GetItem`` resolves ``parent_path + "/" + item_name``, so an ``item_name`` holding slashes works: the SDK's
``get_item_by_kref`` splits a kref at its first ``/`` and sends ``parent_path="/P"``, ``item_name="a/b/name"``.
``GetItems`` lists one space; ``ItemSearch`` crosses spaces with ``context_filter`` a string prefix of
``project/space…`` (or a glob such as ``project-*`` or ``*/characters/*``) and ``item_name_filter`` a
substring or a glob (``hero*``). Both page with cursors (1–1000, default 100) and hide deprecated items (and
archived projects' items) unless ``include_deprecated``."""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from appliance.core import kref as krefs
from appliance.errors import AlreadyExists, InvalidArgument
from appliance.grpc_api import convert
from appliance.grpc_api.descriptor import message
from appliance.grpc_api.rpcs._boundary import redacted
from appliance.grpc_api.server import Rpc, RpcCall


def create_item(call: RpcCall, request: Any) -> Message:
    args = redacted(space_path=request.parent_path, item_name=request.item_name,
                    kind=request.kind)
    space = _parent(args["space_path"])
    try:
        item = call.services.graph.create_item(space, args["item_name"], args["kind"], exists_error=True)
    except AlreadyExists:
        if request.exists_error:
            raise AlreadyExists(f"item_name: item {_item_kref(space, request.item_name, request.kind)} already "
                                "exists", field="item_name") from None
        item = call.services.graph.get_item(_item_kref(space, request.item_name, request.kind))
    return convert.item_response(item)


def get_item(call: RpcCall, request: Any) -> Message:
    if not request.item_name:
        raise InvalidArgument("item_name: give the item's name (the part of its kref before the kind)",
                              field="item_name")
    kref = _item_kref(_parent(request.parent_path), request.item_name, request.kind)
    return convert.item_response(call.services.graph.get_item(kref))


def get_items(call: RpcCall, request: Any) -> Message:
    size, cursor = convert.page_request(request)
    page = call.services.graph.list_items(
        _parent(request.parent_path), name_filter=request.item_name_filter, kind_filter=request.kind_filter,
        include_deprecated=request.include_deprecated, page_size=size, cursor=cursor)
    return message("GetItemsResponse")(items=[convert.item_response(i) for i in page.items],
                                       pagination=convert.pagination(page))


def item_search(call: RpcCall, request: Any) -> Message:
    size, cursor = convert.page_request(request)
    page = call.services.graph.search_items(
        context_filter=request.context_filter, name_filter=request.item_name_filter,
        kind_filter=request.kind_filter, include_deprecated=request.include_deprecated, page_size=size,
        cursor=cursor)
    return message("GetItemsResponse")(items=[convert.item_response(i) for i in page.items],
                                       pagination=convert.pagination(page))


def delete_item(call: RpcCall, request: Any) -> Message:
    kref = convert.uri(request.kref, "kref")
    call.services.graph.delete_item(kref, force=request.force)
    return convert.status(f"item {kref} deleted")


def update_item_metadata(call: RpcCall, request: Any) -> Message:
    kref = convert.uri(request.kref, "kref")
    args = redacted(metadata=dict(request.metadata))
    return convert.item_response(call.services.graph.update_item_metadata(kref, args["metadata"]))


def _parent(path: str) -> str:
    return krefs.space_path(krefs.parse_space_path(path, "parent_path"))


def _item_kref(space: str, item_name: str, kind: str) -> str:
    name = f"{item_name.strip('/')}.{kind}" if kind else item_name.strip("/")
    return f"kref://{space.strip('/')}/{name}"


RPCS: dict[str, Rpc] = {
    "CreateItem": create_item, "GetItem": get_item, "GetItems": get_items, "ItemSearch": item_search,
    "DeleteItem": delete_item, "UpdateItemMetadata": update_item_metadata,
}
