"""One port, two protocols: HTTP/1.1 goes to the ASGI server, the HTTP/2 preface to the gRPC backend."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

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
