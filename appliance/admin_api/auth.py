"""The bearer token of an appliance bound beyond loopback: what a usable token is, how a request presents it,
and the guard in front of every request but ``/api/_live``.

A token is at least ``MIN_TOKEN_LENGTH`` characters of RFC 6750's token alphabet. The request must carry
exactly ``Authorization: Bearer <token>``: one header, the scheme spelled so, one space, nothing after. Anything
looser (a trailing space, a doubled space, an empty token) would let a careless or empty token match.
"""

from __future__ import annotations

import hmac
import re
from typing import Any

from appliance.admin_api.ui import public_page
from appliance.config import Settings
from appliance.datadir import DataDir
from appliance.errors import ConfigError
from appliance.server.door import ASGIApp, Receive, Scope, Send
from appliance.server.problems import PROBLEM_CONTENT_TYPE, problem_bytes

OPEN_PATHS = frozenset({"/api/_live"})
MIN_TOKEN_LENGTH = 32  # a generated token (secrets.token_urlsafe(32)) has 43
_TOKEN = r"[A-Za-z0-9\-._~+/]+=*"  # RFC 6750 b64token
_TOKEN_RE = re.compile(_TOKEN)
_AUTHORIZATION_RE = re.compile(rb"Bearer (" + _TOKEN.encode() + rb")")

_UNAUTHORIZED = problem_bytes(401, "unauthorized", "send Authorization: Bearer <token>; the token is in the data "
                              "directory (file token) or the api_token setting")


def checked_token(token: str, source: str, fix: str) -> str:
    """``token`` when it is long enough and of the token alphabet, else a ConfigError naming ``source`` and
    ``fix``. The token itself never appears in the message."""
    if not token.strip():
        problem = "is empty"
    elif not _TOKEN_RE.fullmatch(token):
        problem = "has characters a bearer token cannot carry (use A-Z a-z 0-9 - . _ ~ + / and = padding)"
    elif len(token) < MIN_TOKEN_LENGTH:
        problem = f"is {len(token)} characters long; at least {MIN_TOKEN_LENGTH} are required"
    else:
        return token
    raise ConfigError(f"the bearer token in {source} {problem}; {fix}")


def configured_token(settings: Settings) -> str | None:
    """The api_token setting when it is set (a ConfigError when it is unusable), else None."""
    if settings.api_token is None:
        return None
    return checked_token(settings.api_token.get_secret_value(), "the api_token setting",
                         "set one of at least 32 characters (e.g. the output of `python3 -c \"import secrets; "
                         "print(secrets.token_urlsafe(32))\"`), or unset it to use the token file "
                         f"{DataDir(settings.data_dir).token_path}")


def presented_token(headers: list[tuple[bytes, bytes]]) -> bytes | None:
    """The token of the request's single, well-formed ``Authorization: Bearer <token>`` header, else None."""
    values = [value for name, value in headers if name == b"authorization"]
    if len(values) != 1:
        return None
    match = _AUTHORIZATION_RE.fullmatch(values[0])
    return match.group(1) if match else None


def token_guard(token: str) -> Any:
    expected = token.encode()

    def middleware(app: ASGIApp) -> ASGIApp:
        async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http" or scope["path"] in OPEN_PATHS or public_page(scope["method"], scope["path"]):
                await app(scope, receive, send)
                return
            given = presented_token(scope["headers"])
            if given is not None and hmac.compare_digest(given, expected):
                await app(scope, receive, send)
                return
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", PROBLEM_CONTENT_TYPE.encode()),
                                    (b"www-authenticate", b'Bearer realm="kumiho-ce"')]})
            await send({"type": "http.response.body", "body": _UNAUTHORIZED})

        return guarded

    return middleware
