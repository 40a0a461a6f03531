"""Idle detection for an appliance that ``kumiho-ce mcp`` started in the background.

Such an appliance has no owner once the agent hosts that spawned the shims are gone, so it exits after a
quiet spell (``serve --exit-when-idle SECONDS``). Quiet means no HTTP request or gRPC call in flight, none
finished for that long, and no job queued or running. An idle keep-alive connection is not activity: a shim keeps its
connection open for as long as it lives, active or not. An appliance started by hand or by systemd gets no
watch and never idles out.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

Clock = Callable[[], float]


class IdleWatch:
    def __init__(self, busy: Callable[[], bool], clock: Clock = time.monotonic) -> None:
        self._busy, self._clock = busy, clock
        self._in_flight = 0
        self._last_activity = clock()

    def wrap(self, app: Any) -> Any:
        """The ASGI ``app`` with every HTTP request counted (all on the server's event loop: no lock)."""

        async def counted(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            self._in_flight += 1
            try:
                await app(scope, receive, send)
            finally:
                self._in_flight -= 1
                self._last_activity = self._clock()

        return counted

    def touch(self) -> None:
        """Count activity seen outside HTTP (a gRPC call starting or ending; any thread: one float store)."""
        self._last_activity = self._clock()

    def idle_seconds(self) -> float:
        """How long nothing has happened; 0 while a request or a job is under way."""
        now = self._clock()
        if self._in_flight or self._busy():
            self._last_activity = now
        return now - self._last_activity
