"""EventStream over Kumiho's gRPC: a stream sees writes made after it starts, resumes from a cursor and
replays from the beginning, filters by routing key and kref, is bounded in number, and ends when the appliance
stops; GetEventCapabilities says what it supports."""

from __future__ import annotations

import gc
import itertools
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import pytest

from appliance.graph import GraphStore
from appliance.grpc_api.descriptor import message
from appliance.grpc_api.rpcs import events
from appliance.grpc_api.rpcs.events import MAX_STREAMS, MAX_WILDCARDS
from tests.appliance_process import Running, serve
from tests.grpc_api.conftest import Stub, msg

_names = itertools.count()


@pytest.fixture(scope="module")
def appliance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """This module's own appliance: its last test stops it (the package's shared one serves other modules)."""
    with serve(tmp_path_factory.mktemp("grpc-events") / "data") as running:
        yield running
        running.stop()


@contextmanager
def writing(stub: Stub, prefix: str) -> Iterator[list[str]]:
    """Create a project every 0.2 s until the block ends: writes that surely come after a stream started."""
    made: list[str] = []
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(0.2):
            name = f"{prefix}{next(_names)}"
            stub.CreateProject(message("CreateProjectRequest")(name=name), timeout=30)
            made.append(name)

    thread = threading.Thread(target=run)
    thread.start()
    try:
        yield made
    finally:
        stop.set()
        thread.join(30)


def _stream(stub: Stub, **fields: Any) -> Any:
    return stub.EventStream(msg("EventStreamRequest", **fields), timeout=60)


def test_resume_from_a_cursor_and_replay_from_the_beginning(stub: Stub, unique: str) -> None:
    live = _stream(stub, kref_filter=f"kref://{unique}*")
    try:
        with writing(stub, unique):
            first = next(live)
    finally:
        live.cancel()
    assert first.routing_key == "project.created" and first.cursor.isdigit()
    assert first.timestamp.endswith("+00:00") and first.username == "local"
    resumed = _stream(stub, from_cursor=str(int(first.cursor) - 1), kref_filter=first.kref.uri)
    again = next(resumed)
    resumed.cancel()
    assert (again.cursor, again.kref.uri) == (first.cursor, first.kref.uri)
    replay = _stream(stub, from_beginning=True)
    oldest = next(replay)
    replay.cancel()
    assert int(oldest.cursor) < int(first.cursor)
    since = _stream(stub, from_timestamp=first.timestamp, kref_filter=first.kref.uri)
    assert next(since).cursor == first.cursor
    since.cancel()


def test_filters_by_routing_key_and_kref(stub: Stub, unique: str) -> None:
    stub.CreateProject(message("CreateProjectRequest")(name=unique), timeout=30)
    stream = _stream(stub, routing_key_filter="space.#", kref_filter=f"kref://{unique}/**")
    try:
        stub.CreateSpace(msg("CreateSpaceRequest", parent_path=f"/{unique}", space_name="other"), timeout=30)
        stub.CreateProject(message("CreateProjectRequest")(name=f"{unique}x"), timeout=30)  # not a space
        with writing(stub, f"{unique}y"):  # events of other projects: filtered out
            for name in ("a", "b"):
                stub.CreateSpace(msg("CreateSpaceRequest", parent_path=f"/{unique}", space_name=name), timeout=30)
            got = [next(stream) for _ in range(2)]
    finally:
        stream.cancel()
    assert all(e.routing_key == "space.created" and e.kref.uri.startswith(f"kref://{unique}/") for e in got)


def test_capabilities_and_refusals(stub: Stub) -> None:
    caps = stub.GetEventCapabilities(msg("GetEventCapabilitiesRequest"), timeout=30)
    assert caps.supports_replay and caps.supports_cursor and not caps.supports_consumer_groups
    for fields, field in (({"consumer_group": "g"}, "consumer_group"), ({"from_cursor": "x"}, "cursor"),
                          ({"from_timestamp": "yesterday"}, "from_timestamp"),
                          ({"kref_filter": "kref://p/" + "*/" * (MAX_WILDCARDS + 1)}, "kref_filter")):
        stream = _stream(stub, **fields)
        try:
            next(stream)
            raise AssertionError("the stream was not refused")
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and field in (error.details() or "")


def _answers_meanwhile(appliance: Running) -> None:
    """A call on a channel of its own is answered within its deadline: the appliance is not frozen."""
    with grpc.insecure_channel(appliance.base_url.removeprefix("http://")) as other:
        Stub(other).GetProjects(msg("GetProjectsRequest"), timeout=10)


