"""The front door: one ASGI middleware in front of every HTTP route (admin API, ``/mcp``, the schema).

It keeps web pages out of the memory. A browser lets any page send requests to ``127.0.0.1``, and a page
whose name is re-pointed at this machine (DNS rebinding) sends them with its own name in ``Host``. So:

* ``Host`` must be a name of this appliance: a loopback name (``localhost``, ``127.x.x.x``, ``[::1]``), beyond
  loopback also any IP address (a page cannot re-point an address) and the bound name, plus the names of the
  ``http.allowed_hosts`` setting. Otherwise 421, before any handler runs.
* ``Origin``, which browsers send on cross-origin requests and every POST, must be the appliance's own origin
  (same host and port as ``Host``), a loopback page when bound to loopback, or one of ``http.cors_origins``.
  Otherwise 403. No ``Origin`` at all is a non-browser client (curl, SDKs, agent hosts) and is let in.
* A request that may change something (any method but GET, HEAD and OPTIONS) from a browser must come from the
  appliance's own pages or a ``http.cors_origins`` page: ``Sec-Fetch-Site: cross-site`` is refused, and
  ``same-site`` unless ``Origin`` is the appliance's own (403). Its body must not be of a type an HTML form or a
  "simple" cross-site request can send without asking first (``application/x-www-form-urlencoded``,
  ``multipart/form-data``, ``text/plain``, or none at all): 415. So a page that cannot call the appliance
  cannot make a browser forge such a request either, even in a browser that sends no ``Origin``.
* CORS headers are sent only to the origins of ``http.cors_origins`` (none by default), so other pages cannot
  read an answer even when they may send the request.
* A request body larger than ``http.max_body_bytes`` is refused with 413 before any handler sees it (``/mcp``
  is an ASGI mount, which Litestar's own body limit does not cover): ``bounded_body``, placed inside the
  token check so that only a client with the token can make the appliance buffer a body.

Every refusal is an RFC 9457 problem response (``appliance.server.problems``).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from appliance.config import Settings
from appliance.server.problems import PROBLEM_CONTENT_TYPE, problem_bytes

Scope = dict[str, Any]
Message = dict[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

_WILDCARDS = frozenset({"0.0.0.0", "::", ""})
_CORS_METHODS = b"GET, POST, DELETE, OPTIONS"
_CORS_HEADERS = (b"authorization, content-type, accept, mcp-protocol-version, mcp-session-id, last-event-id, "
                 b"x-kumiho-project, x-kumiho-retrieval-limit, x-kumiho-session, x-kumiho-token, x-request-id")
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# the body types a <form> or a cross-site fetch() may send without a CORS preflight (the Fetch standard's
# CORS-safelisted Content-Type values); a body without a type is sent without one too
FORM_TYPES = frozenset({"application/x-www-form-urlencoded", "multipart/form-data", "text/plain"})


@dataclass(frozen=True)
class Refusal:
    status: int
    code: str
    message: str


@dataclass(frozen=True)
class DoorPolicy:
    loopback: bool  # bound to a loopback address
    names: frozenset[str]  # extra accepted Host names: the bound name and http.allowed_hosts
    cors_origins: frozenset[str]
    max_body_bytes: int

    @classmethod
    def from_settings(cls, settings: Settings) -> DoorPolicy:
        http = settings.http
        names = {_normal_name(name) for name in http.allowed_hosts}
        if settings.host not in _WILDCARDS:
            names.add(_normal_name(settings.host))
        return cls(settings.is_loopback, frozenset(names),
                   frozenset(origin.lower().rstrip("/") for origin in http.cors_origins), http.max_body_bytes)

    def host_allowed(self, name: str) -> bool:
        if name in self.names or _is_loopback_name(name):
            return True
        return not self.loopback and _is_address(name)


def check_request(policy: DoorPolicy, headers: list[tuple[bytes, bytes]], method: str = "GET") -> Refusal | None:
    """Why the request may not pass the door (Host, then Origin, then for a method that may change something
    where it comes from and what its body is), or None when it may."""
    hosts = [value for name, value in headers if name == b"host"]
    origins = [value for name, value in headers if name == b"origin"]
    if len(hosts) > 1 or len(origins) > 1:
        return Refusal(400, "bad_request", "send one Host header and at most one Origin header")
    host = hosts[0].decode("latin-1").strip().lower() if hosts else None
    if host is not None and not policy.host_allowed(_host_name(host)):
        return Refusal(421, "forbidden_host", f"Host {_shown(host)} is not a name of this appliance; use its "
                       "address (e.g. 127.0.0.1) or add the name to the http.allowed_hosts setting")
    origin = origins[0].decode("latin-1").strip() if origins else None
    if origin is not None and not origin_allowed(policy, origin, host):
        return Refusal(403, "forbidden_origin", f"requests from the web page {_shown(origin)} are refused; a page "
                       "may call the appliance only when its origin is listed in the http.cors_origins setting")
    if method in SAFE_METHODS:
        return None
    return _cross_site(policy, headers, origin, host) or _form_body(headers, method)


def _cross_site(policy: DoorPolicy, headers: list[tuple[bytes, bytes]], origin: str | None,
                host: str | None) -> Refusal | None:
    """A browser's word (``Sec-Fetch-Site``) that another site's page sent this request that may change
    something. A page of ``http.cors_origins`` may; the appliance's own pages are ``same-origin``."""
    sites = [value.decode("latin-1").strip().lower() for name, value in headers if name == b"sec-fetch-site"]
    if len(sites) > 1:
        return Refusal(400, "bad_request", "send at most one Sec-Fetch-Site header")
    site = sites[0] if sites else None
    if site not in ("cross-site", "same-site") or _normal_origin(origin or "") in policy.cors_origins:
        return None
    if site == "same-site" and origin is not None and host is not None and _is_own_origin(origin, host):
        return None
    return Refusal(403, "forbidden_origin", f"a {site} request from a web page may not change anything here; "
                   "only the appliance's own pages and the origins of the http.cors_origins setting may")


