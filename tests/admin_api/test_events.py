"""The live event feed (GET /api/v1/events) over real HTTP: the appliance in this process behind uvicorn, real
Kùzu and LanceDB in a tmp dir, read with an httpx stream. Writes go through the MCP tools (the agents' door) or
straight to the graph store; every expectation is checked against the graph's own event table."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from litestar.types import Message

from appliance.admin_api.events import EventStream
from appliance.errors import InvalidArgument
from appliance.jobs import Job
from tests.admin_api.sse import Block, EventReader
from tests.inprocess import InProcess, serve_in_process
from tests.mcp_api.clients import call, in_http_session
from tests.problems import problem

BUFFER = 16  # the smallest ring the settings allow: resuming from the graph's table is easy to reach
MAX_SUBSCRIBERS = 4
FEED = {"keepalive_seconds": 0.3, "max_subscribers": MAX_SUBSCRIBERS, "buffer_events": BUFFER,
        "resume_max_events": 300, "progress_interval_seconds": 0}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with serve_in_process(tmp_path_factory.mktemp("events") / "data", None, events=FEED) as running:
        running.services.graph.ensure_space("/CognitiveMemory/feed")
        yield running


@contextlib.contextmanager
def stream(app: InProcess, **params: Any) -> Iterator[EventReader]:
    headers = params.pop("headers", {})
    with httpx.Client(timeout=httpx.Timeout(10.0)) as client, \
            client.stream("GET", app.base_url + "/api/v1/events", params=params, headers=headers) as response:
        assert response.status_code == 200, response.read()
        assert response.headers["content-type"].startswith("text/event-stream")
        reader = EventReader(response)
        assert reader.block().comments  # the greeting: the stream is open and subscribed
        yield reader


def table_after(app: InProcess, seq: int) -> list[tuple[str, str]]:
    """(id, kind) of every graph event after ``seq``, read from the graph's table."""
    return [(str(e["seq"]), e["routing_key"]) for e in app.services.graph.events_after(seq, 10_000)]


def quiet(reader: EventReader) -> bool:
    """The next block is a keep-alive comment, not an event: nothing more was due."""
    return reader.block().kind is None


def create_items(app: InProcess, prefix: str, count: int) -> None:
    for number in range(count):
        app.services.graph.create_item("/CognitiveMemory/feed", f"{prefix}-{number}", "note")


def test_memory_writes_arrive_as_the_graphs_events_in_order(app: InProcess) -> None:
    before = app.services.graph.last_event_seq()
    with stream(app) as reader:
        stored = in_http_session(app.base_url, lambda s: call(
            s, "kumiho_memory_store", title="Feed check", user_text="The feed carries every write.",
            space_path="feed"))
        in_http_session(app.base_url, lambda s: call(s, "kumiho_deprecate_item", item_kref=stored["item_kref"],
                                                     deprecated=True))
        seen = reader.events_until(lambda b: b.kind == "item.deprecated")
    assert [(b.id, b.kind) for b in seen] == table_after(app, before)
    kinds = {b.kind: b for b in seen}
    assert {"item.created", "revision.created", "item.deprecated"} <= set(kinds), list(kinds)
    created = kinds["revision.created"]
    assert created.data is not None and created.data["kref"] == stored["revision_kref"]
    assert created.data["id"] == created.id and created.data["seq"] == int(created.id)
    assert created.data["project"] == "CognitiveMemory" and created.data["at"]
    assert kinds["item.deprecated"].data["kref"] == stored["item_kref"]  # type: ignore[index]


def test_resume_with_last_event_id_gets_exactly_the_missed_events(app: InProcess) -> None:
    with stream(app) as reader:
        create_items(app, "before-gap", 1)
        last = reader.event().id
    assert last is not None
    create_items(app, "in-gap", 3)  # written while no stream is open: still in the in-memory ring
    missed = table_after(app, int(last))
    assert len(missed) == 3
    with stream(app, headers={"Last-Event-ID": last}) as reader:
        assert [(b.id, b.kind) for b in (reader.event() for _ in missed)] == missed
        assert quiet(reader)


def test_resume_further_back_than_the_ring_replays_from_the_graphs_table(app: InProcess) -> None:
    last = app.services.graph.last_event_seq()
    create_items(app, "long-gap", BUFFER * 3)  # the ring holds the last 16 only
    missed = table_after(app, last)
    assert len(missed) == BUFFER * 3
    with stream(app, after=str(last)) as reader:
        assert [(b.id, b.kind) for b in (reader.event() for _ in missed)] == missed
        create_items(app, "after-replay", 1)  # then it goes on live
        assert reader.event().kind == "item.created"
        assert quiet(reader)


