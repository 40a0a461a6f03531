"""uvicorn's HTTP/1.1 protocol (httptools) with the limits it lacks: a cap on the size of a request's headers
and deadlines for receiving its headers and its body.

Without them a client holds a connection for ever by sending its headers one byte at a time (slowloris), or
makes the parser buffer a header of any size. Each refusal answers an RFC 9457 problem, with
``connection: close``, and closes the connection:

* headers (request line included) beyond ``max_header_bytes`` → 431, checked before the bytes are parsed;
* headers not complete ``header_timeout`` seconds after the request's first byte → 408;
* a body not complete ``body_timeout`` seconds after its headers → 408 (or a plain close once the answer
  has started).
"""

from __future__ import annotations

import asyncio
import http
from dataclasses import dataclass
from typing import Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from appliance.config import HttpSettings
from appliance.server.problems import PROBLEM_CONTENT_TYPE, problem_bytes

_END_OF_HEADERS = b"\r\n\r\n"


@dataclass(frozen=True)
class ConnectionLimits:
    max_header_bytes: int
    header_timeout: float
    body_timeout: float

    @classmethod
    def from_settings(cls, settings: HttpSettings) -> ConnectionLimits:
        return cls(settings.max_header_bytes, settings.header_timeout_seconds, settings.body_timeout_seconds)


def error_response(status: int, code: str, message: str) -> bytes:
    """A complete HTTP/1.1 answer that closes the connection, with a problem body."""
    body = problem_bytes(status, code, message)
    return (f"HTTP/1.1 {status} {http.HTTPStatus(status).phrase}\r\ncontent-type: {PROBLEM_CONTENT_TYPE}\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body


class BoundedHttpProtocol(HttpToolsProtocol):
    limits = ConnectionLimits(32_768, 10.0, 60.0)  # replaced per appliance by bounded_protocol()

    def __init__(self, *args: Any, head: bytes = b"", **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head = head  # bytes the front already read from the socket to choose the protocol
        self._in_headers = True  # the next bytes belong to a request's line and headers
        self._header_bytes = 0  # of the current request, fed to the parser so far
        self._tail = b""  # the last bytes fed, so that an end of headers split across reads is found
        self._headers_ended = False
        self._deadline: asyncio.TimerHandle | None = None

    # asyncio passes the transport it made for this protocol: a stream (Transport), not any BaseTransport
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm(self.limits.header_timeout)
        if self._head:
            self.data_received(self._head)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._in_headers:
            if self._deadline is None:
                self._arm(self.limits.header_timeout)
            if self._header_bytes + len(data) > self.limits.max_header_bytes and not self._headers_fit(data):
                self._refuse(431, "headers_too_large", "the request line and headers are larger than "
                             f"{self.limits.max_header_bytes} bytes (the http.max_header_bytes setting)")
                return
        in_headers = self._in_headers  # the last piece of a body ends its message and sets _in_headers again:
        self._headers_ended = False  # those bytes belong to the body, not to the next request's headers
        super().data_received(data)
        if in_headers and self._in_headers and not self._headers_ended:
            self._header_bytes += len(data)
            self._tail = (self._tail + data)[-(len(_END_OF_HEADERS) - 1):]

    def _headers_fit(self, data: bytes) -> bool:
        """Whether the headers end within ``data`` before the size limit."""
        window = self._tail + data
        end = window.find(_END_OF_HEADERS)
        return end >= 0 and self._header_bytes - len(self._tail) + end + len(_END_OF_HEADERS) <= \
            self.limits.max_header_bytes

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._headers_ended = True
        self._header_bytes = 0
        self._tail = b""
        self._arm(self.limits.body_timeout)
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_headers = True
        self._disarm()

    def _arm(self, seconds: float) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expired)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        if self._in_headers:
            self._refuse(408, "request_timeout", "the request headers did not arrive within "
                         f"{self.limits.header_timeout:g} s (the http.header_timeout_seconds setting)")
        elif self.cycle is not None and not self.cycle.response_started:
            self._refuse(408, "request_timeout", "the request body did not arrive within "
                         f"{self.limits.body_timeout:g} s (the http.body_timeout_seconds setting)")
        else:
            self.transport.close()

    def _refuse(self, status: int, code: str, message: str) -> None:
        self._disarm()
        if self.cycle is not None:
            self.cycle.keep_alive = False
        self.transport.write(error_response(status, code, message))
        self.transport.close()


def bounded_protocol(limits: ConnectionLimits) -> type[BoundedHttpProtocol]:
    """The protocol class for uvicorn's config, with this appliance's limits."""
    return type("BoundedHttpProtocol", (BoundedHttpProtocol,), {"limits": limits})
