"""Tags: named pointers to one revision of an item at a time. Tagging moves the tag from whichever revision of
the item held it (``published`` too: publishing is an accepted state, not a freeze), every move is kept with
its time span (``WasTagged``, ``ResolveKref`` with a time), and ``latest`` follows the newest revision."""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from appliance.core import kref as krefs
from appliance.core import names
from appliance.core.model import Revision
from appliance.grpc_api import convert
from appliance.grpc_api.descriptor import message
from appliance.grpc_api.rpcs._boundary import named, redacted
from appliance.grpc_api.server import Rpc, RpcCall


def _kref_and_tag(request: Any, user: bool) -> tuple[str, str]:
    text = convert.uri(request.kref, "kref")
    krefs.parse(text, "kref")
    (names.user_tag if user else names.tag)(request.tag)
    return text, request.tag


def tag_revision(call: RpcCall, request: Any) -> Message:
    text, tag = _kref_and_tag(request, user=True)
    args = redacted(kref=text, tag=tag)
    with named("kref"):
        revision = call.services.graph.tag_revision(args["kref"], args["tag"])
    return convert.status(f"tagged {revision.kref} {tag!r}")


def untag_revision(call: RpcCall, request: Any) -> Message:
    """``success`` is false when the revision did not hold the tag (nothing changed)."""
    text, tag = _kref_and_tag(request, user=True)
    args = redacted(kref=text, tag=tag)
    graph = call.services.graph

    def job() -> tuple[Revision, bool]:
        revision = graph.get_revision(args["kref"])  # first: a kref ?t=<tag> resolves no more afterwards
        return revision, graph.untag_revision(revision.kref, args["tag"])

    with named("kref"):
        revision, untagged = graph.atomic(job)
    return convert.status(f"untagged {revision.kref} {tag!r}" if untagged else
                          f"{revision.kref} did not hold tag {tag!r}", success=untagged)


def has_tag(call: RpcCall, request: Any) -> Message:
    """Whether the revision holds the tag now."""
    text, tag = _kref_and_tag(request, user=False)
    with named("kref"):
        return message("HasTagResponse")(has_tag=call.services.graph.has_tag(text, tag))


def was_tagged(call: RpcCall, request: Any) -> Message:
    """Whether the revision ever held the tag (now, or in the tag's history)."""
    text, tag = _kref_and_tag(request, user=False)
    with named("kref"):
        return message("WasTaggedResponse")(was_tagged=call.services.graph.was_tagged(text, tag))


RPCS: dict[str, Rpc] = {"TagRevision": tag_revision, "UnTagRevision": untag_revision, "HasTag": has_tag,
                        "WasTagged": was_tagged}
