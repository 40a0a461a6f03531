"""The graph's event feed as Kumiho's ``EventStream``, and its capabilities.

Every graph write records its events (``project.created``, ``revision.tagged``…) in the graph's event table,
which is never trimmed; a stream reads that table from its start position and then waits for the next commit
(``GraphStore.on_events`` wakes it), so a client resuming with the ``cursor`` of the last event it got misses
nothing, across restarts too. Filters: ``routing_key_filter`` with ``*`` for one dot-separated word and ``#``
for any number (``revision.*``), ``kref_filter`` a glob (``kref://proj/**/*.model``: ``*`` stays inside one
path segment, ``**`` crosses them). A stream lasts until the client cancels it or the appliance stops; each
holds one of the gRPC door's worker threads, so at most ``MAX_STREAMS`` run at once (one more answers
``RESOURCE_EXHAUSTED``). Consumer groups are not supported (refused)."""

from __future__ import annotations

import json
import re
import threading
import weakref
from collections.abc import Iterator
from datetime import datetime
from functools import lru_cache
from typing import Any

from google.protobuf.message import Message

from appliance.core import kref as krefs
from appliance.core import names
from appliance.errors import InvalidArgument
from appliance.graph import GraphStore
from appliance.grpc_api import convert
from appliance.grpc_api.descriptor import message
from appliance.grpc_api.errors import Exhausted
from appliance.grpc_api.server import Rpc, RpcCall

MAX_STREAMS = 8  # of the door's 32 worker threads (server.WORKERS): the other calls keep the rest
MAX_FILTER = 512  # characters of a routing-key or kref filter
MAX_WILDCARDS = names.MAX_WILDCARDS  # in a kref filter, as in the other glob filters (ItemSearch)
BATCH = 500  # events read from the graph at a time
WAIT_SECONDS = 0.5  # between checks that the client is still there, while nothing happens
USERNAME = "local"

_open = 0
_open_lock = threading.Lock()


class _Waker:
    """Wakes the streams of one graph after each commit that wrote events."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self.generation = 0

    def __call__(self, events: list[dict[str, Any]] | None = None) -> None:
        with self.changed:
            self.generation += 1
            self.changed.notify_all()


# One waker per open graph, gone with it: the graph holds its waker (a listener), never the other way round
_wakers: weakref.WeakKeyDictionary[GraphStore, _Waker] = weakref.WeakKeyDictionary()
_wakers_lock = threading.Lock()


def _waker(graph: GraphStore) -> _Waker:
    with _wakers_lock:
        found = _wakers.get(graph)
        if found is None:
            found = _wakers[graph] = _Waker()
            graph.on_events(found)
        return found


def event_stream(call: RpcCall, request: Any) -> Iterator[Message]:
    global _open
    if request.HasField("consumer_group") and request.consumer_group:
        raise InvalidArgument("consumer_group: kumiho-ce has no consumer groups (GetEventCapabilities says so); "
                              "leave it out", field="consumer_group")
    routing = _routing_matcher(_bounded(request.routing_key_filter, "routing_key_filter"))
    kref_match = _kref_matcher(_bounded(request.kref_filter, "kref_filter"))
    graph = call.services.graph
    after = _start(graph, request)
    with _open_lock:
        if _open >= MAX_STREAMS:
            raise Exhausted(f"{MAX_STREAMS} event streams are open already, the most this appliance serves at "
                            "once; close one or try again later")
        _open += 1
    try:
        waker = _waker(graph)
        call.on_done(waker)  # a cancelled stream gives its place back at once, not after WAIT_SECONDS
        while not call.cancelled():
            with waker.changed:
                seen = waker.generation
            batch = graph.events_after(after, BATCH)
            for event in batch:
                after = event["seq"]
                if routing(event["routing_key"]) and kref_match(event["kref"]):
                    yield _event(event)
            if len(batch) < BATCH:
                with waker.changed:
                    if waker.generation == seen:
                        waker.changed.wait(WAIT_SECONDS)
    finally:
        with _open_lock:
            _open -= 1


def get_event_capabilities(call: RpcCall, request: Any) -> Message:
    return message("EventCapabilities")(supports_replay=True, supports_cursor=True,
                                        supports_consumer_groups=False, max_retention_hours=-1,
                                        max_buffer_size=-1, tier="self_hosted_ce")


def _start(graph: GraphStore, request: Any) -> int:
    """The sequence number after which the stream starts: a cursor (``cursor`` or ``from_cursor``) resumes
    after that event, ``from_beginning`` starts with the first event, ``from_timestamp`` with the first event
    at or after that time, and otherwise (``from_latest``) with the next event written."""
    position = request.WhichOneof("start_position")
    cursor = request.from_cursor if position == "from_cursor" else request.cursor if request.HasField("cursor") \
        else ""
    if cursor:
        if not cursor.isdigit() or len(cursor) > 18:
            raise InvalidArgument("cursor: give the cursor of an event this appliance sent (a number)",
                                  field="cursor")
        return int(cursor)
    if position == "from_beginning" and request.from_beginning:
        return -1
    if position == "from_timestamp":
        return _seq_before(graph, datetime.fromisoformat(krefs.parse_time(request.from_timestamp, "from_timestamp")))
    return graph.last_event_seq()


def _seq_before(graph: GraphStore, moment: datetime) -> int:
    """The last event before ``moment`` (events are in time order): a binary search, a read per step."""
    low, high = -1, graph.last_event_seq()  # invariant: event `low` is before moment (or none), `high + 1` not
    while low < high:
        middle = (low + high + 1) // 2
        found = graph.events_after(middle - 1, 1)  # event `middle` alone: a range read, no sort
        if found and _time(found[0]["at"]) < moment:
            low = middle
        else:
            high = middle - 1
    return low


def _time(text: str) -> datetime:
    return datetime.fromisoformat(krefs.parse_time(text))


def _event(event: dict[str, Any]) -> Message:
    details = {str(k): v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)
               for k, v in (event.get("details") or {}).items() if v is not None}
    return message("Event")(routing_key=event["routing_key"], kref=convert.kref(event["kref"]),
                            timestamp=event["at"], author=event["author"], details=details,
                            username=USERNAME, cursor=str(event["seq"]))


def _bounded(value: str, field: str) -> str:
    if len(value) > MAX_FILTER:
        raise InvalidArgument(f"{field}: at most {MAX_FILTER} characters", field=field)
    return value.strip()


def _routing_matcher(pattern: str) -> Any:
    """``*`` one word, ``#`` any number of words (AMQP topic rules); several patterns separated by commas."""
    if not pattern:
        return lambda key: True
    patterns = [tuple(p.strip().split(".")) for p in pattern.split(",") if p.strip()]
    return lambda key: any(_topic_matches(p, tuple(key.split("."))) for p in patterns)