def test_a_resume_point_too_far_back_or_unknown_gets_a_reset(app: InProcess) -> None:
    app.services.graph.atomic(lambda: create_items(app, "history", FEED["resume_max_events"] + 10))
    too_far = app.services.graph.last_event_seq() - FEED["resume_max_events"] - 1
    for after in (str(too_far), "999999"):  # further back than 300 events (the bound here); an id never sent
        newest = app.services.graph.last_event_seq()
        with stream(app, after=after) as reader:
            reset = reader.event()
            assert reset.kind == "feed.reset" and reset.id == str(newest), reset
            assert reset.data is not None and reset.data["detail"]["requested_after"] == after
            create_items(app, f"after-reset-{after}", 1)
            assert reader.event().id == str(newest + 1)  # then it goes on live


@pytest.mark.parametrize("header", [False, True])
def test_minus_one_replays_the_newest_replayable_events_without_a_reset(app: InProcess, header: bool) -> None:
    limit = FEED["resume_max_events"]
    app.services.graph.atomic(lambda: create_items(app, f"oldest-{header}", limit + 200))  # more than replayable
    newest = app.services.graph.last_event_seq()
    expected = table_after(app, newest - limit)  # events newest-299 .. newest
    assert len(expected) == limit and expected[-1][0] == str(newest)
    resume = {"headers": {"Last-Event-ID": "-1"}} if header else {"after": "-1"}
    with stream(app, **resume) as reader:
        assert [(b.id, b.kind) for b in (reader.event() for _ in expected)] == expected  # no feed.reset first
        assert quiet(reader)
        create_items(app, f"after-oldest-{header}", 1)  # then it goes on live
        assert reader.event().id == str(newest + 1)


def test_a_client_that_falls_behind_the_ring_is_dropped_and_resumes_without_loss(app: InProcess) -> None:
    last = app.services.graph.last_event_seq()
    with stream(app) as reader:
        # one transaction of more events than the ring holds: they land in the ring at once, past this stream
        app.services.graph.atomic(lambda: create_items(app, "burst", BUFFER + 8))
        dropped = reader.event()
        assert dropped.kind == "feed.dropped" and dropped.id is None
        with pytest.raises(StopIteration):
            reader.block()  # the server ended the stream
    missed = table_after(app, last)
    with stream(app, headers={"Last-Event-ID": str(last)}) as reader:
        assert [(b.id, b.kind) for b in (reader.event() for _ in missed)] == missed
        assert quiet(reader)


def test_a_rolled_back_write_sends_no_event(app: InProcess) -> None:
    def half_then_refuse() -> None:
        create_items(app, "rolled-back", 2)
        raise InvalidArgument("refused on purpose", field="test")

    with stream(app) as reader:
        with pytest.raises(InvalidArgument):
            app.services.graph.atomic(half_then_refuse)
        create_items(app, "committed", 1)
        event = reader.event()
    assert event.kind == "item.created" and event.data is not None
    assert event.data["kref"].endswith("/committed-0.note"), event.data
    assert not any("rolled-back" in e["kref"] for e in app.services.graph.events(limit=10_000))


def test_job_progress_and_completion_stream_and_resume(app: InProcess) -> None:
    step = threading.Event()

    def work(job: Job) -> dict[str, int]:
        job.progress(1, 3, "first")
        step.wait(30)
        job.progress(2, 3, "second")
        return {"counted": 3}

    with stream(app) as reader:
        job = app.services.jobs.submit("feed_test", work, description="a test job")
        seen = reader.events_until(lambda b: b.kind == "job.progress")
        assert [b.kind for b in seen] == ["job.queued", "job.started", "job.progress"]
        progress = seen[-1]
        assert progress.data is not None and progress.data["detail"]["job_id"] == job.id
        assert progress.data["detail"]["progress"] == {"done": 1, "total": 3}
        assert ":" in (progress.id or "") and "seq" not in progress.data  # a job event: not in the graph
    step.set()
    assert app.services.jobs.wait(job, 30)
    with stream(app, headers={"Last-Event-ID": progress.id}) as reader:
        rest = [reader.event(), reader.event()]
        assert [b.kind for b in rest] == ["job.progress", "job.done"]
        assert rest[1].data is not None and rest[1].data["detail"]["state"] == "done"
        assert quiet(reader)


def test_a_failed_jobs_exception_text_reaches_neither_the_feed_nor_the_jobs_api(app: InProcess) -> None:
    def crash(job: Job) -> None:
        raise RuntimeError("cannot read /secret/x")

    with stream(app) as reader:
        job = app.services.jobs.submit("feed_crash", crash, description="a job with a bug")
        failed = reader.events_until(lambda b: b.kind == "job.failed")[-1]
    internal = {"code": "internal", "message": "internal error; see the appliance log"}
    assert failed.data is not None and failed.data["detail"]["error"] == internal, failed
    answer = httpx.get(f"{app.base_url}/api/v1/jobs/{job.id}", timeout=10)
    assert answer.status_code == 200 and answer.json()["error"] == internal
    listed = httpx.get(f"{app.base_url}/api/v1/jobs", timeout=10)
    for text in (repr(failed.data), answer.text, listed.text):
        assert "/secret/x" not in text and "RuntimeError" not in text, text


