"""Revisions over Kumiho's gRPC service, against a real appliance: numbering and ``latest``, resolution of item
krefs, explicit numbers and idempotency keys, listing newest first with paging, batch reads, metadata updates,
deletion, and revisions written here becoming searchable as the MCP tools' do."""

from __future__ import annotations

import time

import grpc

from tests.appliance_process import Running
from tests.grpc_api.conftest import Stub, kref, msg, rpc_error
from tests.grpc_api.world import build, tool


def _create(stub: Stub, item: str, **metadata: str) -> object:
    return stub.call("CreateRevision", msg("CreateRevisionRequest", item_kref=kref(item), metadata=metadata))


def test_revisions_are_numbered_and_latest_follows_the_newest(appliance: Running, stub: Stub, unique: str) -> None:
    [item] = build(appliance.base_url, unique, items=(("s", "hero", "model"),))
    first = _create(stub, item, title="first")
    second = _create(stub, item, title="second")
    assert (first.number, second.number) == (1, 2)
    assert second.kref.uri == f"{item}?r=2" and second.item_kref.uri == item and second.latest
    assert list(second.tags) == ["latest"] and second.name == "hero.model"
    current = stub.call("GetRevision", msg("KrefRequest", kref=kref(item)))  # an item kref: its latest
    assert current.number == 2 and current.metadata["title"] == "second"
    older = stub.call("GetRevision", msg("KrefRequest", kref=kref(f"{item}?r=1")))
    assert older.number == 1 and not older.latest and older.metadata["title"] == "first"
    assert stub.call("PeekNextRevision", msg("PeekNextRevisionRequest", item_kref=kref(item))).number == 3
    resolved = stub.call("ResolveKref", msg("ResolveKrefRequest", kref=item))
    assert resolved.number == 2
    short = stub.call("ResolveKref", msg("ResolveKrefRequest", kref=f"kref://{unique}/s/hero"))  # no kind: unique
    assert short.kref.uri == f"{item}?r=2"


def test_missing_and_malformed_references_are_refused_naming_the_field(appliance: Running, stub: Stub,
                                                                      unique: str) -> None:
    [item] = build(appliance.base_url, unique, items=(("s", "hero", "model"),))
    error = rpc_error(stub.call, "GetRevision", msg("KrefRequest", kref=kref(item)))  # no revision yet
    assert error.code() == grpc.StatusCode.NOT_FOUND
    _create(stub, item)
    error = rpc_error(stub.call, "GetRevision", msg("KrefRequest", kref=kref(f"{item}?r=9")))
    assert error.code() == grpc.StatusCode.NOT_FOUND and "does not exist" in error.details()
    error = rpc_error(stub.call, "ResolveKref", msg("ResolveKrefRequest", kref=f"kref://{unique}/s/ghost.model"))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    error = rpc_error(stub.call, "GetRevision", msg("KrefRequest", kref=kref("not-a-kref")))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith("kref:")
    error = rpc_error(stub.call, "CreateRevision", msg("CreateRevisionRequest"))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith("item_kref:")
    error = rpc_error(_create, stub, f"kref://{unique}/s/ghost.model")
    assert error.code() == grpc.StatusCode.NOT_FOUND and "ghost.model" in error.details()
    error = rpc_error(stub.call, "CreateRevision", msg("CreateRevisionRequest", item_kref=kref(item),
                                                      metadata={"k" * 300: "x"}))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith("metadata.kkk")


def test_explicit_numbers_and_exists_error(appliance: Running, stub: Stub, unique: str) -> None:
    [item] = build(appliance.base_url, unique, items=(("s", "hero", "model"),))
    made = stub.call("CreateRevision", msg("CreateRevisionRequest", item_kref=kref(item), number=1))
    assert made.number == 1
    again = stub.call("CreateRevision", msg("CreateRevisionRequest", item_kref=kref(item), number=1))
    assert again.kref.uri == made.kref.uri  # the existing revision, nothing written
    error = rpc_error(stub.call, "CreateRevision", msg("CreateRevisionRequest", item_kref=kref(item), number=1,
                                                      exists_error=True))
    assert error.code() == grpc.StatusCode.ALREADY_EXISTS
    error = rpc_error(stub.call, "CreateRevision", msg("CreateRevisionRequest", item_kref=kref(item), number=5))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith("number:")
    assert stub.call("PeekNextRevision", msg("PeekNextRevisionRequest", item_kref=kref(item))).number == 2


