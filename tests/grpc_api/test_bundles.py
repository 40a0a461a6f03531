"""Bundles over Kumiho's gRPC service, against a real appliance: create (the existing one returned), members
added and removed as bundle revisions, membership as of a revision, the history, and the error codes."""

from __future__ import annotations

import grpc

from tests.appliance_process import Running
from tests.grpc_api.conftest import Stub, kref, msg, rpc_error
from tests.grpc_api.world import build


def _member(stub: Stub, method: str, bundle: str, item: str, **metadata: str) -> object:
    request = "AddBundleMemberRequest" if method == "AddBundleMember" else "RemoveBundleMemberRequest"
    return stub.call(method, msg(request, bundle_kref=kref(bundle), member_item_kref=kref(item), metadata=metadata))


def test_membership_is_recorded_revision_by_revision(appliance: Running, stub: Stub, unique: str) -> None:
    a, b = build(appliance.base_url, unique, items=(("s", "a", "note"), ("s", "b", "note")))
    made = stub.call("CreateBundle", msg("CreateBundleRequest", parent_path=f"/{unique}/s", bundle_name="topic",
                                         metadata={"purpose": "test"}))
    bundle = made.kref.uri
    assert bundle == f"kref://{unique}/s/topic.bundle" and made.kind == "bundle"
    again = stub.call("CreateBundle", msg("CreateBundleRequest", parent_path=f"/{unique}/s", bundle_name="topic"))
    assert again.kref.uri == bundle  # the existing bundle, as it is
    added = _member(stub, "AddBundleMember", bundle, a, why="first")
    assert added.success and added.new_revision.number == 2 and added.new_revision.latest
    assert added.new_revision.metadata["member_item_kref"] == a
    _member(stub, "AddBundleMember", bundle, b)
    removed = _member(stub, "RemoveBundleMember", bundle, a)
    assert removed.success and removed.new_revision.number == 4

    def members(number: int | None = None) -> tuple[list[str], int, int]:
        request = msg("GetBundleMembersRequest", bundle_kref=kref(bundle))
        if number is not None:
            request.revision_number = number
        answer = stub.call("GetBundleMembers", request)
        return [m.item_kref.uri for m in answer.members], answer.revision_number, answer.total_count

    assert members() == ([b], 4, 1)
    assert members(3) == ([a, b], 3, 2)
    assert members(1) == ([], 1, 0)
    error = rpc_error(members, 9)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith("revision_number:")
    history = stub.call("GetBundleHistory", msg("GetBundleHistoryRequest", bundle_kref=kref(bundle))).history
    assert [(h.revision_number, h.action, h.member_item_kref.uri) for h in history] == [
        (1, "CREATED", ""), (2, "ADDED", a), (3, "ADDED", b), (4, "REMOVED", a)]
    assert history[1].metadata["why"] == "first"


def test_bundle_errors(appliance: Running, stub: Stub, unique: str) -> None:
    a, b = build(appliance.base_url, unique, items=(("s", "a", "note"), ("s", "b", "note")))
    bundle = stub.call("CreateBundle", msg("CreateBundleRequest", parent_path=f"/{unique}/s",
                                           bundle_name="set")).kref.uri
    _member(stub, "AddBundleMember", bundle, a)
    error = rpc_error(_member, stub, "AddBundleMember", bundle, a)
    assert error.code() == grpc.StatusCode.ALREADY_EXISTS and error.details().startswith("member_item_kref:")
    error = rpc_error(_member, stub, "RemoveBundleMember", bundle, b)
    assert error.code() == grpc.StatusCode.NOT_FOUND and error.details().startswith("member_item_kref:")
    error = rpc_error(_member, stub, "AddBundleMember", bundle, f"kref://{unique}/s/ghost.note")
    assert error.code() == grpc.StatusCode.NOT_FOUND and error.details().startswith("member_item_kref:")
    error = rpc_error(_member, stub, "AddBundleMember", bundle, bundle)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith("member_item_kref:")
    error = rpc_error(_member, stub, "AddBundleMember", a, b)  # not a bundle
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith("bundle_kref:")
    error = rpc_error(stub.call, "GetBundleMembers", msg("GetBundleMembersRequest",
                                                        bundle_kref=kref(f"kref://{unique}/s/none.bundle")))
    assert error.code() == grpc.StatusCode.NOT_FOUND and error.details().startswith("bundle_kref:")
    error = rpc_error(stub.call, "CreateBundle", msg("CreateBundleRequest", parent_path=f"/{unique}/nowhere",
                                                    bundle_name="x"))
    assert error.code() == grpc.StatusCode.NOT_FOUND and error.details().startswith("parent_path:")
    error = rpc_error(stub.call, "CreateBundle", msg("CreateBundleRequest", parent_path=f"/{unique}/s",
                                                    bundle_name="bad name/"))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith("bundle_name:")
