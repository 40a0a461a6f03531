"""Tags over Kumiho's gRPC service, against a real appliance: one revision per item holds a tag at a time,
tagging moves it and the move is kept (``WasTagged``, ``ResolveKref`` at a time), ``published`` moves like any
tag and freezes nothing, ``latest`` is the appliance's."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import grpc

from tests.appliance_process import Running
from tests.grpc_api.conftest import Stub, kref, msg, rpc_error
from tests.grpc_api.world import build


def _item_with_revisions(appliance: Running, stub: Stub, project: str, count: int) -> str:
    [item] = build(appliance.base_url, project, items=(("s", "hero", "model"),))
    for n in range(count):
        stub.call("CreateRevision", msg("CreateRevisionRequest", item_kref=kref(item), metadata={"n": str(n + 1)}))
    return item


def _tag(stub: Stub, revision: str, tag: str) -> None:
    assert stub.call("TagRevision", msg("TagRevisionRequest", kref=kref(revision), tag=tag)).success


def _has(stub: Stub, revision: str, tag: str) -> bool:
    return bool(stub.call("HasTag", msg("HasTagRequest", kref=kref(revision), tag=tag)).has_tag)


def _was(stub: Stub, revision: str, tag: str) -> bool:
    return bool(stub.call("WasTagged", msg("WasTaggedRequest", kref=kref(revision), tag=tag)).was_tagged)


def _resolve(stub: Stub, item: str, **selectors: str) -> int:
    return int(stub.call("ResolveKref", msg("ResolveKrefRequest", kref=item, **selectors)).number)


def _now() -> str:
    """The time now, returned once the clock reads later: a change made after this call is stamped after it
    (the appliance stamps changes with the same clock, to the microsecond), whatever the clock's resolution."""
    moment = datetime.now(UTC)
    for _ in range(10_000):
        if datetime.now(UTC) > moment:
            return moment.isoformat()
        time.sleep(0.001)
    raise AssertionError(f"the clock stayed at {moment} for 10,000 sleeps")


def test_a_tag_moves_and_its_history_answers_by_time(appliance: Running, stub: Stub, unique: str) -> None:
    item = _item_with_revisions(appliance, stub, unique, 3)
    before = _now()
    _tag(stub, f"{item}?r=1", "approved")
    between = _now()
    _tag(stub, f"{item}?r=2", "approved")
    assert not _has(stub, f"{item}?r=1", "approved") and _has(stub, f"{item}?r=2", "approved")
    assert _was(stub, f"{item}?r=1", "approved") and not _was(stub, f"{item}?r=3", "approved")
    assert _resolve(stub, item, tag="approved") == 2
    assert _resolve(stub, item, tag="approved", time=between) == 1
    assert _resolve(stub, f"{item}?t=approved") == 2  # the selector inside the kref
    error = rpc_error(stub.call, "ResolveKref", msg("ResolveKrefRequest", kref=item, tag="approved", time=before))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert _resolve(stub, item, time=between) == 3  # latest then: every revision existed already
    error = rpc_error(stub.call, "ResolveKref", msg("ResolveKrefRequest", kref=item, time="201001010000"))
    assert error.code() == grpc.StatusCode.NOT_FOUND  # the SDK's YYYYMMDDHHMM form, before anything existed
    error = rpc_error(stub.call, "ResolveKref", msg("ResolveKrefRequest", kref=item, time="yesterday"))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith("time:")
    fetched = stub.call("GetRevision", msg("KrefRequest", kref=kref(f"{item}?r=2")))
    assert sorted(fetched.tags) == ["approved"]


def test_published_moves_and_freezes_nothing(appliance: Running, stub: Stub, unique: str) -> None:
    item = _item_with_revisions(appliance, stub, unique, 2)
    _tag(stub, f"{item}?r=1", "published")
    first = stub.call("GetRevision", msg("KrefRequest", kref=kref(f"{item}?r=1")))
    assert first.published and not first.latest
    _tag(stub, f"{item}?r=1", "reviewed")  # a published revision takes more tags
    updated = stub.call("UpdateRevisionMetadata", msg("UpdateMetadataRequest", kref=kref(f"{item}?r=1"),
                                                      metadata={"status": "ok"}))
    assert updated.metadata["status"] == "ok" and updated.published
    _tag(stub, f"{item}?r=2", "published")  # moves from r=1
    assert not _has(stub, f"{item}?r=1", "published") and _was(stub, f"{item}?r=1", "published")
    assert _resolve(stub, item, tag="published") == 2
    third = stub.call("CreateRevision", msg("CreateRevisionRequest", item_kref=kref(item)))
    assert third.latest and not third.published  # latest moves to the new revision, published stays
    second = stub.call("GetRevision", msg("KrefRequest", kref=kref(f"{item}?r=2")))
    assert second.published and not second.latest and list(second.tags) == ["published"]
    assert _was(stub, f"{item}?r=2", "latest")  # latest's moves are history too


def test_untagging_and_the_tags_a_client_may_not_apply(appliance: Running, stub: Stub, unique: str) -> None:
    item = _item_with_revisions(appliance, stub, unique, 1)
    _tag(stub, f"{item}?r=1", "done")
    assert stub.call("UnTagRevision", msg("UnTagRevisionRequest", kref=kref(f"{item}?r=1"), tag="done")).success
    again = stub.call("UnTagRevision", msg("UnTagRevisionRequest", kref=kref(f"{item}?r=1"), tag="done"))
    assert not again.success and "did not hold" in again.message
    assert not _has(stub, f"{item}?r=1", "done") and _was(stub, f"{item}?r=1", "done")
    error = rpc_error(stub.call, "TagRevision", msg("TagRevisionRequest", kref=kref(f"{item}?r=1"), tag="latest"))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith("tag:")
    error = rpc_error(stub.call, "TagRevision", msg("TagRevisionRequest", kref=kref(f"{item}?r=1"), tag=""))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith("tag:")
    error = rpc_error(stub.call, "TagRevision", msg("TagRevisionRequest", kref=kref(f"{item}?r=4"), tag="x"))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    error = rpc_error(stub.call, "HasTag", msg("HasTagRequest", kref=kref(f"kref://{unique}/s/no.model"), tag="x"))
    assert error.code() == grpc.StatusCode.NOT_FOUND
