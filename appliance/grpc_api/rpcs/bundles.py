"""Bundles: items of the reserved kind ``bundle`` that collect other items. Each membership change is a new
bundle revision recording it, so members can be read as of any bundle revision and the history listed."""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from appliance.core import kref as krefs
from appliance.core import names
from appliance.core.model import Item, Revision
from appliance.errors import NotFound
from appliance.graph import GraphStore
from appliance.grpc_api import convert
from appliance.grpc_api.descriptor import message
from appliance.grpc_api.rpcs._boundary import named, redacted
from appliance.grpc_api.rpcs.edges import kref_of
from appliance.grpc_api.server import Rpc, RpcCall


def _bundle(graph: GraphStore, text: str) -> Item:
    with named("bundle_kref"):
        return graph.get_bundle(text)


def create_bundle(call: RpcCall, request: Any) -> Message:
    """The bundle already there is returned as it is."""
    segments = krefs.parse_space_path(request.parent_path, "parent_path")
    names.item_name(request.bundle_name, "bundle_name")
    args = redacted(space_path=request.parent_path, bundle_name=request.bundle_name,
                    metadata=dict(request.metadata))
    names.metadata(args["metadata"])
    kref = f"{krefs.SCHEME}{'/'.join(segments)}/{request.bundle_name}.{names.RESERVED_KIND}"
    graph = call.services.graph

    def job() -> Item:
        try:
            return graph.get_bundle(kref)
        except NotFound:
            with named("parent_path", "space_path"):
                return graph.create_bundle(args["space_path"], args["bundle_name"], args["metadata"])

    return convert.item_response(graph.atomic(job))


def _change(call: RpcCall, request: Any, add: bool) -> Revision:
    """Add or remove a member (ALREADY_EXISTS when it is one already, NOT_FOUND when it is none); returns
    the bundle revision that records the change."""
    args = redacted(kref=kref_of(request, "bundle_kref"), item_kref=kref_of(request, "member_item_kref"),
                    metadata=dict(request.metadata))
    names.metadata(args["metadata"])
    graph = call.services.graph

    def job() -> Revision:
        bundle = _bundle(graph, args["kref"])
        with named("member_item_kref", "item_kref"):
            member = graph.get_item(args["item_kref"]).kref
            change = graph.add_bundle_member if add else graph.remove_bundle_member
            number = change(bundle.kref, member, args["metadata"])
        return graph.get_revision(f"{bundle.kref}?r={number}")

    return graph.atomic(job)


def add_bundle_member(call: RpcCall, request: Any) -> Message:
    revision = _change(call, request, add=True)
    return message("AddBundleMemberResponse")(success=True, message=f"added in {revision.kref}",
                                              new_revision=convert.revision_response(revision))


def remove_bundle_member(call: RpcCall, request: Any) -> Message:
    revision = _change(call, request, add=False)
    return message("RemoveBundleMemberResponse")(success=True, message=f"removed in {revision.kref}",
                                                 new_revision=convert.revision_response(revision))


def get_bundle_members(call: RpcCall, request: Any) -> Message:
    """Members as of a bundle revision (``revision_number``; the newest when unset)."""
    text = kref_of(request, "bundle_kref")
    graph = call.services.graph
    number = request.revision_number if request.HasField("revision_number") else None
    with named("bundle_kref"):
        members, number = graph.bundle_members(_bundle(graph, text).kref, number)
    return message("GetBundleMembersResponse")(members=[convert.bundle_member(m) for m in members],
                                               revision_number=number, total_count=len(members))


def get_bundle_history(call: RpcCall, request: Any) -> Message:
    """Every membership change, oldest first (CREATED, ADDED, REMOVED)."""
    text = kref_of(request, "bundle_kref")
    graph = call.services.graph
    changes = graph.bundle_history(_bundle(graph, text).kref)
    return message("GetBundleHistoryResponse")(history=[message("BundleRevisionHistory")(
        revision_number=c.revision_number, action=c.action, member_item_kref=convert.kref(c.member_item_kref),
        author=c.author, username=c.username, created_at=c.created_at, metadata=c.metadata) for c in changes])


RPCS: dict[str, Rpc] = {
    "CreateBundle": create_bundle, "AddBundleMember": add_bundle_member,
    "RemoveBundleMember": remove_bundle_member, "GetBundleMembers": get_bundle_members,
    "GetBundleHistory": get_bundle_history,
}
