"""One port, two protocols: HTTP/1.1 goes to the ASGI server, the HTTP/2 preface to the gRPC backend."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import ClassVar

from appliance.server.front import H2_GOAWAY, H2_PREFACE, FrontListener, bind


class HttpStub(asyncio.Protocol):
    """Stands in for uvicorn's protocol: answers each request (up to its blank line) with the bytes it
    received, the ones the front read to decide included."""

    def __init__(self, head: bytes) -> None:
        self.received = head

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport
        self.data_received(b"")

    def data_received(self, data: bytes) -> None:
        self.received += data
        if b"\r\n\r\n" in self.received:
            body, self.received = b"http:" + self.received, b""
            self.transport.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))  # type: ignore[attr-defined]


async def _echo_backend(path: Path) -> asyncio.Server:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(b"grpc:" + data)
                await writer.drain()
        finally:
            writer.close()

    return await asyncio.start_unix_server(handle, path=str(path))


def _with_front(grpc_target: Path | None, scenario: Callable[[int], Awaitable[None]]) -> None:
    async def main() -> None:
        backend = await _echo_backend(grpc_target) if grpc_target else None
        front = FrontListener(bind("127.0.0.1", 0), HttpStub, str(grpc_target) if grpc_target else None)
        await front.start()
        try:
            await asyncio.wait_for(scenario(front.address[1]), timeout=10)
        finally:
            front.close()
            await front.wait_closed()
            if backend:
                backend.close()

    asyncio.run(main())


async def _exchange(port: int, *chunks: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for chunk in chunks:
        writer.write(chunk)
        await writer.drain()
        await asyncio.sleep(0.02)  # deliver the chunks as separate segments
    data = await reader.read(65536)
    writer.close()
    return data


def test_http_requests_reach_the_http_protocol_untouched(tmp_path: Path) -> None:
    async def scenario(port: int) -> None:
        reply = await _exchange(port, b"GET /api/_live HTTP/1.1\r\nHost: x\r\n\r\n")
        assert reply.startswith(b"HTTP/1.1 200") and reply.endswith(b"http:GET /api/_live HTTP/1.1\r\nHost: x\r\n\r\n")

    _with_front(tmp_path / "grpc.sock", scenario)


def test_the_http2_preface_goes_to_the_grpc_backend(tmp_path: Path) -> None:
    async def scenario(port: int) -> None:
        reply = await _exchange(port, H2_PREFACE + b"frames")
        assert reply == b"grpc:" + H2_PREFACE + b"frames"

    _with_front(tmp_path / "grpc.sock", scenario)


def test_a_preface_split_across_segments_is_still_recognised(tmp_path: Path) -> None:
    async def scenario(port: int) -> None:
        reply = await _exchange(port, b"PR", b"I * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        assert reply.startswith(b"grpc:PR")
        http = await _exchange(port, b"P", b"OST / HTTP/1.1\r\n\r\n")
        assert http.startswith(b"HTTP/1.1 200")

    _with_front(tmp_path / "grpc.sock", scenario)


def test_without_a_grpc_backend_http2_clients_get_a_goaway_that_says_why(tmp_path: Path) -> None:
    async def scenario(port: int) -> None:
        reply = await _exchange(port, H2_PREFACE)
        assert reply == H2_GOAWAY and b"gRPC is not enabled" in reply
        assert reply[3] == 0x04 and reply[9 + 3] == 0x07  # a SETTINGS frame, then a GOAWAY frame
        assert (await _exchange(port, b"GET / HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 200")

    _with_front(None, scenario)


def test_a_client_that_connects_and_leaves_does_no_harm(tmp_path: Path) -> None:
    async def scenario(port: int) -> None:
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.close()
        assert (await _exchange(port, b"GET / HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 200")

    _with_front(tmp_path / "grpc.sock", scenario)


class CountedStub(HttpStub):
    """An HTTP stub that, as uvicorn's server state does, counts its open connections."""

    open: ClassVar[set[CountedStub]] = set()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.open.add(self)
        super().connection_made(transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.open.discard(self)


def test_a_burst_of_connections_up_to_the_limit_is_admitted_whole(tmp_path: Path) -> None:
    """A connection being handed to the HTTP protocol was counted twice (routing, and already open), so a burst
    of connections well under ``max_connections`` had some turned away with 503."""
    limit = 100

    def burst(port: int) -> list[socket.socket]:  # another thread, as another process would
        conns = []
        for _ in range(limit):
            conn = socket.create_connection(("127.0.0.1", port), timeout=10)
            conn.sendall(b"GET /api/_live HTTP/1.1\r\n")  # headers never finished: the connection stays
            conns.append(conn)
        return conns

    async def main() -> None:
        CountedStub.open = set()
        front = FrontListener(bind("127.0.0.1", 0), CountedStub, max_connections=limit,
                              open_connections=lambda: len(CountedStub.open))
        await front.start()
        port = front.address[1]
        conns = await asyncio.to_thread(burst, port)
        try:
            for _ in range(500):  # until the front has handed every one over
                if len(CountedStub.open) == limit:
                    break
                await asyncio.sleep(0.01)
            answered = []
            for conn in conns:
                conn.setblocking(False)
                with contextlib.suppress(BlockingIOError):
                    answered.append(conn.recv(65536))
            assert answered == [] and len(CountedStub.open) == limit, answered[:1]
            reply = await asyncio.wait_for(_exchange(port, b"GET / HTTP/1.1\r\n\r\n"), timeout=10)
            assert reply.startswith(b"HTTP/1.1 503")  # one more is over the limit
        finally:
            for conn in conns:
                conn.close()
            front.close()
            await front.wait_closed()

    asyncio.run(main())
