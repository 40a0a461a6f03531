"""The appliance's log: one handler on stderr, plain text on a terminal, JSON lines for a log collector, and the
id of the request being handled in every line logged while handling it.

* **Format** (the ``log_format`` setting, ``KUMIHO_CE_LOG_FORMAT``): ``text``, ``json``, or ``auto``, which
  chooses JSON when stderr is the systemd journal (``$JOURNAL_STREAM`` names stderr's device and inode), text on
  a terminal, JSON in a container (``/.dockerenv``, ``/run/.containerenv`` or ``$container``), and text otherwise.
  uvicorn's and Litestar's loggers propagate to the same handler (uvicorn runs with ``log_config=None``).
* **Request id**: ``request_ids`` (an ASGI middleware, outermost) takes the client's ``X-Request-Id`` when it is
  a short token of safe characters (``REQUEST_ID_PATTERN``) that holds no credential, else makes one, sets it in
  a context variable for the request's handling (the threads and graph writes it starts inherit the context)
  and returns it in the ``X-Request-Id`` response header. gRPC calls do the same with their ``x-request-id``
  metadata (appliance/grpc_api/server.py).
* **No credential in the log**: ``NoCredentials`` replaces what looks like one in every message.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import logging
import os
import re
import sys
import urllib.parse
import uuid
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Literal

from appliance.core import redaction
from appliance.server.door import ASGIApp, Message, Receive, Scope, Send

LogFormat = Literal["auto", "text", "json"]
REQUEST_ID_HEADER = b"x-request-id"
# a client's own id is kept when it is 1 to 64 of these characters (a UUID, a trace id, a ULID…)
REQUEST_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,63}")
CONTAINER_MARKS = (Path("/.dockerenv"), Path("/run/.containerenv"))
TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s%(request_tag)s: %(message)s"

_request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("kumiho_request_id", default=None)


def checked_request_id(given: Sequence[str]) -> str:
    """The client's request id when it sent exactly one that passes ``REQUEST_ID_PATTERN`` and holds no credential
    (it goes into every log line), else a new random one (32 hexadecimal digits)."""
    if len(given) == 1 and REQUEST_ID_PATTERN.fullmatch(given[0]) and not redaction.redact_secrets(given[0])[1]:
        return given[0]
    return uuid.uuid4().hex


def request_id_from(headers: list[tuple[bytes, bytes]]) -> str:
    """``checked_request_id`` of an HTTP request's ``X-Request-Id`` headers."""
    return checked_request_id([value.decode("latin-1") for name, value in headers if name == REQUEST_ID_HEADER])


@contextlib.contextmanager
def handling(request_id: str) -> Iterator[str]:
    """Log the lines of the block (and of the threads it starts with its context) with ``request_id``."""
    token = _request_id.set(request_id)
    try:
        yield request_id
    finally:
        _request_id.reset(token)


def request_ids(app: ASGIApp) -> ASGIApp:
    """Give every HTTP request an id: in the log lines of its handling and in its ``X-Request-Id`` header."""
    async def with_request_id(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        request_id = request_id_from(scope["headers"])
        header = (b"x-request-id", request_id.encode("ascii"))

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*(h for h in message.get("headers", [])
                                                    if h[0].lower() != REQUEST_ID_HEADER), header]}
            await send(message)

        with handling(request_id):
            # a copy: Litestar rewrites the path of a mounted app's request (/mcp → /) in the scope it gets, and
            # uvicorn's access line reads the scope it made
            await app(dict(scope), receive, sending)

    return with_request_id


def chosen_format(setting: LogFormat, stream: IO[str] | None = None, environ: Mapping[str, str] | None = None,
                  container_marks: tuple[Path, ...] = CONTAINER_MARKS) -> Literal["text", "json"]:
    """What ``auto`` means here (see the module's note); ``text`` and ``json`` mean themselves."""
    if setting != "auto":
        return setting
    stream = sys.stderr if stream is None else stream
    environ = os.environ if environ is None else environ
    if _is_journal(stream, environ.get("JOURNAL_STREAM", "")):
        return "json"
    if _is_terminal(stream):
        return "text"
    if environ.get("container") or any(mark.exists() for mark in container_marks):
        return "json"
    return "text"


def _is_journal(stream: IO[str], journal_stream: str) -> bool:
    """systemd sets ``JOURNAL_STREAM=<device>:<inode>`` of the journal's socket; a child whose stderr was
    redirected elsewhere inherits the variable, so it counts only when stderr is that socket."""
    device, _, inode = journal_stream.partition(":")
    if not (device.isdigit() and inode.isdigit()):
        return False
    try:
        found = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return (found.st_dev, found.st_ino) == (int(device), int(inode))


def _is_terminal(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError, AttributeError):
        return False


class RequestIdFilter(logging.Filter):
    """Stamp each record with the id of the request it was logged for (``request_id``, None outside one)."""

    def filter(self, record: logging.LogRecord) -> bool:
        request_id = _request_id.get()
        record.__dict__.update(request_id=request_id, request_tag=f" [{request_id}]" if request_id else "")
        return True


class NoCredentials(logging.Filter):
    """No credential reaches the log: at debug level access lines show query strings (percent-encoded, so they
    are read decoded too), and libraries log what they received before a tool call is dispatched and redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed log call: the handler reports it as usual (handleError)
            return True
        for text in (message, urllib.parse.unquote_plus(message)):
            cleaned, kinds = redaction.redact_secrets(text)
            if kinds:
                record.msg, record.args = cleaned, ()
                message = cleaned
        if record.exc_info and not record.exc_text:  # a traceback quotes values too: formatted here, redacted
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text, _ = redaction.redact_secrets(record.exc_text)
            record.exc_info = None  # both formatters then print the redacted text
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object a line: ``ts`` (UTC, ISO 8601), ``level``, ``logger``, ``message``, ``request_id`` while
    a request is handled, ``exception`` with the traceback when one is logged."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace(
                "+00:00", "Z"),
            "level": record.levelname, "logger": record.name, "message": record.getMessage()}
        request_id = getattr(record, "request_id", None)
        if request_id:
            line["request_id"] = request_id
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False, default=str)


class _OurHandler(logging.StreamHandler[IO[str]]):
    """The handler ``configure`` installs (and replaces when called again)."""


def configure(level: str, log_format: LogFormat = "auto", stream: IO[str] | None = None) -> Literal["text", "json"]:
    """Log to stderr (stdout carries the MCP protocol in stdio mode) at ``level`` in the chosen format; returns
    the format chosen. Calling it again replaces the handler it installed (a forked test server configures
    anew); handlers others installed (pytest's) are left alone."""
    stream = sys.stderr if stream is None else stream
    chosen = chosen_format(log_format, stream)
    handler = _OurHandler(stream)
    handler.setFormatter(JsonFormatter() if chosen == "json" else logging.Formatter(TEXT_FORMAT))
    handler.addFilter(RequestIdFilter())
    handler.addFilter(NoCredentials())
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _OurHandler)]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    return chosen