def test_a_filter_that_would_backtrack_does_not_freeze_the_appliance(appliance: Running, stub: Stub,
                                                                      unique: str) -> None:
    # As a regular expression this filter took minutes on the kref of an item named 'a' * 60, holding the GIL
    adversarial = f"kref://{unique}/" + "**a" * 8 + "**b"
    stub.CreateProject(message("CreateProjectRequest")(name=unique), timeout=30)
    stub.CreateSpace(msg("CreateSpaceRequest", parent_path=f"/{unique}", space_name="s"), timeout=30)
    stream = stub.EventStream(msg("EventStreamRequest", kref_filter=adversarial), timeout=30)
    try:
        stub.CreateItem(msg("CreateItemRequest", parent_path=f"/{unique}/s", item_name="a" * 60, kind="note"),
                        timeout=30)
        stub.CreateItem(msg("CreateItemRequest", parent_path=f"/{unique}/s", item_name="a" * 8, kind="b"),
                        timeout=30)
        _answers_meanwhile(appliance)
        try:
            served = next(stream)
        except grpc.RpcError as error:  # refused: more wildcards than a filter may have
            assert error.code() == grpc.StatusCode.INVALID_ARGUMENT, error
            assert "kref_filter" in (error.details() or "") and f"at most {MAX_WILDCARDS}" in (error.details() or "")
        else:
            assert served.kref.uri == f"kref://{unique}/s/{'a' * 8}.b"
    finally:
        stream.cancel()


def test_a_filter_of_as_many_wildcards_as_allowed_matches_in_time(appliance: Running, stub: Stub,
                                                                   unique: str) -> None:
    hardest = f"kref://{unique}/" + "**a" * (MAX_WILDCARDS - 1) + "**b"  # as many wildcards as a filter may have
    stub.CreateProject(message("CreateProjectRequest")(name=unique), timeout=30)
    stub.CreateSpace(msg("CreateSpaceRequest", parent_path=f"/{unique}", space_name="s"), timeout=30)
    stream = stub.EventStream(msg("EventStreamRequest", kref_filter=hardest), timeout=30)
    try:
        for name, kind in (("a" * 60, "note"), ("a" * 7, "b"), ("a" * 6, "b"), ("a" * 60, "b")):
            stub.CreateItem(msg("CreateItemRequest", parent_path=f"/{unique}/s", item_name=name, kind=kind),
                            timeout=30)
        _answers_meanwhile(appliance)
        got = [next(stream).kref.uri for _ in range(2)]  # the stream's deadline bounds the wait
    finally:
        stream.cancel()
    assert got == [f"kref://{unique}/s/{'a' * 7}.b", f"kref://{unique}/s/{'a' * 60}.b"]  # not six a's, not .note


def test_streams_are_bounded_and_each_sees_later_writes(stub: Stub, unique: str) -> None:
    streams = [_stream(stub, routing_key_filter="project.created") for _ in range(MAX_STREAMS + 1)]
    refused, received = 0, []
    try:
        with writing(stub, f"{unique}w") as made:
            for stream in streams:
                try:
                    received.append(next(stream))
                except grpc.RpcError as error:
                    assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
                    assert f"{MAX_STREAMS} event streams" in (error.details() or "")
                    refused += 1
        assert refused == 1 and len(received) == MAX_STREAMS
        assert all(e.routing_key == "project.created" and e.kref.uri.removeprefix("kref://") in made
                   for e in received)
    finally:
        for stream in streams:
            stream.cancel()


def test_a_stream_ends_when_the_appliance_stops(appliance: Running, stub: Stub) -> None:
    with writing(stub, "stopping"):
        for _ in range(50):  # the streams of the test before may still be closing: their places come back
            stream = _stream(stub)
            try:
                next(stream)  # the stream is running
                break
            except grpc.RpcError as error:
                assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED, error
    appliance.stop()
    try:
        for _ in stream:
            pass
        raise AssertionError("the stream ended without a status")
    except grpc.RpcError as error:
        assert error.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED), error


def test_each_graph_has_its_own_waker_and_a_closed_one_leaves_none(tmp_path: Path) -> None:
    """In-process apps open and close graphs: the streams' wakers must not outlive them (nor be found again
    by a later graph that happens to reuse a closed one's memory)."""
    before = len(events._wakers)
    for round_ in range(3):
        with GraphStore.open(tmp_path / f"g{round_}" / "graph.kuzu", buffer_pool_mb=64, readers=1) as graph:
            waker = events._waker(graph)
            assert events._waker(graph) is waker and waker in graph._event_listeners
            graph.create_project(f"p{round_}")
            assert waker.generation >= 1  # woken by the commit
        del graph, waker
        gc.collect()
        assert len(events._wakers) == before