def test_an_idempotency_key_makes_a_retry_return_the_first_revision(appliance: Running, stub: Stub,
                                                                   unique: str) -> None:
    [item] = build(appliance.base_url, unique, items=(("s", "hero", "model"),))
    request = msg("CreateRevisionRequest", item_kref=kref(item), metadata={"title": "once"})
    first = stub.CreateRevision(request, metadata=(("x-idempotency-key", "turn-7"),), timeout=30)
    retry = stub.CreateRevision(request, metadata=(("x-idempotency-key", "turn-7"),), timeout=30)
    assert retry.kref.uri == first.kref.uri == f"{item}?r=1"
    other = stub.CreateRevision(request, metadata=(("x-idempotency-key", "turn-8"),), timeout=30)
    assert other.number == 2
    listed = stub.call("GetRevisions", msg("GetRevisionsRequest", item_kref=kref(item)))
    assert len(listed.revisions) == 2
    elsewhere = stub.CreateItem(msg("CreateItemRequest", parent_path=f"/{unique}/s", item_name="villain",
                                    kind="model"), timeout=30)
    taken = rpc_error(stub.CreateRevision, msg("CreateRevisionRequest", item_kref=elsewhere.kref),
                      metadata=(("x-idempotency-key", "turn-7"),), timeout=30)
    assert taken.code() == grpc.StatusCode.INVALID_ARGUMENT and f"{item}?r=1" in (taken.details() or "")
    assert (taken.details() or "").startswith("x-idempotency-key:")


def test_bundles_take_no_revisions_directly(appliance: Running, stub: Stub, unique: str) -> None:
    build(appliance.base_url, unique)
    bundle = stub.call("CreateBundle", msg("CreateBundleRequest", parent_path=f"/{unique}/s", bundle_name="set"))
    error = rpc_error(_create, stub, bundle.kref.uri)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "AddBundleMember" in error.details()


def test_listing_is_newest_first_whole_or_paged(appliance: Running, stub: Stub, unique: str) -> None:
    [item] = build(appliance.base_url, unique, items=(("s", "hero", "model"),))
    for n in range(5):
        _create(stub, item, n=str(n))
    whole = stub.call("GetRevisions", msg("GetRevisionsRequest", item_kref=kref(item)))
    assert [r.number for r in whole.revisions] == [5, 4, 3, 2, 1]
    seen, cursor = [], ""
    while True:
        page = stub.call("GetRevisions", msg("GetRevisionsRequest", item_kref=kref(item), pagination=msg(
            "PaginationRequest", page_size=2, cursor=cursor)))
        seen += [r.number for r in page.revisions]
        assert page.pagination.total_count == 5
        if not page.pagination.has_more:
            break
        cursor = page.pagination.next_cursor
    assert seen == [5, 4, 3, 2, 1]
    error = rpc_error(stub.call, "GetRevisions", msg("GetRevisionsRequest", item_kref=kref(item), pagination=msg(
        "PaginationRequest", page_size=1001)))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "page_size" in error.details()


def test_batch_reads_by_revision_and_by_item_tag(appliance: Running, stub: Stub, unique: str) -> None:
    a, b = build(appliance.base_url, unique, items=(("s", "a", "note"), ("s", "b", "note")))
    for item in (a, a, b):
        _create(stub, item)
    stub.call("TagRevision", msg("TagRevisionRequest", kref=kref(f"{a}?r=1"), tag="published"))
    ghost = f"kref://{unique}/s/ghost.note"
    answer = stub.call("BatchGetRevisions", msg(
        "BatchGetRevisionsRequest", revision_krefs=[kref(f"{a}?r=2"), kref(f"{b}?r=7")],
        item_krefs=[kref(a), kref(b), kref(ghost)], tag="published", allow_partial=True))
    assert [r.kref.uri for r in answer.revisions] == [f"{a}?r=2", f"{a}?r=1"]
    assert list(answer.not_found) == [f"{b}?r=7", b, ghost]
    assert (answer.requested_count, answer.found_count) == (5, 2)
    latest = stub.call("BatchGetRevisions", msg("BatchGetRevisionsRequest", item_krefs=[kref(a), kref(b)],
                                                allow_partial=True))  # the tag defaults to latest
    assert [r.kref.uri for r in latest.revisions] == [f"{a}?r=2", f"{b}?r=1"]
    empty = stub.call("BatchGetRevisions", msg("BatchGetRevisionsRequest"))
    assert not empty.revisions and empty.requested_count == 0
    error = rpc_error(stub.call, "BatchGetRevisions", msg("BatchGetRevisionsRequest", item_krefs=[kref(ghost)]))
    assert error.code() == grpc.StatusCode.NOT_FOUND and error.details().startswith("item_krefs[0]:")
    error = rpc_error(stub.call, "BatchGetRevisions", msg("BatchGetRevisionsRequest",
                                                         item_krefs=[kref(a)] * 1001, allow_partial=True))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "at most 1000" in error.details()


