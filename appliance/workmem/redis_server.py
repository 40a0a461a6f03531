"""The working-memory Redis-protocol listener: 127.0.0.1:``[kumiho] redis_port``, in the appliance process.

Kumiho's stock memory sidecar keeps its working memory in Redis (``KUMIHO_UPSTASH_REDIS_URL``). This listener
speaks the part of the protocol it uses (``commands.py``) on the appliance's own working memory, so that the
sidecar needs no Redis server and what it buffers is consolidated by the appliance like any other session.

It runs its own event loop in a thread beside the HTTP server: its commands are short blocking SQLite calls
(the working memory serialises them behind one lock anyway), and a separate loop keeps them off the loop that
serves HTTP and MCP. Always on loopback; with the token required, clients AUTH with the appliance's token.
A port already taken leaves it off with a warning: the appliance itself still starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import threading
import time
from typing import TYPE_CHECKING

from appliance.config import Settings
from appliance.memory.working import WorkingMemory
from appliance.workmem.commands import Commands, Connection
from appliance.workmem.resp import Error, ProtocolError, Reply, encode, read_command

if TYPE_CHECKING:
    from appliance.app import Services

log = logging.getLogger(__name__)

HOST = "127.0.0.1"
MAX_CONNECTIONS = 256  # a sidecar's pool holds a few; each connection costs a task and two small buffers
LINE_LIMIT = 64 * 1024  # the StreamReader's buffer bound for a header line (resp bounds the rest)
COMMAND_SECONDS = 30.0  # a command whose first byte arrived must be whole by then (idle connections may wait)
# With the token required, a connection must have authenticated this long after it opened, or it is closed: an
# idle unauthenticated one would otherwise hold one of the MAX_CONNECTIONS slots for ever (redis-py
# authenticates in its handshake, within milliseconds)
AUTH_SECONDS = 10.0
REFUSAL_DRAIN_SECONDS = 1.0  # how long a refused client may still send before its connection is closed
ACTIVE_SECONDS = 2.0  # a command this recent keeps an appliance that may idle out alive (polled once a second)


class RedisListener:
    def __init__(self, working: WorkingMemory, sock: socket.socket, token: str | None,
                 max_connections: int = MAX_CONNECTIONS, command_seconds: float = COMMAND_SECONDS,
                 auth_seconds: float = AUTH_SECONDS) -> None:
        self._commands = Commands(working)
        self._max_connections = max_connections
        self._command_seconds = command_seconds
        self._auth_seconds = auth_seconds
        self._sock = sock
        self._token = token.encode() if token is not None else None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="workmem-redis", daemon=True)
        self._clients: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        self._last_command = float("-inf")

    @property
    def port(self) -> int:
        return int(self._sock.getsockname()[1])

    def busy(self) -> bool:
        """Whether a command was served in the last couple of seconds (the idle watch's activity)."""
        return time.monotonic() - self._last_command < ACTIVE_SECONDS

    def start(self) -> None:
        self._thread.start()
        self._ready.wait(10)

    def stop(self, timeout: float = 5.0) -> None:
        """Close the listener and every connection; returns once no command runs any more."""
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop ended by itself meanwhile
                loop.call_soon_threadsafe(stopping.set)
        self._thread.join(timeout)
        self._sock.close()

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except Exception:
            log.exception("the working-memory Redis listener stopped")
        finally:
            self._ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(self._serve, sock=self._sock, limit=LINE_LIMIT)
        self._ready.set()
        try:
            await self._stopping.wait()
        finally:
            server.close()
            for writer in list(self._clients):
                writer.close()  # each handler then reads the end of its input and finishes
            if self._tasks:
                await asyncio.wait(list(self._tasks), timeout=5)
            await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._clients) >= self._max_connections:
            await self._refuse(reader, writer)
            return
        self._clients.add(writer)
        task = asyncio.current_task()  # the handler's own task: stop() waits for it
        if task is not None:
            self._tasks.add(task)
        conn = Connection(self._token)
        auth_deadline = asyncio.get_running_loop().time() + self._auth_seconds
        try:
            while not conn.closing:
                try:
                    async with asyncio.timeout_at(None if conn.authenticated else auth_deadline):
                        args = await read_command(reader, self._command_seconds)
                except TimeoutError:
                    writer.write(encode(Error(f"ERR authentication required within {self._auth_seconds:g} s of "
                                              "connecting: AUTH with the appliance's token; closing"), conn.protocol))
                    await writer.drain()
                    break
                except ProtocolError as exc:
                    writer.write(encode(Error(f"ERR {exc}"), conn.protocol))
                    await writer.drain()
                    break
                reply = self._run_command(conn, args)
                writer.write(encode(reply, conn.protocol))
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client left, mid-command or between commands
        finally:
            self._clients.discard(writer)
            if task is not None:
                self._tasks.discard(task)
            writer.close()
            with contextlib.suppress(ConnectionError, OSError):
                await writer.wait_closed()

    async def _refuse(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Past the cap: say so, then let the client's pipelined handshake drain before closing, so that it reads
        the error rather than a connection reset."""
        writer.write(encode(Error(f"ERR max number of clients reached ({self._max_connections})"), 2))
        with contextlib.suppress(ConnectionError, OSError, asyncio.TimeoutError):
            await writer.drain()
            writer.write_eof()
            async with asyncio.timeout(REFUSAL_DRAIN_SECONDS):
                while await reader.read(65536):
                    pass
        writer.close()

    def _run_command(self, conn: Connection, args: list[bytes]) -> Reply:
        self._last_command = time.monotonic()
        try:
            return self._commands.run(conn, args)
        except Exception:
            log.exception("working-memory Redis command failed")
            return Error("ERR internal error; see the appliance log")


def bind(port: int) -> socket.socket | None:
    """The listening socket on 127.0.0.1:``port``, or None (with a warning) when it cannot be had."""
    try:
        return socket.create_server((HOST, port), backlog=128)
    except OSError as exc:
        log.warning("the working-memory Redis listener is off: cannot listen on %s:%d (%s); set [kumiho] "
                    "redis_port (KUMIHO_CE_KUMIHO__REDIS_PORT) to a free port, or 0 to turn it off",
                    HOST, port, exc.strerror or exc)
        return None


def start(settings: Settings, services: Services) -> RedisListener | None:
    """Start the listener of ``[kumiho] redis_port`` on the services' working memory (None when off or the port
    is taken); ``stop`` it before the services close."""
    port = settings.kumiho.redis_port
    if not port:
        return None
    sock = bind(port)
    if sock is None:
        return None
    listener = RedisListener(services.working, sock, services.token if settings.token_required else None)
    listener.start()
    log.info("working memory for Kumiho's sidecar on redis://%s:%d%s", HOST, listener.port,
             " (AUTH with the appliance token)" if settings.token_required else "")
    return listener


def stop(listener: RedisListener | None) -> None:
    if listener is not None:
        listener.stop()
