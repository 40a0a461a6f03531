"""The idle watch of a shim-started appliance: requests in flight and jobs keep it awake."""

from __future__ import annotations

import asyncio
from typing import Any

from appliance.server.idle import IdleWatch


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_idle_time_counts_from_the_end_of_the_last_request_and_not_while_busy() -> None:
    clock, jobs_running = Clock(), [False]
    watch = IdleWatch(busy=lambda: jobs_running[0], clock=clock)
    release = asyncio.Event()

    async def slow_app(scope: Any, receive: Any, send: Any) -> None:
        await release.wait()

    app = watch.wrap(slow_app)

    async def scenario() -> list[float]:
        seen = []
        clock.now += 50
        seen.append(watch.idle_seconds())  # nothing happened for 50 s
        request = asyncio.create_task(app({"type": "http"}, None, None))
        await asyncio.sleep(0)
        clock.now += 500
        seen.append(watch.idle_seconds())  # a request in flight for 500 s is not idleness
        clock.now += 10
        release.set()
        await request
        clock.now += 20
        seen.append(watch.idle_seconds())  # counted from the request's end
        jobs_running[0] = True
        clock.now += 100
        seen.append(watch.idle_seconds())  # a running job is not idleness either
        jobs_running[0] = False
        clock.now += 7
        seen.append(watch.idle_seconds())
        await app({"type": "lifespan"}, None, None)  # not a request: changes nothing
        seen.append(watch.idle_seconds())
        return seen

    assert asyncio.run(scenario()) == [50, 0, 20, 0, 7, 7]