def test_dream_state_runs_are_announced(app: InProcess) -> None:
    with stream(app) as reader:
        result = in_http_session(app.base_url, lambda s: call(s, "kumiho_memory_dream_state", maintain_graph=True))
        seen = reader.events_until(lambda b: b.kind == "dream_state.finished")
    assert result.get("job_id") or result.get("success") is not None, result
    kinds = [b.kind for b in seen]
    assert "dream_state.started" in kinds and kinds.index("dream_state.started") < kinds.index("job.done")
    finished = seen[-1].data
    assert finished is not None and finished["detail"]["state"] == "done" and finished["project"] == "CognitiveMemory"
    assert isinstance(finished["detail"]["report"], dict)


def test_quiet_streams_get_keep_alive_comments(app: InProcess) -> None:
    with stream(app) as reader:
        block = reader.block()
        assert block.kind is None and block.comments == ["keep-alive"]


def test_subscribers_are_bounded_and_a_closed_stream_frees_its_place(app: InProcess) -> None:
    with contextlib.ExitStack() as streams:
        for _ in range(MAX_SUBSCRIBERS):
            streams.enter_context(stream(app))
        refused = httpx.get(app.base_url + "/api/v1/events", timeout=10)
        assert refused.status_code == 503
        found = problem(refused)
        assert found["code"] == "unavailable" and "max_subscribers" in found["detail"]
    deadline = time.monotonic() + 10  # the server notices the closed connections on its own time
    while app.services.feed.state()["subscribers"] and time.monotonic() < deadline:
        time.sleep(0.05)
    assert app.services.feed.state()["subscribers"] == 0
    with stream(app) as reader:
        assert quiet(reader)


@pytest.mark.parametrize(("name", "value"), [("Last-Event-ID", "abc"), ("after", "12:x"), ("after", "-2"),
                                             ("after", "1" * 41)])
def test_a_malformed_resume_point_is_refused_naming_the_field(app: InProcess, name: str, value: str) -> None:
    if name == "after":
        answer = httpx.get(app.base_url + "/api/v1/events", params={"after": value}, timeout=10)
    else:
        answer = httpx.get(app.base_url + "/api/v1/events", headers={name: value}, timeout=10)
    assert answer.status_code == 400
    found = problem(answer)
    assert found["field"] == name and name in found["detail"], found
    assert app.services.feed.state()["subscribers"] == 0  # a refused request holds no place


def test_open_streams_end_cleanly_when_the_appliance_stops(tmp_path: Path) -> None:
    from tests.appliance_process import serve

    with serve(tmp_path / "data") as running, httpx.Client(timeout=httpx.Timeout(30.0)) as client, \
            client.stream("GET", running.base_url + "/api/v1/events") as response:
        reader = EventReader(response)
        assert reader.block().comments
        # what `revka doctor` asks a local CE (tests/admin_api/test_health.py reads it the same way)
        assert client.get(running.base_url + "/api/_live").json()["deployment_mode"] == "self_hosted_ce"
        health = client.get(running.base_url + "/api/_health").json()
        assert {key: health[key]["status"] for key in ("neo4j", "event_stream", "embedding")} == {
            "neo4j": "ok", "event_stream": "ok", "embedding": "ok"}, health
        assert health["event_stream"]["subscribers"] == 1
        assert running.stop() == 0
        with pytest.raises(StopIteration):  # a finished response, not a connection cut mid-stream
            while True:
                last: Block = reader.block()
                assert last.kind is None, last
    log = (tmp_path / "data.log").read_text()
    assert "timeout graceful shutdown exceeded" not in log, log[-2000:]


def test_a_client_that_stops_taking_bytes_is_disconnected_and_its_place_freed() -> None:
    """The server's side of a stalled client: uvicorn's send() waits while the socket's buffers are full, here
    for ever (ASGI channels of the test's own: filling real socket buffers takes megabytes of events)."""
    released: list[bool] = []
    sent: list[Message] = []

    async def frames() -> AsyncIterator[bytes]:
        while True:
            yield b": tick\n\n"

    async def send(message: Message) -> None:
        sent.append(message)
        if len(sent) > 2:  # the start, one chunk, then the client stops reading
            await anyio.sleep_forever()

    async def receive() -> Message:
        await anyio.sleep_forever()
        raise AssertionError("unreachable")

    async def main() -> None:
        response = EventStream(frames(), release=lambda: released.append(True), stall_timeout=1.0)
        asgi = response.to_asgi_response(app=None, request=None)  # type: ignore[arg-type]
        with anyio.fail_after(30):  # bounds the test, not the speed
            await asgi({"type": "http", "method": "GET"}, receive, send)  # type: ignore[arg-type]

    anyio.run(main)
    assert released == [True] and sent[0]["type"] == "http.response.start" and len(sent) == 3
