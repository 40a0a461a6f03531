"""A small server-sent events reader over an httpx stream, for the event feed tests (bounded by the client's
read timeout: a stream that stays silent fails the test instead of hanging it)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx


@dataclass
class Block:
    """One block of the stream: an event (``kind`` set) or comment lines only."""

    id: str | None = None
    kind: str | None = None
    data: dict[str, Any] | None = None
    comments: list[str] = field(default_factory=list)


class EventReader:
    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self._lines: Iterator[str] = response.iter_lines()

    def block(self) -> Block:
        """The next block; StopIteration when the server ended the stream."""
        found = Block()
        data: list[str] = []
        for line in self._lines:
            if line == "":
                if data or found.kind or found.comments:
                    found.data = json.loads("\n".join(data)) if data else None
                    return found
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "":
                found.comments.append(value)
            elif name == "id":
                found.id = value
            elif name == "event":
                found.kind = value
            elif name == "data":
                data.append(value)
        raise StopIteration

    def event(self) -> Block:
        """The next event, skipping comment-only blocks (the greeting, keep-alives)."""
        while True:
            found = self.block()
            if found.kind is not None:
                return found

    def events_until(self, predicate: Any, limit: int = 1_000) -> list[Block]:
        """Events up to and including the first one ``predicate`` accepts."""
        seen = []
        for _ in range(limit):
            seen.append(self.event())
            if predicate(seen[-1]):
                return seen
        raise AssertionError(f"no matching event among {limit}: {[b.kind for b in seen[-20:]]}")