def _form_body(headers: list[tuple[bytes, bytes]], method: str) -> Refusal | None:
    """A body of a type a web page may send anywhere without asking (a form's, plain text, or none)."""
    types = [value for name, value in headers if name == b"content-type"]
    if len(types) > 1:
        return Refusal(400, "bad_request", "send at most one Content-Type header")
    media_type = types[0].decode("latin-1").split(";", 1)[0].strip().lower() if types else None
    if media_type in FORM_TYPES or (media_type is None and _has_body(headers)):
        shown = f"a {media_type} body" if media_type else "a body without a Content-Type"
        return Refusal(415, "unsupported_media_type", f"{method} with {shown} is refused (a web page could send "
                       "it from anywhere); send JSON with Content-Type: application/json")
    return None


def origin_allowed(policy: DoorPolicy, origin: str, host: str | None) -> bool:
    normal = _normal_origin(origin)
    if normal in policy.cors_origins:
        return True
    try:
        parts = urlsplit(normal)
        origin_host = parts.hostname
    except ValueError:
        return False
    if parts.scheme not in ("http", "https") or not origin_host or parts.path or parts.query:
        return False
    if host is not None and parts.netloc == host:
        return True  # the appliance's own pages
    return policy.loopback and _is_loopback_name(origin_host)


def _is_own_origin(origin: str, host: str) -> bool:
    """Whether ``origin`` is a page of this appliance as the client names it (same host and port)."""
    try:
        parts = urlsplit(_normal_origin(origin))
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and parts.netloc == host and not parts.path and not parts.query


def _normal_origin(origin: str) -> str:
    return origin.lower().rstrip("/")


