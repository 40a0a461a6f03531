"""One port, two protocols: the listener in front of everything.

Kumiho's clients probe ``GET /api/_live`` over HTTP/1.1 and then speak plaintext gRPC (HTTP/2 with prior
knowledge) to the same address. The front accepts each connection, peeks at its first bytes without
consuming them, and hands it over whole:

* the HTTP/2 preface (``PRI * HTTP/2.0``) → the gRPC backend, a Unix socket, through a byte pump;
* anything else → the in-process HTTP/1.1 protocol (uvicorn's, serving Litestar and ``/mcp``), attached
  directly to the accepted socket; the few bytes read to decide are handed to it first.

The front also bounds what a client can hold: beyond ``max_connections`` open connections a new one is
answered 503 and closed, and a connection that does not send enough to decide within ``first_byte_timeout``
is closed. Deciding reads (never peeks at) the socket, so a client that sends ``PR`` and stops costs nothing
while it waits: a peeked socket stays readable and waiting on it would spin.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable

from appliance.server.problems import problem_bytes

log = logging.getLogger(__name__)

H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_NO_GRPC = b"kumiho-ce: gRPC is not enabled on this appliance"
# An HTTP/2 server preface (empty SETTINGS) and a GOAWAY (last stream 0, NO_ERROR) saying why.
H2_GOAWAY = (
    b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"
    + (8 + len(_NO_GRPC)).to_bytes(3, "big") + b"\x07\x00\x00\x00\x00\x00"
    + b"\x00\x00\x00\x00\x00\x00\x00\x00" + _NO_GRPC
)
_DECIDE = len(b"PRI ")  # no HTTP/1 request line starts with "PRI " (RFC 9113 §3.4)
FIRST_BYTES_TIMEOUT = 10.0


_BUSY_BODY = problem_bytes(503, "overloaded", "too many open connections (the http.max_connections setting); try "
                           "again shortly")
BUSY = (b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/problem+json\r\nconnection: close\r\n"
        b"retry-after: 1\r\ncontent-length: %d\r\n\r\n" % len(_BUSY_BODY)) + _BUSY_BODY


def bind(host: str, port: int, backlog: int = 512) -> socket.socket:
    """Bind the public socket (IPv4 or IPv6 by the host's form); raises OSError when the port is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


class FrontListener:
    def __init__(
        self,
        sock: socket.socket,
        http_factory: Callable[[bytes], asyncio.Protocol],
        grpc_target: str | None = None,
        *,
        max_connections: int | None = None,
        open_connections: Callable[[], int] = lambda: 0,
        first_byte_timeout: float = FIRST_BYTES_TIMEOUT,
    ) -> None:
        self._sock = sock
        self._http_factory = http_factory
        self.grpc_target = grpc_target  # a Unix socket path; None until a gRPC server exists
        self.max_connections = max_connections
        self._open_connections = open_connections  # HTTP connections already handed over, still open
        self.first_byte_timeout = first_byte_timeout
        self._accepting: asyncio.Task[None] | None = None
        self._routing: set[asyncio.Task[None]] = set()  # connections being routed, and gRPC pumps
        # Connections the front holds (being routed, or pumped to gRPC): a connection handed to the HTTP
        # protocol leaves this count once the HTTP server counts it, so that it is briefly counted twice (a
        # conservative limit) and never by neither side
        self._held = 0

    @property
    def address(self) -> tuple[str, int]:
        return self._sock.getsockname()[:2]  # type: ignore[no-any-return]  # (host, port) of an IP socket

    async def start(self) -> None:
        self._accepting = asyncio.get_running_loop().create_task(self._accept_loop())

    async def _accept_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                conn, _ = await loop.sock_accept(self._sock)
            except OSError as exc:  # e.g. EMFILE: back off instead of spinning
                log.warning("accept failed: %s", exc)
                await asyncio.sleep(0.1)
                continue
            if self.max_connections is not None and \
                    self._held + self._open_connections() >= self.max_connections:
                _turn_away(conn)
                continue
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._held += 1
            task = loop.create_task(self._route(conn))
            self._routing.add(task)
            task.add_done_callback(self._routing.discard)

    async def _route(self, conn: socket.socket) -> None:
        handed_over = False

        def http_protocol() -> asyncio.Protocol:
            return self._http_factory(head)

        try:
            try:
                head = await _read_head(conn, _DECIDE, self.first_byte_timeout)
            except (TimeoutError, OSError):
                conn.close()
                return
            if not head:
                conn.close()
                return
            if head.startswith(H2_PREFACE[:_DECIDE]):
                await self._to_grpc(conn, head)
                return
            try:
                await asyncio.get_running_loop().connect_accepted_socket(http_protocol, conn)
                # the HTTP server counts it from now on (open_connections): its connection_made has run when the
                # await returns, not when the protocol is made, and a connection counted by neither side let one
                # more in beyond max_connections
                handed_over = True
                self._held -= 1
            except OSError:
                conn.close()
        finally:
            if not handed_over:
                self._held -= 1

    async def _to_grpc(self, conn: socket.socket, head: bytes) -> None:
        if self.grpc_target is None:
            log.debug("HTTP/2 connection refused: no gRPC server on this appliance yet")
            await _goaway(conn)
            return
        try:
            backend_r, backend_w = await asyncio.open_unix_connection(self.grpc_target)
        except OSError as exc:
            log.warning("gRPC backend %s unreachable: %s", self.grpc_target, exc)
            conn.close()
            return
        client_r, client_w = await asyncio.open_connection(sock=conn)
        backend_w.write(head)
        try:
            await asyncio.gather(_pump(client_r, backend_w), _pump(backend_r, client_w))
        finally:  # also on cancellation at shutdown
            backend_w.close()
            client_w.close()

    def close(self) -> None:
        """Stop accepting (uvicorn calls this on shutdown); connections already handed over live on."""
        if self._accepting:
            self._accepting.cancel()
        for task in self._routing:
            task.cancel()
        self._sock.close()

    async def wait_closed(self) -> None:
        if self._accepting:
            with contextlib.suppress(asyncio.CancelledError):
                await self._accepting


async def _read_head(conn: socket.socket, want: int, timeout: float) -> bytes:
    """The first ``want`` bytes, fewer at EOF or as soon as they cannot be the start of the HTTP/2 preface."""
    loop = asyncio.get_running_loop()
    head = b""
    async with asyncio.timeout(timeout):
        while len(head) < want and H2_PREFACE.startswith(head):
            chunk = await loop.sock_recv(conn, want - len(head))
            if not chunk:
                break
            head += chunk
    return head


def _turn_away(conn: socket.socket) -> None:
    """Answer 503 to a connection beyond the limit, without waiting for it, and close it."""
    with contextlib.suppress(OSError):
        conn.setblocking(False)
        conn.send(BUSY)
    conn.close()


async def _goaway(conn: socket.socket) -> None:
    """Tell an HTTP/2 client politely that there is no gRPC here, then close."""
    loop = asyncio.get_running_loop()
    try:
        with contextlib.suppress(BlockingIOError):
            conn.recv(65536)  # what the client sent: closing with unread input would reset the connection
        await loop.sock_sendall(conn, H2_GOAWAY)
        conn.shutdown(socket.SHUT_WR)
    except OSError:  # the client reset or went away: nothing more to say
        pass
    finally:
        conn.close()


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(ConnectionError, OSError):
            writer.close()
