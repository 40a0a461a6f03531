"""The bearer token of an appliance bound beyond loopback (or with ``require_token`` on loopback too): what a
usable token is, how a request presents it, and the guard in front of every request but ``/api/_live``.

A token is at least ``MIN_TOKEN_LENGTH`` characters of RFC 6750's token alphabet. The request carries it as
exactly ``Authorization: Bearer <token>`` (one header, the scheme spelled so, one space, nothing after) or as
exactly ``X-Kumiho-Token: <token>`` (one header, the token and nothing else), the header Kumiho's clients (Revka)
send. Anything looser (a trailing space, a doubled space, an empty token) would let a careless or empty token
match. An empty ``X-Kumiho-Token`` is no credential at all: it is what a client of a tokenless local CE sends.
When both headers carry a token, both must be the appliance's.
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
_KUMIHO_TOKEN_RE = re.compile(_TOKEN.encode())

_UNAUTHORIZED = ("send Authorization: Bearer <token> (or X-Kumiho-Token: <token>); the token is in the data "
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


def presented_tokens(headers: list[tuple[bytes, bytes]]) -> list[bytes] | None:
    """The tokens the request presents: that of its ``Authorization: Bearer <token>`` header and that of its
    non-empty ``X-Kumiho-Token`` header; None when either header is sent twice or is not well-formed."""
    # whitespace around a field value is not part of it (RFC 9110 §5.5); uvicorn strips the trailing part from
    # 0.55 on, and doing it here keeps the answer the same whichever version serves
    bearer = [value.rstrip(b" \t") for name, value in headers if name == b"authorization"]
    kumiho = [value.rstrip(b" \t") for name, value in headers if name == b"x-kumiho-token"]
    if len(bearer) > 1 or len(kumiho) > 1:
        return None
    tokens = []
    if bearer:
        match = _AUTHORIZATION_RE.fullmatch(bearer[0])
        if not match:
            return None
        tokens.append(match.group(1))
    if kumiho and kumiho[0]:
        if not _KUMIHO_TOKEN_RE.fullmatch(kumiho[0]):
            return None
        tokens.append(kumiho[0])
    return tokens


def token_guard(token: str) -> Any:
    expected = token.encode()

    def middleware(app: ASGIApp) -> ASGIApp:
        async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != "http" or scope["path"] in OPEN_PATHS or public_page(scope["method"], scope["path"]):
                await app(scope, receive, send)
                return
            given = presented_tokens(scope["headers"])
            if given and all([hmac.compare_digest(token, expected) for token in given]):  # a list: compare each
                await app(scope, receive, send)
                return
            body = problem_bytes(401, "unauthorized", _UNAUTHORIZED, instance=scope["path"])
            await send({"type": "http.response.start", "status": 401,
                        "headers": [(b"content-type", PROBLEM_CONTENT_TYPE.encode()),
                                    (b"content-length", str(len(body)).encode()),
                                    (b"www-authenticate", b'Bearer realm="kumiho-ce"')]})
            await send({"type": "http.response.body", "body": body})

        return guarded

    return middleware
