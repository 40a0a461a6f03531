"""Revisions: resolving krefs (by tag and by time), creating, reading, listing, updating and deleting an item's
revisions. ``latest`` follows the newest revision by itself; tags are tags.py's, bulk creation batch.py's."""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from appliance.core import kref as krefs
from appliance.core import names, redaction
from appliance.core.model import Revision, every_item
from appliance.errors import AlreadyExists, InvalidArgument, NotFound
from appliance.graph import GraphStore
from appliance.grpc_api import convert
from appliance.grpc_api.descriptor import message
from appliance.grpc_api.rpcs._boundary import named, redacted
from appliance.grpc_api.server import Rpc, RpcCall

MAX_BATCH_GET = 1000  # krefs one BatchGetRevisions names (revision and item krefs together)
IDEMPOTENCY_HEADER = "x-idempotency-key"  # CreateRevision's retry-safe identity (call metadata)
IDEMPOTENCY_KEY = "idempotency_key"  # the revision metadata that records it (a reflect's captures use it too)
MAX_IDEMPOTENCY_KEY = 200
_EVERY = 1000  # revisions read per store call when a listing asks for all of them


def optional(request: Message, name: str) -> str:
    """An ``optional string`` field's value ("" when unset)."""
    return str(getattr(request, name)) if request.HasField(name) else ""


def resolve(graph: GraphStore, text: str, tag: str = "", time: str = "") -> Revision:
    """The revision a kref leads to: ``?r=N``; else the revision holding ``tag`` (the kref's own ``?t=``, else
    ``latest``), now or at ``time`` (``YYYYMMDDHHMM`` or ISO-8601)."""
    parsed = krefs.parse(text, "kref")
    with named("kref"):
        if not tag and not time:
            return graph.get_revision(text)
        return graph.revision_by_tag(str(parsed.item()), tag or parsed.tag or names.LATEST, time or parsed.time)


def resolve_kref(call: RpcCall, request: Any) -> Message:
    text = convert.uri(request.kref, "kref")
    return convert.revision_response(resolve(call.services.graph, text, optional(request, "tag"),
                                             optional(request, "time")))


def resolve_location(call: RpcCall, request: Any) -> Message:
    """Where a kref's artifact lives: ``&a=name``, else the revision's default artifact, else its first."""
    text = convert.uri(request.kref, "kref")
    graph = call.services.graph
    artifact_name = krefs.parse(text, "kref").artifact
    revision = resolve(graph, text, optional(request, "tag"), optional(request, "time"))
    with named("kref"):
        artifact = graph.get_artifact(f"{revision.kref}&a={artifact_name}" if artifact_name else revision.kref)
    return message("ResolveLocationResponse")(location=artifact.location, resolved_kref=convert.kref(artifact.kref),
                                              artifact_name=artifact.name)


def get_revision(call: RpcCall, request: Any) -> Message:
    """``?r=N`` → that revision; an item kref → its latest (``?t=tag`` / ``&time=`` select too)."""
    text = convert.uri(request.kref, "kref")
    krefs.parse(text, "kref")
    with named("kref"):
        return convert.revision_response(call.services.graph.get_revision(text))


def get_revisions(call: RpcCall, request: Any) -> Message:
    """An item's revisions, newest first (as Kumiho's server orders them). Without ``pagination`` every
    revision (the SDK reads them in one call); with it, one page and its cursor."""
    text = convert.uri(request.item_kref, "item_kref")
    krefs.parse(text, "item_kref")
    graph = call.services.graph
    with named("item_kref"):
        if not request.HasField("pagination"):
            revisions = every_item(lambda cursor: graph.list_revisions(text, page_size=_EVERY, cursor=cursor))
            return message("GetRevisionsResponse")(revisions=[convert.revision_response(r) for r in revisions])
        size, cursor = convert.page_request(request)
        page = graph.list_revisions(text, page_size=size, cursor=cursor)
    return message("GetRevisionsResponse")(revisions=[convert.revision_response(r) for r in page.items],
                                           pagination=convert.pagination(page))


def batch_get_revisions(call: RpcCall, request: Any) -> Message:
    """Revisions by kref and the revision of each item holding ``tag`` (default ``latest``), in the order
    asked; what does not exist is listed in ``not_found`` (or, without ``allow_partial``, refused)."""
    wanted = [convert.uri(k, f"revision_krefs[{i}]") for i, k in enumerate(request.revision_krefs)]
    items = [convert.uri(k, f"item_krefs[{i}]") for i, k in enumerate(request.item_krefs)]
    asked = len(wanted) + len(items)
    if asked > MAX_BATCH_GET:
        raise InvalidArgument(f"revision_krefs: at most {MAX_BATCH_GET} krefs per call, revision and item krefs "
                              f"together (got {asked}); split the batch", field="revision_krefs")
    found, missing = call.services.graph.batch_revisions(wanted, items, request.tag or names.LATEST)
    if missing and not request.allow_partial:
        field = missing[0][0]
        shown = ", ".join(k for _, k in missing[:5]) + (" …" if len(missing) > 5 else "")
        raise NotFound(f"{field}: {len(missing)} of the {asked} requested revisions do not exist ({shown}); "
                       "set allow_partial to get the others", field=field)
    return message("BatchGetRevisionsResponse")(
        revisions=[convert.revision_response(r) for r in found], not_found=[k for _, k in missing],
        requested_count=asked, found_count=len(found))


