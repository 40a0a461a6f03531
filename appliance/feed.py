"""The live event feed's hub: the recent events in memory, and the open streams reading them.

Graph writes arrive from the graph's commit (``GraphStore.on_events``: the events a transaction wrote, with
their sequence numbers, after it committed, on the writer thread) and jobs' changes from the job queue
(``JobQueue.subscribe``); nothing polls the graph. Each is appended to one ring of the last
``buffer_events`` events, in key order (``appliance.core.feed``), and the streams waiting on it are woken on
their own event loop.

Job and Dream State events live only in this ring (decided against writing them to the graph's event table:
a job reports progress once per generated token, and every graph write wakes every commit listener and the
index sync). So a client that resumes gets every graph event it missed, from the ring or else from the
graph's table (``appliance.admin_api.events``), but job events only while they are still in the ring.

Bounds: ``max_subscribers`` streams (one more is refused); memory is the ring alone, shared by every stream:
a stream that falls more than ``buffer_events`` behind loses its place and is ended (``Lagged``); the client
resumes from the graph with its last id. ``close`` ends every stream (at shutdown, before the server waits for
its connections to close).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import itertools
import threading
import time
from collections import deque
from datetime import UTC, datetime
from typing import Any

from appliance.config import EventFeedSettings
from appliance.core.feed import (
    DREAM_KINDS,
    JOB_KINDS,
    FeedEvent,
    Key,
    dream_summary,
    graph_event,
    job_detail,
)
from appliance.errors import Unavailable
from appliance.jobs import Job, JobChange


class Lagged(Exception):
    """The stream fell further behind than the ring holds."""


class Closed(Exception):
    """The feed is shut down."""


class Subscriber:
    """One open stream: its place in the ring and how to wake it on its event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.ready = asyncio.Event()
        self.position = 0  # the ring position of the next event to send
        self.signalled = False  # a wake-up is on its way (guarded by the feed's lock)
        self.started = time.monotonic()

    def wake(self) -> None:
        with contextlib.suppress(RuntimeError):  # its loop is closed: the stream is gone
            self.loop.call_soon_threadsafe(self.ready.set)


class EventFeed:
    def __init__(self, settings: EventFeedSettings, last_seq: int, *, clock: Any = time.monotonic) -> None:
        """``last_seq``: the graph's newest event when the feed starts (later ones arrive by ``graph_events``)."""
        self.settings = settings
        self._clock = clock
        self._lock = threading.Lock()
        self._ring: deque[FeedEvent] = deque()
        self._first = 0  # the ring position of self._ring[0]
        self._graph_seq = last_seq
        # job events count from the start time in microseconds: keys keep growing across restarts
        self._job_ids = itertools.count(time.time_ns() // 1_000 + 1)
        self._floor = Key(last_seq, next(self._job_ids))  # every event after this key is in the ring
        self._subscribers: set[Subscriber] = set()
        self._last_progress: dict[str, float] = {}
        self._closed = False
        self.published = 0

    # -- sources ----------------------------------------------------------------------------------------
    def graph_events(self, rows: list[dict[str, Any]]) -> None:
        """A committed write's events (``GraphStore.on_events``)."""
        self._publish([graph_event(row) for row in rows], graph=True)

    def job_changed(self, change: JobChange, job: Job) -> None:
        """A job's change (``JobQueue.subscribe``); progress at most once per ``progress_interval_seconds``."""
        now = self._clock()
        if change == "progress":
            last = self._last_progress.get(job.id)
            if last is not None and now - last < self.settings.progress_interval_seconds:
                return
            self._last_progress[job.id] = now
        elif change in ("done", "failed", "cancelled"):
            self._last_progress.pop(job.id, None)
        view = job.to_dict()
        at = datetime.now(UTC).isoformat(timespec="milliseconds")
        # consolidation and Dream State jobs are keyed "<kind>:<project>:…"
        project = job.key.split(":")[1] if job.key and job.key.count(":") >= 2 else None
        events = [(JOB_KINDS[change], job_detail(view))]
        if job.kind == "dream_state" and change in DREAM_KINDS:
            detail = job_detail(view)
            if change == "done":
                detail["report"] = dream_summary(job.result)
            events.append((DREAM_KINDS[change], detail))
        self._publish([FeedEvent(Key(0), kind, at, None, project, detail) for kind, detail in events], graph=False)

    def _publish(self, events: list[FeedEvent], graph: bool) -> None:
        if not events:
            return
        with self._lock:
            if self._closed:
                return
            for event in events:
                if graph:
                    self._graph_seq = event.key.g
                    keyed = event
                else:
                    keyed = FeedEvent(Key(self._graph_seq, next(self._job_ids)), event.kind, event.at, event.kref,
                                      event.project, event.detail)
                self._ring.append(keyed)
            while len(self._ring) > self.settings.buffer_events:
                self._floor = self._ring.popleft().key
                self._first += 1
            self.published += len(events)
            waking = [s for s in self._subscribers if not s.signalled]
            for subscriber in waking:
                subscriber.signalled = True
        for subscriber in waking:
            subscriber.wake()

    # -- streams ----------------------------------------------------------------------------------------
    def subscribe(self) -> Subscriber:
        """A new stream on the running event loop; Unavailable when ``max_subscribers`` are open."""
        subscriber = Subscriber(asyncio.get_running_loop())
        with self._lock:
            if self._closed:
                raise Unavailable("events: the appliance is shutting down; reconnect in a moment")
            if len(self._subscribers) >= self.settings.max_subscribers:
                raise Unavailable(f"events: {self.settings.max_subscribers} event streams are already open (the "
                                  "events.max_subscribers setting); close one or retry later")
            self._subscribers.add(subscriber)
            subscriber.position = self._first + len(self._ring)  # from now, unless it resumes
        return subscriber

    def unsubscribe(self, subscriber: Subscriber) -> None:
        with self._lock:
            self._subscribers.discard(subscriber)

    def resume(self, subscriber: Subscriber, after: Key) -> Key | None:
        """Place the stream just after ``after`` when the ring still holds every later event; otherwise
        return the key up to which the caller must replay from the graph first (the ring's floor)."""
        with self._lock:
            if after < self._floor:
                return self._floor
            keys = [event.key for event in self._ring]
            subscriber.position = self._first + bisect.bisect_right(keys, after)
            return None

    def take(self, subscriber: Subscriber, limit: int = 256) -> list[FeedEvent]:
        """The next events for this stream (empty: wait for ``subscriber.ready``)."""
        with self._lock:
            subscriber.signalled = False
            if self._closed:
                raise Closed
            start = subscriber.position - self._first
            if start < 0:
                raise Lagged
            taken = list(itertools.islice(self._ring, start, start + limit))
            subscriber.position += len(taken)
            return taken

    def newest(self) -> Key:
        """The key of the newest event (what a stream that starts now has seen)."""
        with self._lock:
            return self._ring[-1].key if self._ring else self._floor

    # -- state ------------------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return not self._closed

    def state(self) -> dict[str, int]:
        with self._lock:
            return {"subscribers": len(self._subscribers), "buffered": len(self._ring),
                    "last_seq": self._graph_seq}

    def close(self) -> None:
        """End every stream (their generators see ``Closed`` and finish their responses)."""
        with self._lock:
            self._closed = True
            subscribers = list(self._subscribers)
        for subscriber in subscribers:
            subscriber.wake()
