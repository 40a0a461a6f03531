"""Bearer-token guard for an appliance bound beyond loopback: every request but ``/api/_live``."""

from __future__ import annotations

import hmac
from typing import Any

from litestar.types import ASGIApp, Receive, Scope, Send

OPEN_PATHS = frozenset({"/api/_live"})


def token_guard(token: str) -> Any:
    expected = f"Bearer {token}".encode()

    def middleware(app: ASGIApp) -> ASGIApp:
        async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http" or scope["path"] in OPEN_PATHS:
                await app(scope, receive, send)
                return
            given = dict(scope["headers"]).get(b"authorization", b"")
            if hmac.compare_digest(given, expected):
                await app(scope, receive, send)
                return
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", b"application/json"),
                                    (b"www-authenticate", b'Bearer realm="kumiho-ce"')]})
            await send({"type": "http.response.body", "body": (
                b'{"error":{"code":"unauthorized","message":"send Authorization: Bearer <token>; the token '
                b'is in the data directory (file token) or the api_token setting"}}')})

        return guarded

    return middleware
