"""The live event feed's vocabulary: what one event says, its id, and how a client's resume point is read.

Two sources feed it. Graph writes come from the graph's event table (``Event.seq``: Kùzu's SERIAL, gapless,
persistent); job and Dream State events are not written to the graph (progress can come once per generated
token, and a graph write wakes every commit listener) and live only in memory. So every event has a *key*
``(g, j)``: ``g`` is the newest graph sequence number at that point of the feed, ``j`` is 0 for a graph event
and, for a job event, a counter that starts at the process's start time in microseconds, so that keys keep
growing across restarts. Keys grow in the order events are sent. The SSE id is ``"g"`` for a graph event (the
graph's own sequence number) and ``"g:j"`` for a job event; a client resumes after any id it saw.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from appliance.errors import InvalidArgument

MAX_ID_CHARS = 40
# "-1:<n>" is a real id: a job event's before the graph's first event (-1 alone is ``OLDEST``)
_ID = re.compile(r"(-1|0|[1-9]\d{0,17})(?::([1-9]\d{0,19}))?")
# job changes → the feed's event kinds (a job "running" is announced as started)
JOB_KINDS = {"queued": "job.queued", "running": "job.started", "progress": "job.progress", "done": "job.done",
             "failed": "job.failed", "cancelled": "job.cancelled"}
DREAM_KINDS = {"running": "dream_state.started", "done": "dream_state.finished", "failed": "dream_state.finished",
               "cancelled": "dream_state.finished"}


class Key(NamedTuple):
    """A position in the feed: after the graph event ``g`` and the job event ``j`` (0: none since ``g``)."""

    g: int
    j: int = 0

    @property
    def id(self) -> str:
        return str(self.g) if self.j == 0 else f"{self.g}:{self.j}"


OLDEST = Key(-1)  # the resume point ``-1``: the oldest event still replayable (see ``oldest_replayable``)


@dataclass(frozen=True)
class FeedEvent:
    key: Key
    kind: str
    at: str
    kref: str | None = None
    project: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return self.key.id

    def data(self) -> dict[str, Any]:
        """The event's ``data:`` JSON."""
        body: dict[str, Any] = {"id": self.id, "kind": self.kind, "at": self.at}
        if self.key.j == 0:
            body["seq"] = self.key.g
        if self.kref:
            body["kref"] = self.kref
        if self.project:
            body["project"] = self.project
        body["detail"] = self.detail
        return body


def parse_id(text: str, field_name: str) -> Key:
    """A resume point from ``Last-Event-ID`` or ``?after=``: an id the feed sent, or -1 for the oldest event
    still replayable (``OLDEST``)."""
    found = _ID.fullmatch(text.strip()) if len(text) <= MAX_ID_CHARS else None
    if found is None:
        raise InvalidArgument(f"{field_name}: give the id of the last event you received (\"1234\" or "
                              f"\"1234:5678\", at most {MAX_ID_CHARS} characters), or -1 to start from the oldest "
                              "event still replayable", field=field_name)
    return Key(int(found.group(1)), int(found.group(2) or 0))


def oldest_replayable(newest: Key, limit: int) -> Key:
    """Where ``-1`` resumes: just before the newest ``limit`` graph events (all of them in a smaller graph), so
    that a client starting from the oldest replayable event gets a replay, never a reset."""
    return Key(max(-1, newest.g - limit))


def project_of(kref: str) -> str | None:
    """``kref://Project/...`` → ``Project``."""
    if not kref.startswith("kref://"):
        return None
    return kref[len("kref://"):].split("/", 1)[0].split("?", 1)[0] or None


def graph_event(row: dict[str, Any]) -> FeedEvent:
    """One row of the graph's event table (``GraphStore.events``) as a feed event."""
    kref = row["kref"] or None
    return FeedEvent(Key(int(row["seq"])), row["routing_key"], row["at"], kref, project_of(kref or ""),
                     row["details"])


def job_detail(job: dict[str, Any]) -> dict[str, Any]:
    """What a job event carries: the job's state without its result (``GET /api/v1/jobs/{id}`` has it)."""
    keep = ("job_id", "kind", "lane", "state", "description", "progress", "note", "error", "started_at",
            "finished_at")
    return {name: job[name] for name in keep if name in job}


def dream_summary(result: Any) -> dict[str, Any]:
    """A Dream State report's counts (its scalar fields); lists of krefs stay in the job's result."""
    if not isinstance(result, dict):
        return {}
    return {k: v for k, v in result.items() if isinstance(v, bool | int | float | str) and len(str(v)) <= 200}
