"""Spaces over Kumiho's gRPC: idempotent creation (or ALREADY_EXISTS when asked), lookup by path or kref,
child listings paged with cursors to the end, metadata, and deletion with and without force."""

from __future__ import annotations

import grpc

from appliance.grpc_api.descriptor import message
from tests.grpc_api.conftest import Stub, kref, msg, rpc_error


def _project(stub: Stub, name: str) -> None:
    stub.CreateProject(message("CreateProjectRequest")(name=name), timeout=30)


def _space(stub: Stub, parent: str, name: str, **fields: object) -> object:
    return stub.CreateSpace(msg("CreateSpaceRequest", parent_path=parent, space_name=name, **fields), timeout=30)


def test_create_is_idempotent_unless_exists_error(stub: Stub, unique: str) -> None:
    _project(stub, unique)
    first = _space(stub, f"/{unique}", "chars", metadata={"a": "1"})
    assert (first.path, first.name, first.type) == (f"/{unique}/chars", "chars", "root")
    again = _space(stub, f"/{unique}", "chars", metadata={"b": "2"})
    assert again.path == first.path and again.created_at == first.created_at
    assert dict(again.metadata) == {"a": "1", "b": "2"}  # the metadata given is merged in
    refused = rpc_error(stub.CreateSpace, msg("CreateSpaceRequest", parent_path=f"/{unique}", space_name="chars",
                                              exists_error=True), timeout=30)
    assert refused.code() == grpc.StatusCode.ALREADY_EXISTS
    nested = _space(stub, f"/{unique}/chars", "heroes")
    assert (nested.path, nested.type) == (f"/{unique}/chars/heroes", "sub")
    orphan = rpc_error(stub.CreateSpace, msg("CreateSpaceRequest", parent_path=f"/{unique}/nope",
                                             space_name="x"), timeout=30)
    assert orphan.code() == grpc.StatusCode.NOT_FOUND


def test_get_space_by_path_or_kref_and_not_found(stub: Stub, unique: str) -> None:
    _project(stub, unique)
    _space(stub, f"/{unique}", "a")
    by_path = stub.GetSpace(msg("GetSpaceRequest", path_or_kref=f"/{unique}/a"), timeout=30)
    by_kref = stub.GetSpace(msg("GetSpaceRequest", path_or_kref=f"kref://{unique}/a"), timeout=30)
    assert by_path.path == by_kref.path == f"/{unique}/a"
    root = stub.GetSpace(msg("GetSpaceRequest", path_or_kref=f"/{unique}"), timeout=30)
    assert root.path == f"/{unique}"
    missing = rpc_error(stub.GetSpace, msg("GetSpaceRequest", path_or_kref=f"/{unique}/b"), timeout=30)
    assert missing.code() == grpc.StatusCode.NOT_FOUND
    empty = rpc_error(stub.GetSpace, msg("GetSpaceRequest", path_or_kref=""), timeout=30)
    assert empty.code() == grpc.StatusCode.INVALID_ARGUMENT and "path_or_kref" in (empty.details() or "")


def _all_pages(stub: Stub, parent: str, recursive: bool, size: int) -> tuple[list[str], int]:
    paths, cursor, pages = [], "", 0
    while True:
        answer = stub.GetChildSpaces(msg("GetChildSpacesRequest", parent_path=parent, recursive=recursive,
                                         pagination=msg("PaginationRequest", page_size=size, cursor=cursor)),
                                     timeout=30)
        paths += [s.path for s in answer.spaces]
        pages += 1
        assert answer.pagination.total_count >= len(paths)
        if not answer.pagination.has_more:
            assert answer.pagination.next_cursor == ""
            return paths, pages
        cursor = answer.pagination.next_cursor


def test_child_spaces_page_with_cursors_to_the_end(stub: Stub, unique: str) -> None:
    _project(stub, unique)
    names = [f"s{i:02d}" for i in range(7)]
    for name in names:
        _space(stub, f"/{unique}", name)
    _space(stub, f"/{unique}/s00", "deep")
    direct, pages = _all_pages(stub, f"/{unique}", recursive=False, size=3)
    assert direct == [f"/{unique}/{n}" for n in names] and pages == 3
    everything, _ = _all_pages(stub, f"/{unique}", recursive=True, size=2)
    assert sorted(everything) == sorted([f"/{unique}/{n}" for n in names] + [f"/{unique}/s00/deep"])
    default = stub.GetChildSpaces(msg("GetChildSpacesRequest", parent_path=f"/{unique}"), timeout=30)
    assert len(default.spaces) == 7 and not default.pagination.has_more  # no pagination: the default page
    roots = stub.GetChildSpaces(msg("GetChildSpacesRequest", parent_path="/"), timeout=30)
    assert f"/{unique}" in {s.path for s in roots.spaces}
    too_big = rpc_error(stub.GetChildSpaces, msg("GetChildSpacesRequest", parent_path=f"/{unique}",
                                                 pagination=msg("PaginationRequest", page_size=1001)), timeout=30)
    assert too_big.code() == grpc.StatusCode.INVALID_ARGUMENT and "page_size" in (too_big.details() or "")
    forged = rpc_error(stub.GetChildSpaces, msg("GetChildSpacesRequest", parent_path=f"/{unique}",
                                                pagination=msg("PaginationRequest", cursor="forged!")), timeout=30)
    assert forged.code() == grpc.StatusCode.INVALID_ARGUMENT and "cursor" in (forged.details() or "")


def test_space_metadata_by_path(stub: Stub, unique: str) -> None:
    _project(stub, unique)
    _space(stub, f"/{unique}", "m")
    updated = stub.UpdateSpaceMetadata(msg("UpdateMetadataRequest", kref=kref(f"/{unique}/m"),
                                           metadata={"space_class": "working"}), timeout=30)
    assert dict(updated.metadata) == {"space_class": "working"}


def test_delete_space_needs_force_when_not_empty(stub: Stub, unique: str) -> None:
    _project(stub, unique)
    _space(stub, f"/{unique}", "full")
    _space(stub, f"/{unique}/full", "child")
    refused = rpc_error(stub.DeleteSpace, msg("DeleteSpaceRequest", path=f"/{unique}/full"), timeout=30)
    assert refused.code() == grpc.StatusCode.FAILED_PRECONDITION and "force" in (refused.details() or "")
    assert stub.DeleteSpace(msg("DeleteSpaceRequest", path=f"/{unique}/full", force=True), timeout=30).success
    gone = rpc_error(stub.GetSpace, msg("GetSpaceRequest", path_or_kref=f"/{unique}/full/child"), timeout=30)
    assert gone.code() == grpc.StatusCode.NOT_FOUND
