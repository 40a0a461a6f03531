"""Items over Kumiho's gRPC: create semantics, GetItem with the SDK's slash-holding item names, listings and
ItemSearch paged with cursors and filtered, metadata, deprecation, and deletion."""

from __future__ import annotations

import grpc

from appliance.grpc_api.descriptor import message
from tests.grpc_api.conftest import Stub, kref, msg, rpc_error


def _tree(stub: Stub, project: str, *spaces: str) -> None:
    stub.CreateProject(message("CreateProjectRequest")(name=project), timeout=30)
    for path in spaces:
        parent, name = path.rsplit("/", 1)
        stub.CreateSpace(msg("CreateSpaceRequest", parent_path=f"/{project}{parent}", space_name=name), timeout=30)


def _item(stub: Stub, parent: str, name: str, kind: str, **fields: object) -> object:
    return stub.CreateItem(msg("CreateItemRequest", parent_path=parent, item_name=name, kind=kind, **fields),
                           timeout=30)


def test_create_item_semantics(stub: Stub, unique: str) -> None:
    _tree(stub, unique, "/chars")
    hero = _item(stub, f"/{unique}/chars", "hero", "model")
    assert hero.kref.uri == f"kref://{unique}/chars/hero.model"
    assert (hero.name, hero.item_name, hero.kind) == ("hero.model", "hero", "model")
    assert _item(stub, f"/{unique}/chars", "hero", "model").created_at == hero.created_at
    assert _item(stub, f"/{unique}/chars", "hero", "texture").kref.uri.endswith("hero.texture")  # own identity
    taken = rpc_error(stub.CreateItem, msg("CreateItemRequest", parent_path=f"/{unique}/chars", item_name="hero",
                                           kind="model", exists_error=True), timeout=30)
    assert taken.code() == grpc.StatusCode.ALREADY_EXISTS
    bundle = rpc_error(stub.CreateItem, msg("CreateItemRequest", parent_path=f"/{unique}/chars",
                                            item_name="b", kind="bundle"), timeout=30)
    assert bundle.code() == grpc.StatusCode.INVALID_ARGUMENT and "bundle" in (bundle.details() or "")
    nowhere = rpc_error(stub.CreateItem, msg("CreateItemRequest", parent_path=f"/{unique}/none",
                                             item_name="x", kind="model"), timeout=30)
    assert nowhere.code() == grpc.StatusCode.NOT_FOUND


def test_get_item_takes_the_sdks_split_at_the_first_slash(stub: Stub, unique: str) -> None:
    _tree(stub, unique, "/a", "/a/b")
    _item(stub, f"/{unique}/a/b", "deep", "note")
    _item(stub, f"/{unique}", "top", "note")
    # get_item_by_kref("kref://P/a/b/deep.note") sends parent_path="/P", item_name="a/b/deep"
    split = stub.GetItem(msg("GetItemRequest", parent_path=f"/{unique}", item_name="a/b/deep", kind="note"),
                         timeout=30)
    plain = stub.GetItem(msg("GetItemRequest", parent_path=f"/{unique}/a/b", item_name="deep", kind="note"),
                         timeout=30)
    assert split.kref.uri == plain.kref.uri == f"kref://{unique}/a/b/deep.note"
    top = stub.GetItem(msg("GetItemRequest", parent_path=f"/{unique}", item_name="top", kind="note"), timeout=30)
    assert top.kref.uri == f"kref://{unique}/top.note"
    missing = rpc_error(stub.GetItem, msg("GetItemRequest", parent_path=f"/{unique}", item_name="nope",
                                          kind="note"), timeout=30)
    assert missing.code() == grpc.StatusCode.NOT_FOUND