@lru_cache(maxsize=1024)
def _topic_matches(pattern: tuple[str, ...], key: tuple[str, ...]) -> bool:
    if not pattern:
        return not key
    if pattern[0] == "#":
        return any(_topic_matches(pattern[1:], key[i:]) for i in range(len(key) + 1))
    return bool(key) and pattern[0] in ("*", key[0]) and _topic_matches(pattern[1:], key[1:])


def _kref_matcher(pattern: str) -> Any:
    if not pattern:
        return lambda kref: True
    glob = _kref_glob(pattern)
    return lambda kref: _glob_matches(glob, kref)


_GLOB_TOKENS = re.compile(r"(\*\*/?|\*|\?)")


@lru_cache(maxsize=64)
def _kref_glob(pattern: str) -> tuple[str, ...]:
    """The pattern's pieces: wildcards (``**/``, ``**``, ``*``, ``?``) and the literal text between them, at
    most ``MAX_WILDCARDS`` wildcards. A regular expression would do, but Python's ``re`` backtracks: a short
    filter of many ``**`` took minutes on one event kref, holding the GIL, and froze every door."""
    pieces = tuple(piece for piece in _GLOB_TOKENS.split(pattern) if piece)
    wildcards = sum(1 for piece in pieces if piece in _WILDCARDS)
    if wildcards > MAX_WILDCARDS:
        raise InvalidArgument(f"kref_filter: at most {MAX_WILDCARDS} wildcards (each '*', '**' or '?' counts one; "
                              f"got {wildcards}); use fewer, e.g. 'kref://films/**/*.model'", field="kref_filter")
    return pieces


_WILDCARDS = frozenset({"**/", "**", "*", "?"})


def _glob_matches(pieces: tuple[str, ...], text: str) -> bool:
    """Whether ``text`` matches the whole glob: ``*`` any run without '/', ``**`` any run, ``**/`` nothing or
    any run ending in '/', ``?`` one character but '/'. It follows every way of matching at once (the set of
    positions each piece can end at), so the work is at most pieces × length of ``text``, never exponential."""
    at = {0}
    end = len(text)
    for piece in pieces:
        if piece == "*":
            at = _runs_without_slash(text, at)
        elif piece == "**":
            at = set(range(min(at), end + 1))
        elif piece == "**/":
            at = at | {slash + 1 for slash in range(min(at), end) if text[slash] == "/"}
        elif piece == "?":
            at = {p + 1 for p in at if p < end and text[p] != "/"}
        else:
            at = {p + len(piece) for p in at if text.startswith(piece, p)}
        if not at:
            return False
    return end in at


def _runs_without_slash(text: str, starts: set[int]) -> set[int]:
    """Every position reachable from one of ``starts`` over characters that are not '/' (each position once)."""
    reach: set[int] = set()
    covered = 0
    for start in sorted(starts):
        stop = text.find("/", start)
        stop = len(text) if stop < 0 else stop
        reach.update(range(max(start, covered), stop + 1))
        covered = stop + 1
    return reach


RPCS: dict[str, Rpc] = {"EventStream": event_stream, "GetEventCapabilities": get_event_capabilities}
