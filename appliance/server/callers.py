"""Who is calling, for every HTTP request: a Litestar middleware (it runs once the route is known) that sets
``appliance.core.caller`` around the handler, so the audit trail and the read-only guard know the door.

The door comes from the route: a route handler (or its controller) may declare it with ``opt={"door": …}``
(Kumiho's REST subset, ``/mcp``); otherwise ``/api/v1/memories…`` is the Memory API and anything else the
console. The client is the ``X-Kumiho-Client`` header, else the ``User-Agent``: printable ASCII, at most
``MAX_CLIENT`` characters, with anything that looks like a credential replaced.
"""

from __future__ import annotations

from typing import cast

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Receive, Scope, Send

from appliance.core import redaction
from appliance.core.caller import MAX_CLIENT, Caller, Door, calling

CLIENT_HEADER = b"x-kumiho-client"
MEMORY_API = "/api/v1/memories"


def door_of(scope: Scope) -> Door:
    handler = scope.get("route_handler")
    declared = getattr(handler, "opt", {}).get("door") if handler is not None else None
    if declared:
        return cast(Door, declared)
    path = str(scope.get("path", ""))
    if path == MEMORY_API or path.startswith(MEMORY_API + "/"):
        return "memory_api"
    return "console"


def client_of(scope: Scope) -> str:
    headers = dict(cast("list[tuple[bytes, bytes]]", scope.get("headers") or []))
    raw = headers.get(CLIENT_HEADER) or headers.get(b"user-agent") or b""
    text = "".join(ch for ch in raw[: MAX_CLIENT * 2].decode("latin-1") if " " <= ch <= "~")[:MAX_CLIENT]
    return redaction.redact_secrets(text)[0] if text else ""


def operation_of(scope: Scope) -> str:
    """The route, not the path: ``POST /api/v1/items/deprecate`` (a path can carry a key or a kref)."""
    template = str(scope.get("path_template") or scope.get("path", ""))
    return f"{scope.get('method', '')} {template}".strip()


def caller_middleware(app: ASGIApp) -> ASGIApp:
    async def who_calls(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await app(scope, receive, send)
            return
        with calling(Caller(door_of(scope), client_of(scope), operation_of(scope))):
            await app(scope, receive, send)

    return cast(ASGIApp, who_calls)