def create_revision(call: RpcCall, request: Any) -> Message:
    """The item's next revision (``latest`` moves to it). ``number`` names the revision wanted: 0 is the
    next; an existing one is returned (``ALREADY_EXISTS`` with ``exists_error``). An ``x-idempotency-key``
    call metadata makes a retry return the revision the first call created. ``embedding_text`` is accepted:
    the search index embeds the revision's semantic metadata (title, summary, …) as for every revision."""
    text = convert.uri(request.item_kref, "item_kref")
    parsed = krefs.parse(text, "item_kref")
    if parsed.revision is not None or parsed.tag is not None or parsed.time is not None:
        raise InvalidArgument("item_kref: name the item without ?r= or ?t= (the new revision gets the next "
                              "number, or the one `number` gives)", field="item_kref")
    key = call.metadata.get(IDEMPOTENCY_HEADER, "")
    if len(key) > MAX_IDEMPOTENCY_KEY:
        raise InvalidArgument(f"{IDEMPOTENCY_HEADER}: at most {MAX_IDEMPOTENCY_KEY} characters",
                              field=IDEMPOTENCY_HEADER)
    redaction.refuse_credential(key, IDEMPOTENCY_HEADER)  # it identifies the call: stored as given, not redacted
    args = redacted(item_kref=text, metadata=dict(request.metadata))
    meta = names.metadata(args["metadata"])
    if key:
        meta[IDEMPOTENCY_KEY] = key
    graph = call.services.graph

    def job() -> Revision:
        with named("item_kref"):
            item = graph.get_item(args["item_kref"])
        if item.kind == names.RESERVED_KIND:
            raise InvalidArgument(f"item_kref: {item.kref} is a bundle, whose revisions record member changes; "
                                  "use AddBundleMember", field="item_kref")
        if key and (earlier := _with_key(graph, item.kref, key)) is not None:
            return earlier
        if request.number:
            earlier = _numbered(graph, item.kref, request.number, request.exists_error)
            if earlier is not None:
                return earlier
        return graph.create_revision(item.kref, meta)

    return convert.revision_response(graph.atomic(job))


def _with_key(graph: GraphStore, item_kref: str, key: str) -> Revision | None:
    """The revision an earlier call with this idempotency key created (one filtered read of the project's
    revisions, as BatchCreateRevisions replays its keys), or None. A key is one call's identity: a key that
    already names a revision of another item is refused rather than reused."""
    found = graph.revisions_with_metadata(krefs.parse(item_kref).project, IDEMPOTENCY_KEY, [key]).get(key)
    if found is not None and found.item_kref != item_kref:
        raise InvalidArgument(f"{IDEMPOTENCY_HEADER}: this key already names {found.kref}, a revision of another "
                              "item; give each new revision a key of its own", field=IDEMPOTENCY_HEADER)
    return found


def _numbered(graph: GraphStore, item_kref: str, number: int, exists_error: bool) -> Revision | None:
    """The revision ``number`` names when it exists; None when it is the next one (to be created)."""
    upcoming = graph.peek_next_revision(item_kref)
    if number == upcoming:
        return None
    if 1 <= number < upcoming:
        try:
            existing = graph.get_revision(f"{item_kref}?r={number}")
        except NotFound:
            raise InvalidArgument(f"number: revision {number} of {item_kref} was deleted and numbers are not "
                                  f"reused; give 0 for the next ({upcoming})", field="number") from None
        if exists_error:
            raise AlreadyExists(f"number: {existing.kref} already exists", field="number")
        return existing
    raise InvalidArgument(f"number: revisions are numbered in sequence; the next of {item_kref} is {upcoming} "
                          "(give 0 for the next)", field="number")


def delete_revision(call: RpcCall, request: Any) -> Message:
    """Without ``force`` a revision holding ``published``, or that other revisions link to, is kept
    (FAILED_PRECONDITION saying why); ``latest`` falls back to the newest left."""
    text = convert.uri(request.kref, "kref")
    if krefs.parse(text, "kref").revision is None:
        raise InvalidArgument("kref: name the revision to delete with ?r=<number>", field="kref")
    with named("kref"):
        gone = call.services.graph.delete_revision(text, force=request.force)
    return convert.status(f"deleted {gone.kref}")


def peek_next_revision(call: RpcCall, request: Any) -> Message:
    text = convert.uri(request.item_kref, "item_kref")
    krefs.parse(text, "item_kref")
    with named("item_kref"):
        return message("PeekNextRevisionResponse")(number=call.services.graph.peek_next_revision(text))


def update_revision_metadata(call: RpcCall, request: Any) -> Message:
    """Merge keys into a revision's metadata (a revision's content stays; its metadata is editable and the
    previous values are kept in the audit trail)."""
    text = convert.uri(request.kref, "kref")
    krefs.parse(text, "kref")
    args = redacted(kref=text, metadata=dict(request.metadata))
    with named("kref"):
        return convert.revision_response(call.services.graph.update_revision_metadata(args["kref"],
                                                                                      args["metadata"]))


RPCS: dict[str, Rpc] = {
    "ResolveKref": resolve_kref, "ResolveLocation": resolve_location, "CreateRevision": create_revision,
    "GetRevision": get_revision, "GetRevisions": get_revisions, "BatchGetRevisions": batch_get_revisions,
    "DeleteRevision": delete_revision, "PeekNextRevision": peek_next_revision,
    "UpdateRevisionMetadata": update_revision_metadata,
}
