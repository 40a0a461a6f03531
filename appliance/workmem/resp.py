"""The Redis serialization protocol, as much of it as the listener needs: reading a client's commands (RESP
arrays of bulk strings, bounded) and writing replies in RESP2 or, after ``HELLO 3``, RESP3.

Replies are plain values: ``int``, ``str``/``bytes`` (a bulk string), ``None`` (nil), ``list``, ``dict`` (a
map: RESP3 ``%``, RESP2 a flat array), ``Status`` (``+OK``) and ``Error`` (``-ERR …``).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

MAX_ARGUMENTS = 1024  # arguments of one command (the sidecar's largest, HSET of a session's metadata, has ~9)
MAX_ARGUMENT_BYTES = 1024 * 1024  # one argument: a 64 KiB message is at most ~800 KB as escaped JSON
MAX_COMMAND_BYTES = 2 * 1024 * 1024  # all arguments of one command together
MAX_HEADER_BYTES = 32  # "*<count>" or "$<length>" and CRLF


class ProtocolError(Exception):
    """Input that is not a bounded RESP command: answered with an error, then the connection is closed."""


@dataclass(frozen=True, slots=True)
class Status:
    text: str


@dataclass(frozen=True, slots=True)
class Error:
    text: str  # starts with the error code: "ERR …", "WRONGTYPE …", "NOAUTH …"


OK = Status("OK")
Reply = int | str | bytes | None | list["Reply"] | dict[str, "Reply"] | Status | Error


async def _header(reader: asyncio.StreamReader, marker: bytes, what: str) -> int:
    line = await reader.readuntil(b"\r\n")
    line = b"*" + line if marker == b"*" else line  # the command's '*' was read by read_command
    if len(line) > MAX_HEADER_BYTES or line[:1] != marker:
        raise ProtocolError(f"Protocol error: expected '{marker.decode()}' ({what}); send commands as RESP "
                            "arrays of bulk strings")
    try:
        return int(line[1:-2])
    except ValueError:
        raise ProtocolError(f"Protocol error: invalid {what}") from None


async def read_command(reader: asyncio.StreamReader, within: float | None = None) -> list[bytes]:
    """One command's arguments; once its first byte is in, the rest must follow ``within`` seconds (an idle
    connection may wait forever, a half-sent command may not hold it). Raises ProtocolError on malformed,
    oversized or stalled input, and ``asyncio.IncompleteReadError`` when the client closes (mid-command too)."""
    first = await reader.readexactly(1)  # IncompleteReadError with nothing read: the client left
    if first != b"*":
        raise ProtocolError("Protocol error: expected '*'; send commands as RESP arrays of bulk strings (inline "
                            "commands are not served)")
    try:
        async with asyncio.timeout(within):
            return await _rest_of_command(reader)
    except TimeoutError:
        raise ProtocolError(f"Protocol error: a command must arrive whole within {within:g} s") from None


async def _rest_of_command(reader: asyncio.StreamReader) -> list[bytes]:
    try:
        count = await _header(reader, b"*", "multibulk length")
        if count < 1 or count > MAX_ARGUMENTS:
            raise ProtocolError(f"Protocol error: a command has 1 to {MAX_ARGUMENTS} arguments (got {count})")
        arguments: list[bytes] = []
        total = 0
        for _ in range(count):
            size = await _header(reader, b"$", "bulk length")
            if size < 0 or size > MAX_ARGUMENT_BYTES:
                raise ProtocolError(f"Protocol error: an argument is 0 to {MAX_ARGUMENT_BYTES} bytes (got {size})")
            total += size
            if total > MAX_COMMAND_BYTES:
                raise ProtocolError(f"Protocol error: a command is at most {MAX_COMMAND_BYTES} bytes")
            data = await reader.readexactly(size + 2)
            if data[-2:] != b"\r\n":
                raise ProtocolError("Protocol error: a bulk string must end with CRLF")
            arguments.append(data[:-2])
        return arguments
    except asyncio.LimitOverrunError:
        raise ProtocolError("Protocol error: header line too long") from None


def encode(reply: Reply, protocol: int) -> bytes:
    parts: list[bytes] = []
    _encode(reply, protocol, parts)
    return b"".join(parts)


def _encode(reply: Reply, protocol: int, out: list[bytes]) -> None:
    if isinstance(reply, Status):
        out.append(b"+" + _line(reply.text) + b"\r\n")
    elif isinstance(reply, Error):
        out.append(b"-" + _line(reply.text) + b"\r\n")
    elif isinstance(reply, bool):
        raise TypeError("reply: use an int, not a bool")
    elif isinstance(reply, int):
        out.append(b":%d\r\n" % reply)
    elif isinstance(reply, (str, bytes)):
        data = reply.encode("utf-8", "surrogatepass") if isinstance(reply, str) else reply
        out.append(b"$%d\r\n" % len(data) + data + b"\r\n")
    elif reply is None:
        out.append(b"_\r\n" if protocol == 3 else b"$-1\r\n")
    elif isinstance(reply, list):
        out.append(b"*%d\r\n" % len(reply))
        for item in reply:
            _encode(item, protocol, out)
    elif isinstance(reply, dict):
        out.append((b"%%%d\r\n" if protocol == 3 else b"*%d\r\n") % (len(reply) if protocol == 3 else 2 * len(reply)))
        for key, value in reply.items():
            _encode(key, protocol, out)
            _encode(value, protocol, out)
    else:
        raise TypeError(f"reply: cannot encode {type(reply).__name__}")


def _line(text: str) -> bytes:
    """A simple string or error: one line, whatever the text held."""
    return text.replace("\r", " ").replace("\n", " ").encode("utf-8", "replace")