def test_metadata_merges_and_deletion_keeps_published_without_force(appliance: Running, stub: Stub,
                                                                    unique: str) -> None:
    [item] = build(appliance.base_url, unique, items=(("s", "hero", "model"),))
    _create(stub, item, title="t", status="draft")
    _create(stub, item)
    updated = stub.call("UpdateRevisionMetadata", msg("UpdateMetadataRequest", kref=kref(f"{item}?r=1"),
                                                      metadata={"status": "superseded", "extra": "1"}))
    assert dict(updated.metadata) == {"title": "t", "status": "superseded", "extra": "1"}
    stub.call("TagRevision", msg("TagRevisionRequest", kref=kref(f"{item}?r=2"), tag="published"))
    error = rpc_error(stub.call, "DeleteRevision", msg("DeleteRevisionRequest", kref=kref(f"{item}?r=2")))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION and "published" in error.details()
    error = rpc_error(stub.call, "DeleteRevision", msg("DeleteRevisionRequest", kref=kref(item)))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "?r=" in error.details()
    assert stub.call("DeleteRevision", msg("DeleteRevisionRequest", kref=kref(f"{item}?r=2"), force=True)).success
    assert stub.call("GetRevision", msg("KrefRequest", kref=kref(item))).number == 1  # latest fell back
    error = rpc_error(stub.call, "DeleteRevision", msg("DeleteRevisionRequest", kref=kref(f"{item}?r=2")))
    assert error.code() == grpc.StatusCode.NOT_FOUND


def test_revisions_written_here_become_searchable(appliance: Running, stub: Stub, unique: str) -> None:
    [item] = build(appliance.base_url, unique, items=(("s", "lighthouse", "note"),))
    _create(stub, item, title="Quasimodo rings the cathedral bells", summary="bells of Notre Dame")
    deadline = time.monotonic() + 60
    while True:  # the index catches up in the background, as it does for the MCP tools' writes
        found = tool(appliance.base_url, "kumiho_fulltext_search", query="cathedral bells", context=f"/{unique}")
        hits = [h.get("kref") or h.get("item_kref") or h.get("item", {}).get("kref") for h in found["results"]]
        if item in hits or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert item in hits, found


def test_credentials_are_redacted_before_anything_is_stored(appliance: Running, stub: Stub, unique: str) -> None:
    [item] = build(appliance.base_url, unique, items=(("s", "hero", "model"),))
    secret = "api_key=sk-abcdefghijklmnopqrstuvwxyz123456"
    made = _create(stub, item, note=f"the deploy key is {secret}")
    assert "sk-abc" not in made.metadata["note"] and "[secret]" in made.metadata["note"]
    updated = stub.call("UpdateRevisionMetadata", msg("UpdateMetadataRequest", kref=kref(made.kref.uri),
                                                      metadata={"more": secret}))
    assert "sk-abc" not in str(dict(updated.metadata))
    batch = msg("BatchCreateRevisionsRequest", revisions=[msg("BatchRevisionRow", revision=msg(
        "CreateRevisionRequest", item_kref=kref(item), metadata={"note": secret}))])
    [row] = stub.call("BatchCreateRevisions", batch).results
    stored = stub.call("GetRevision", msg("KrefRequest", kref=kref(row.kref.uri)))
    assert "sk-abc" not in stored.metadata["note"]
    error = rpc_error(stub.call, "TagRevision", msg("TagRevisionRequest", kref=kref(made.kref.uri), tag=secret))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith("tag:")
    token = "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789"  # an idempotency key is stored as given: refused
    keyed = rpc_error(stub.CreateRevision, msg("CreateRevisionRequest", item_kref=kref(item), metadata={"k": "v"}),
                      metadata=(("x-idempotency-key", token),), timeout=30)
    assert keyed.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (keyed.details() or "").startswith("x-idempotency-key:") and token not in (keyed.details() or "")
    listed = stub.call("GetRevisions", msg("GetRevisionsRequest", item_kref=kref(item)))
    assert all(token not in str(dict(r.metadata)) for r in listed.revisions)
