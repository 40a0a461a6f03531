"""``GET /api/v1/events``: the live event feed as server-sent events.

Each event is ``id:`` (its key, ``appliance.core.feed``: the graph's sequence number for a graph write),
``event:`` (its kind: ``item.created``, ``revision.created``, ``item.deprecated``, ``edge.created``,
``job.progress``, ``job.done``, ``dream_state.started``, …) and ``data:`` (JSON ``{id, kind, at, seq?, kref?,
project?, detail}``). A quiet stream gets a comment line every ``events.keepalive_seconds``.

Resuming: with ``Last-Event-ID`` (what a browser's EventSource sends when it reconnects) or ``?after=``, the
stream first sends every graph event after that id, from the in-memory ring (``appliance.feed``) or, when the
ring no longer reaches back that far, from the graph's event table in pages; then it goes on live. A resume
point more than ``events.resume_max_events`` behind (or one this graph never had) gets one ``feed.reset``
event instead: the client should reload what it shows, then carry on from the reset's id. The resume point -1
means the oldest event still replayable: the newest ``events.resume_max_events`` graph events are replayed
(every one in a smaller graph), never a reset.

Bounds: ``events.max_subscribers`` streams (one more: 503 problem); a stream more than
``events.buffer_events`` behind gets ``feed.dropped`` and is ended (its client resumes with its last id); a
client that does not take the next bytes within ``events.stall_timeout_seconds`` is disconnected; at shutdown
every stream ends at once (``EventFeed.close``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Annotated, Any

import anyio
from litestar import Controller, get
from litestar.datastructures import State
from litestar.params import HeaderParameter, QueryParameter
from litestar.response import Stream
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from appliance.config import EventFeedSettings
from appliance.core.feed import MAX_ID_CHARS, OLDEST, FeedEvent, Key, graph_event, oldest_replayable, parse_id
from appliance.feed import Closed, EventFeed, Lagged, Subscriber
from appliance.graph import GraphStore

log = logging.getLogger(__name__)
# events read from the graph's table at a time while resuming: each read scans the table (~60 ms at 200k
# events, whatever the page size), so pages are large; 2,000 events are ~0.6 MB
REPLAY_PAGE = 2_000
MEDIA_TYPE = "text/event-stream"
_DESCRIPTION = (
    "Server-sent events of writes (item/revision/artifact/edge created, updated, tagged, deleted), deprecations "
    "and restores, job progress and completion, and Dream State runs. `id:` is the event's id (the graph's "
    "sequence number for a graph write; `\"<seq>:<n>\"` for a job event), `event:` its kind, `data:` JSON "
    "`{id, kind, at, seq?, kref?, project?, detail}`. Resume with the `Last-Event-ID` header or `?after=`: graph "
    "events are replayed from the graph, job events while they are still buffered; `-1` replays the newest "
    "`events.resume_max_events` graph events (all of them in a smaller graph). Special kinds: `feed.reset` "
    "(the resume point is too far back or unknown: reload, then continue from its id) and `feed.dropped` (this "
    "client fell too far behind: reconnect with its last id). 503 when `events.max_subscribers` streams are open."
)


class EventsController(Controller):
    path = "/api/v1"
    tags = ("events",)

    @get("/events", summary="Live event feed (server-sent events)", description=_DESCRIPTION,
         media_type=MEDIA_TYPE, response_description="text/event-stream of the appliance's events")
    async def events(
        self, state: State,
        after: Annotated[str | None, QueryParameter(
            name="after", required=False, max_length=MAX_ID_CHARS,
            description="resume after this event id (as the `id:` lines give it); -1 = from the oldest event "
                        "still replayable (the newest `events.resume_max_events` graph events)")] = None,
        last_event_id: Annotated[str | None, HeaderParameter(
            name="Last-Event-ID", required=False, max_length=MAX_ID_CHARS,
            description="resume after this event id (a browser's EventSource sends it when it reconnects); "
                        "wins over `after`")] = None,
    ) -> Stream:
        feed: EventFeed = state.services.feed
        settings: EventFeedSettings = state.services.settings.events
        resume = (parse_id(last_event_id, "Last-Event-ID") if last_event_id is not None
                  else parse_id(after, "after") if after is not None else None)
        subscriber = feed.subscribe()  # before the answer starts, so that a full feed is a 503
        frames = _frames(feed, state.services.graph, subscriber, resume, settings)
        return EventStream(frames, release=lambda: feed.unsubscribe(subscriber),
                           stall_timeout=settings.stall_timeout_seconds)


async def _frames(feed: EventFeed, graph: GraphStore, subscriber: Subscriber, resume: Key | None,
                  settings: EventFeedSettings) -> AsyncIterator[bytes]:
    yield b": kumiho-ce event feed\nretry: 2000\n\n"  # the headers and a first line reach the client at once
    if resume is not None:
        async for frame in _replay(feed, graph, subscriber, resume, settings.resume_max_events):
            yield frame
    while True:
        subscriber.ready.clear()
        try:
            batch = feed.take(subscriber)
        except Closed:
            return
        except Lagged:
            yield _notice("feed.dropped", "this client fell too far behind the live feed; reconnect with the last "
                                          "id you received to resume")
            return
        if batch:
            yield b"".join(_frame(event) for event in batch)
            continue
        try:
            await asyncio.wait_for(subscriber.ready.wait(), settings.keepalive_seconds)
        except TimeoutError:
            yield b": keep-alive\n\n"


async def _replay(feed: EventFeed, graph: GraphStore, subscriber: Subscriber, after: Key,
                  limit: int) -> AsyncIterator[bytes]:
    """The events after ``after`` that the ring no longer holds, from the graph's table; then the stream is
    placed in the ring just after them (or, too far behind or unknown, it gets a ``feed.reset``)."""
    newest = feed.newest()
    if after == OLDEST:
        after = oldest_replayable(newest, limit)
    if after.g > newest.g or newest.g - after.g > limit:
        yield _reset(feed, subscriber, after, newest)
        return
    replayed = 0
    while True:
        floor = feed.resume(subscriber, after)
        if floor is None:
            return
        if after.g >= floor.g:  # only job events are missing (no longer buffered): carry on from the ring
            after = floor
            continue
        upto = min(floor.g, after.g + REPLAY_PAGE)
        rows = await anyio.to_thread.run_sync(graph.events_after, after.g, upto - after.g)
        if rows:
            yield b"".join(_frame(graph_event(row)) for row in rows)
        replayed += len(rows)
        after = Key(upto)  # the table has no gaps: (after, upto] is sent
        if replayed > limit:  # writes outran the replay
            yield _reset(feed, subscriber, after, feed.newest())
            return


def _reset(feed: EventFeed, subscriber: Subscriber, after: Key, newest: Key) -> bytes:
    feed.resume(subscriber, newest)  # newest is in the ring (or its floor): never replays
    event = FeedEvent(newest, "feed.reset", _now(), detail={
        "requested_after": after.id,
        "reason": "the resume point is further back than this appliance replays (events.resume_max_events) or "
                  "is not one of its events; reload what you show, then continue from this event's id"})
    return _frame(event)


def _frame(event: FeedEvent) -> bytes:
    data = json.dumps(event.data(), ensure_ascii=False, separators=(",", ":"))
    return f"id: {event.id}\nevent: {event.kind}\ndata: {data}\n\n".encode()


def _notice(kind: str, message: str) -> bytes:
    data = json.dumps({"kind": kind, "at": _now(), "detail": {"reason": message}}, separators=(",", ":"))
    return f"event: {kind}\ndata: {data}\n\n".encode()


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class EventStream(Stream):
    """A ``text/event-stream`` response whose every send is bounded in time, and which gives its feed slot back
    however the stream ends (finished, client gone, stalled, or never started)."""

    def __init__(self, frames: AsyncIterator[bytes], *, release: Callable[[], None], stall_timeout: float) -> None:
        super().__init__(frames, media_type=MEDIA_TYPE,
                         headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})
        self._release, self._stall_timeout = release, stall_timeout

    def to_asgi_response(self, *args: Any, **kwargs: Any) -> ASGIApp:  # type: ignore[override]
        return _Bounded(super().to_asgi_response(*args, **kwargs), self._release, self._stall_timeout)


class _Bounded:
    def __init__(self, inner: ASGIApp, release: Callable[[], None], stall_timeout: float) -> None:
        self._inner, self._release, self._stall_timeout = inner, release, stall_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        stalled = False

        async def bounded_send(message: Message) -> None:
            nonlocal stalled
            try:
                with anyio.fail_after(self._stall_timeout):
                    await send(message)
            except TimeoutError:
                stalled = True
                raise

        try:
            await self._inner(scope, receive, bounded_send)
        except Exception:
            if not stalled:
                raise
            log.info("event stream: the client took no data for %.0f s; disconnected", self._stall_timeout)
        finally:
            self._release()