def _pages(stub: Stub, method: str, request_name: str, size: int, **fields: object) -> list[str]:
    found, cursor = [], ""
    for _ in range(50):
        answer = getattr(stub, method)(msg(request_name, pagination=msg("PaginationRequest", page_size=size,
                                                                        cursor=cursor), **fields), timeout=30)
        found += [i.kref.uri for i in answer.items]
        if not answer.pagination.has_more:
            assert answer.pagination.total_count == len(found)
            return found
        cursor = answer.pagination.next_cursor
    raise AssertionError("paging did not end")


def test_get_items_and_item_search_page_and_filter(stub: Stub, unique: str) -> None:
    _tree(stub, unique, "/x", "/xy")
    for i in range(5):
        _item(stub, f"/{unique}/x", f"hero{i}", "model")
    _item(stub, f"/{unique}/x", "villain", "model")
    _item(stub, f"/{unique}/x", "hero0", "texture")
    _item(stub, f"/{unique}/xy", "hero9", "model")
    listed = _pages(stub, "GetItems", "GetItemsRequest", 2, parent_path=f"/{unique}/x", kind_filter="model")
    assert [k.rsplit("/", 1)[1] for k in listed] == [f"hero{i}.model" for i in range(5)] + ["villain.model"]
    named = _pages(stub, "GetItems", "GetItemsRequest", 100, parent_path=f"/{unique}/x", item_name_filter="hero")
    assert len(named) == 6  # five models and the texture
    # context is a string prefix: "P/x" covers P/x and P/xy, as on Kumiho's server
    prefix = _pages(stub, "ItemSearch", "ItemSearchRequest", 3, context_filter=f"{unique}/x", kind_filter="model",
                    item_name_filter="hero*")
    assert len(prefix) == 6 and f"kref://{unique}/xy/hero9.model" in prefix
    whole = _pages(stub, "ItemSearch", "ItemSearchRequest", 3, context_filter=f"{unique}/x/")
    assert len(whole) == 7  # a trailing slash keeps to the segment


def test_metadata_deprecation_and_deletion(stub: Stub, unique: str) -> None:
    _tree(stub, unique, "/s")
    item = _item(stub, f"/{unique}/s", "doc", "note")
    updated = stub.UpdateItemMetadata(msg("UpdateMetadataRequest", kref=item.kref, metadata={"a": "1"}), timeout=30)
    updated = stub.UpdateItemMetadata(msg("UpdateMetadataRequest", kref=item.kref, metadata={"b": "2"}), timeout=30)
    assert dict(updated.metadata) == {"a": "1", "b": "2"}  # merged
    assert stub.SetDeprecated(msg("SetDeprecatedRequest", kref=item.kref, deprecated=True), timeout=30).success
    hidden = stub.GetItems(msg("GetItemsRequest", parent_path=f"/{unique}/s"), timeout=30)
    shown = stub.GetItems(msg("GetItemsRequest", parent_path=f"/{unique}/s", include_deprecated=True), timeout=30)
    assert not hidden.items and [i.deprecated for i in shown.items] == [True]
    searched = stub.ItemSearch(msg("ItemSearchRequest", context_filter=unique), timeout=30)
    assert not searched.items
    stub.SetDeprecated(msg("SetDeprecatedRequest", kref=item.kref, deprecated=False), timeout=30)
    assert len(stub.GetItems(msg("GetItemsRequest", parent_path=f"/{unique}/s"), timeout=30).items) == 1
    space = rpc_error(stub.SetDeprecated, msg("SetDeprecatedRequest", kref=kref(f"kref://{unique}/s"),
                                              deprecated=True), timeout=30)
    assert space.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert stub.DeleteItem(msg("DeleteItemRequest", kref=item.kref), timeout=30).success
    gone = rpc_error(stub.GetItem, msg("GetItemRequest", parent_path=f"/{unique}/s", item_name="doc",
                                       kind="note"), timeout=30)
    assert gone.code() == grpc.StatusCode.NOT_FOUND
    bad = rpc_error(stub.DeleteItem, msg("DeleteItemRequest", kref=kref("not a kref")), timeout=30)
    assert bad.code() == grpc.StatusCode.INVALID_ARGUMENT