def front_door(policy: DoorPolicy) -> Callable[[ASGIApp], ASGIApp]:
    def middleware(app: ASGIApp) -> ASGIApp:
        async def door(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http":
                await app(scope, receive, send)
                return
            headers: list[tuple[bytes, bytes]] = scope["headers"]
            refusal = check_request(policy, headers, scope["method"])
            if refusal:
                await _refuse(send, refusal, scope["path"])
                return
            origin = _header(headers, b"origin")
            cors = origin is not None and origin.lower().rstrip(b"/").decode("latin-1") in policy.cors_origins
            if cors and scope["method"] == "OPTIONS" and _header(headers, b"access-control-request-method"):
                await _preflight(send, origin)  # type: ignore[arg-type]  # cors: origin is not None
                return
            if cors:
                send = _with_cors(send, origin)  # type: ignore[arg-type]  # cors: origin is not None
            await app(scope, receive, send)

        return door

    return middleware


def bounded_body(limit: int) -> Callable[[ASGIApp], ASGIApp]:
    """Read a request's whole body before any route runs, refusing it (413) as soon as it passes ``limit``.
    It sits inside the token check, so that a client without the token cannot make the appliance buffer."""
    def middleware(app: ASGIApp) -> ASGIApp:
        async def bounded(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http" and _has_body(scope["headers"]):
                try:
                    body = await _read_body(receive, limit)
                except _ClientGone:
                    return  # it left, or was closed for sending too slowly: no one to answer, nothing to run
                if body is None:
                    await _refuse(send, Refusal(
                        413, "payload_too_large", f"the request body is larger than {limit} bytes (the "
                        "http.max_body_bytes setting); send less per request"), scope["path"])
                    return
                receive = _replay(body, receive)
            await app(scope, receive, send)

        return bounded

    return middleware


class _ClientGone(Exception):
    """The client disconnected before its body was complete."""


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole body, or None as soon as it passes ``limit`` (the rest is never buffered)."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            raise _ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    delivered = False

    async def replayed() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


def _has_body(headers: list[tuple[bytes, bytes]]) -> bool:
    length = _header(headers, b"content-length")
    return _header(headers, b"transfer-encoding") is not None or (length is not None and length.strip() != b"0")


def _with_cors(send: Send, origin: bytes) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *_cors_headers(origin),
                                              (b"access-control-expose-headers", b"mcp-session-id, x-request-id")]}
        await send(message)

    return sending


def _cors_headers(origin: bytes) -> list[tuple[bytes, bytes]]:
    return [(b"access-control-allow-origin", origin), (b"vary", b"Origin")]


async def _preflight(send: Send, origin: bytes) -> None:
    await send({"type": "http.response.start", "status": 204, "headers": [
        *_cors_headers(origin), (b"access-control-allow-methods", _CORS_METHODS),
        (b"access-control-allow-headers", _CORS_HEADERS), (b"access-control-max-age", b"600")]})
    await send({"type": "http.response.body", "body": b""})


async def _refuse(send: Send, refusal: Refusal, path: str | None = None) -> None:
    body = problem_bytes(refusal.status, refusal.code, refusal.message, instance=path)
    await send({"type": "http.response.start", "status": refusal.status,
                "headers": [(b"content-type", PROBLEM_CONTENT_TYPE.encode()),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


def _header(headers: list[tuple[bytes, bytes]], wanted: bytes) -> bytes | None:
    return next((value for name, value in headers if name == wanted), None)


def _host_name(host: str) -> str:
    """The name part of a Host value (``[::1]:9190`` → ``::1``, ``localhost:9190`` → ``localhost``)."""
    if host.startswith("["):
        return host[1:host.find("]")] if "]" in host else host
    name = host.rpartition(":")[0] if host.count(":") == 1 else host
    return _normal_name(name or host)


def _normal_name(name: str) -> str:
    return name.strip().lower().removeprefix("[").removesuffix("]").rstrip(".")


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _is_loopback_name(name: str) -> bool:
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _shown(value: str) -> str:
    """A client-sent value, quoted and cut short, for an error message."""
    return json.dumps(value[:100])
