"""BatchCreateRevisions over Kumiho's gRPC service, against a real appliance: one transaction that creates the
items it needs, positional results and failures, replay by idempotency prefix (the same answer, nothing
written twice), the 200-row cap, and a refused batch that leaves nothing half-written.

The module's appliance has a read-only memory namespace, ``frozen`` (its space made before it became so)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from appliance.datadir import DataDir
from appliance.graph import GraphStore
from appliance.grpc_api.descriptor import message
from tests.appliance_process import Running, serve
from tests.grpc_api.conftest import Stub, kref, msg, rpc_error
from tests.grpc_api.world import build, tool

FROZEN = "/CognitiveMemory/Memory/frozen"


@pytest.fixture(scope="module")
def appliance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    data_dir: Path = tmp_path_factory.mktemp("grpc-batch") / "data"
    # the space is made in the graph before the appliance opens it with the namespace read-only (a write through
    # the appliance would be refused; a first appliance to make it would cost a start and a stop)
    with GraphStore.open(DataDir(data_dir).graph_path, buffer_pool_mb=64, readers=1) as graph:
        graph.ensure_space(FROZEN)
    with serve(data_dir, KUMIHO_CE_MEMORY__POLICY__READ_ONLY_NAMESPACES='["frozen"]') as running:
        yield running
        running.stop()


def _row(item: str, artifacts: tuple[dict[str, Any], ...] = (), **metadata: str) -> Any:
    return message("BatchRevisionRow")(
        revision=msg("CreateRevisionRequest", item_kref=kref(item), metadata=metadata),
        artifacts=[message("BatchArtifactInput")(**a) for a in artifacts])


def _batch(stub: Stub, rows: list[Any], prefix: str = "") -> Any:
    return stub.call("BatchCreateRevisions", msg("BatchCreateRevisionsRequest", revisions=rows,
                                                 idempotency_prefix=prefix))


def _next(stub: Stub, item: str) -> int:
    return int(stub.call("PeekNextRevision", msg("PeekNextRevisionRequest", item_kref=kref(item))).number)


def test_one_batch_creates_items_numbers_in_order_and_reports_rows_by_position(appliance: Running, stub: Stub,
                                                                               unique: str) -> None:
    [old] = build(appliance.base_url, unique, items=(("s", "old", "memory"),))
    stub.call("CreateRevision", msg("CreateRevisionRequest", item_kref=kref(old)))
    new = f"kref://{unique}/s/new.memory"
    answer = _batch(stub, [
        _row(old, title="second of old"),
        _row(new, title="draft"),
        _row(f"kref://{unique}/nowhere/x.memory"),  # its space does not exist
        _row(new, ({"name": "transcript", "location": "s3://b/new.md", "is_default": True},), title="final"),
        _row("kref://bad kref"),
        _row(new, ({"name": "a", "location": "/a", "is_default": True},
                   {"name": "b", "location": "/b", "is_default": True})),
    ])
    assert [(r.kref.uri, r.latest) for r in answer.results] == [
        (f"{old}?r=2", True), (f"{new}?r=1", False), ("", False), (f"{new}?r=2", True), ("", False), ("", False)]
    reasons = {f.index: f.reason for f in answer.failures}
    assert sorted(reasons) == [2, 4, 5]
    assert reasons[2].startswith("revisions[2]") and "does not exist" in reasons[2]
    assert reasons[4].startswith("revisions[4].revision.item_kref:")
    assert reasons[5].startswith("revisions[5].artifacts:")
    assert (answer.requested_count, answer.succeeded_count) == (6, 3)
    item = stub.call("GetRevision", msg("KrefRequest", kref=kref(new)))
    assert item.number == 2 and item.default_artifact == "transcript"
    located = stub.call("ResolveLocation", msg("ResolveLocationRequest", kref=new))  # the chain from the item
    assert located.location == "s3://b/new.md"


def test_a_replayed_prefix_answers_the_same_and_writes_nothing_twice(appliance: Running, stub: Stub,
                                                                     unique: str) -> None:
    [a] = build(appliance.base_url, unique, items=(("s", "a", "memory"),))
    b = f"kref://{unique}/later/b.memory"
    rows = [_row(a, title="one"), _row(a, title="two"), _row(b, title="three")]
    first = _batch(stub, rows, prefix="turn-1")
    assert [r.kref.uri for r in first.results] == [f"{a}?r=1", f"{a}?r=2", ""]
    assert [f.index for f in first.failures] == [2]  # space /later does not exist yet
    again = _batch(stub, rows, prefix="turn-1")
    assert [r.kref.uri for r in again.results] == [r.kref.uri for r in first.results]
    assert [r.metadata["title"] for r in again.results[:2]] == ["one", "two"]
    assert [list(r.tags) for r in again.results[:2]] == [[], ["latest"]]  # as they are now
    assert _next(stub, a) == 3  # nothing written twice
    tool(appliance.base_url, "kumiho_create_space", project_name=unique, space_name="later",
         parent_path=f"/{unique}")
    third = _batch(stub, rows, prefix="turn-1")  # the retry writes only the row that had failed
    assert [r.kref.uri for r in third.results] == [f"{a}?r=1", f"{a}?r=2", f"{b}?r=1"] and not third.failures
    assert _next(stub, a) == 3 and _next(stub, b) == 2
    listed = stub.call("GetRevisions", msg("GetRevisionsRequest", item_kref=kref(a)))
    assert [r.number for r in listed.revisions] == [2, 1]
    other = _batch(stub, [_row(b, title="x")], prefix="turn-1")  # the key turn-1:0 names a revision of a
    assert [f.index for f in other.failures] == [0] and "idempotency" in other.failures[0].reason
    assert _next(stub, b) == 2


def test_more_than_200_rows_are_refused_and_nothing_is_written(appliance: Running, stub: Stub, unique: str) -> None:
    [a] = build(appliance.base_url, unique, items=(("s", "a", "memory"),))
    error = rpc_error(_batch, stub, [_row(a)] * 201)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith("revisions:")
    assert "200" in error.details() and _next(stub, a) == 1
    assert _batch(stub, [_row(a)] * 200).succeeded_count == 200
    error = rpc_error(_batch, stub, [_row(a)], prefix=" spaced ")
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith("idempotency_prefix:")


def test_a_refused_batch_leaves_nothing_half_written(appliance: Running, stub: Stub, unique: str) -> None:
    [a] = build(appliance.base_url, unique, items=(("s", "a", "memory"),))
    fresh = f"kref://{unique}/s/fresh.memory"
    frozen = f"kref:/{FROZEN}/note.memory"
    error = rpc_error(_batch, stub, [_row(a, title="kept?"), _row(fresh), _row(frozen)])
    assert error.code() == grpc.StatusCode.PERMISSION_DENIED and "frozen" in error.details()
    assert _next(stub, a) == 1  # the rows before the refused one were not written
    error = rpc_error(stub.call, "GetRevisions", msg("GetRevisionsRequest", item_kref=kref(fresh)))
    assert error.code() == grpc.StatusCode.NOT_FOUND  # nor the item the batch would have created
    assert _batch(stub, [_row(a, title="kept")]).succeeded_count == 1
