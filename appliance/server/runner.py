"""Run the ASGI app behind the front listener, with uvicorn's HTTP/1.1 protocol (bounded: limits.py) and
lifecycle.

uvicorn normally opens its own listening server; here ``startup`` builds the same protocol factory and gives
it to the front instead, so that uvicorn's signal handling, graceful shutdown and lifespan stay as they are.

Under systemd (``Type=notify``) the server tells the service manager when it is ready (the stores are open, since
the caller opened them first, and the port listens), pings its watchdog while healthy, and says when it stops
(``sdnotify``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable, Iterator
from typing import Any

import uvicorn

from appliance.config import HttpSettings
from appliance.server.allocator import MallocTrimmer
from appliance.server.front import FrontListener
from appliance.server.idle import IdleWatch
from appliance.server.limits import ConnectionLimits, bounded_protocol
from appliance.server.sdnotify import Watchdog, notify, watchdog_seconds

log = logging.getLogger(__name__)


class ApplianceServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, sock: socket.socket, grpc_target: str | None = None,
                 http: HttpSettings | None = None, idle_exit: tuple[IdleWatch, float] | None = None,
                 on_shutdown: Callable[[], None] | None = None, healthy: Callable[[], bool] | None = None) -> None:
        super().__init__(config)
        self._on_shutdown = on_shutdown
        interval = watchdog_seconds()
        # ping every half of the manager's timeout (as sd_watchdog_enabled advises)
        self.watchdog = Watchdog(interval / 2, healthy) if interval and healthy else None
        self._watchdog_task: asyncio.Task[None] | None = None
        self._public_sock = sock
        self._grpc_target = grpc_target
        self._http = http or HttpSettings()
        self._idle_exit = idle_exit
        self.front: FrontListener | None = None

    async def on_tick(self, counter: int) -> bool:
        """uvicorn's 0.1 s tick; once a second, also the idle check when this appliance may idle out. The
        exit it triggers is the graceful one of SIGTERM."""
        if await super().on_tick(counter):
            return True
        if self._idle_exit is None or counter % 10:
            return False
        watch, limit = self._idle_exit
        if watch.idle_seconds() < limit:
            return False
        log.info("no request and no job for %.0f s: exiting (started with --exit-when-idle)", limit)
        return True

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """SIGTERM/SIGINT stop the appliance gracefully and the process then exits normally, so that
        the caller closes the stores; uvicorn would re-raise the signal and kill the process instead."""
        with super().capture_signals():
            yield
            self._captured_signals.clear()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """uvicorn waits (up to timeout_graceful_shutdown) for open responses to finish before the lifespan
        ends: ``on_shutdown`` first ends the responses that never finish by themselves (event streams). It runs
        before the front stops and in a thread, so that it may wait while this loop still pumps the front's
        connections (the gRPC calls under way finish within their grace)."""
        notify("STOPPING=1\nSTATUS=stopping: finishing the requests under way")
        if self._watchdog_task is not None:
            self._watchdog_task.cancel()  # the manager stops watching once STOPPING=1 arrives
        if self._on_shutdown is not None:
            try:
                await asyncio.to_thread(self._on_shutdown)
            except Exception:
                log.exception("shutdown hook failed")
        await super().shutdown(sockets)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await self.lifespan.startup()
        if self.lifespan.should_exit:
            self.should_exit = True
            return
        config = self.config

        def create_protocol(head: bytes) -> asyncio.Protocol:
            # uvicorn types the class as asyncio.Protocol; its HTTP protocols take these arguments
            return config.http_protocol_class(  # type: ignore[call-arg]
                config=config, server_state=self.server_state, app_state=self.lifespan.state, head=head
            )

        self.front = FrontListener(self._public_sock, create_protocol, self._grpc_target,
                                   max_connections=self._http.max_connections,
                                   open_connections=lambda: len(self.server_state.connections),
                                   first_byte_timeout=self._http.header_timeout_seconds)
        await self.front.start()
        self.servers = [self.front]  # type: ignore[list-item]  # uvicorn only calls close() on them
        host, port = self.front.address
        log.info("kumiho-ce listening on http://%s:%d (HTTP/1.1 and, when enabled, gRPC)", host, port)
        self.started = True
        notify(f"READY=1\nSTATUS=serving on http://{host}:{port}")
        if self.watchdog is not None:
            self._watchdog_task = asyncio.get_running_loop().create_task(self.watchdog.run(), name="watchdog")


def make_config(app: Any, log_level: str, http: HttpSettings | None = None) -> uvicorn.Config:
    http = http or HttpSettings()
    return uvicorn.Config(
        app,
        log_level=log_level,
        access_log=log_level == "debug",
        lifespan="on",
        http=bounded_protocol(ConnectionLimits.from_settings(http)),  # httptools with header/time limits
        # The front admits at most max_connections, so this bound is reached only by requests still running
        # for connections already gone: past it they are answered 503.
        limit_concurrency=http.max_connections + 1,
        ws="none",
        proxy_headers=False,
        server_header=False,
        timeout_graceful_shutdown=10,
        log_config=None,  # logging is configured once, by the CLI
    )


def run(app: Any, sock: socket.socket, http: HttpSettings, log_level: str = "info",
        grpc_target: str | None = None, idle_exit: tuple[IdleWatch, float] | None = None,
        on_shutdown: Callable[[], None] | None = None, healthy: Callable[[], bool] | None = None) -> int:
    """Serve until SIGTERM/SIGINT or, with ``idle_exit`` (a watch and seconds), until idle that long;
    ``on_shutdown`` runs (in a thread) as the server stops, before the front closes and before it waits for open
    responses. Under a service manager's watchdog, ``healthy`` (blocking: whether the stores answer) gates each
    ping (``sdnotify.Watchdog``)."""
    if idle_exit is not None:
        app = idle_exit[0].wrap(app)
    server = ApplianceServer(make_config(app, log_level, http), sock, grpc_target, http, idle_exit, on_shutdown,
                             healthy)
    with MallocTrimmer() as trimmer:
        server.run()
    log.debug("malloc_trim ran %d times, the slowest took %.1f ms", trimmer.trims, trimmer.slowest_ms)
    return 0 if server.started else 3
