"""The running appliance's doors, checked by ``kumiho-ce doctor`` with a real request through each: HTTP
(``GET /api/_live``, the probe Kumiho's clients use), gRPC (``GetProjects``, what Kumiho's SDK, its stock
sidecar and Revka's Operator speak on the same port), the working-memory Redis listener (``PING``) and the
OpenAI-compatible ``/v1`` (``GET /v1/models``). Loopback or the configured host only; nothing is written."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request
from typing import Any

from appliance.config import Settings
from appliance.doctor_check import Check
from appliance.workmem.commands import NOAUTH_MARK

TIMEOUT = 5.0  # seconds per probe: a healthy appliance answers each in milliseconds
WHO_NEEDS_GRPC = "Kumiho's SDK, its stock kumiho-mcp sidecar and Revka's Operator"
TOKEN_FIX = "run kumiho-ce doctor as the user who owns the data directory (it reads the token file), or set api_token"
REDIS_PORT_FIX = ("set [kumiho] redis_port (KUMIHO_CE_KUMIHO__REDIS_PORT) to a free port and the sidecar's "
                  "KUMIHO_UPSTASH_REDIS_URL to match")


def check_doors(settings: Settings, host: str, port: int, token: str | None) -> list[Check]:
    live = _check_http(host, port)
    if live.status == "fail":
        return [live]  # nothing else will answer either
    return [live, _check_grpc(settings, host, port, token), _check_redis(settings, token),
            _check_openai(settings, host, port, token)]


def _url(host: str, port: int, path: str) -> str:
    return f"http://{'[' + host + ']' if ':' in host else host}:{port}{path}"


def _get(url: str, token: str | None) -> Any:
    request = urllib.request.Request(url, headers={"authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(request, timeout=TIMEOUT) as response:
        return json.load(response)


def _check_http(host: str, port: int) -> Check:
    url = _url(host, port, "/api/_live")
    try:
        body = _get(url, None)
    except (OSError, ValueError) as exc:
        return Check("http", "fail", f"{url} does not answer ({exc})", "wait if the appliance is still starting; "
                     "otherwise see its log (journalctl -u kumiho-ce)")
    if not isinstance(body, dict) or body.get("deployment_mode") != "self_hosted_ce":
        return Check("http", "fail", f"{url} answers, but not as a Kumiho local CE: another program holds the port",
                     "stop that program, or give kumiho-ce another port (port, KUMIHO_CE_PORT)")
    return Check("http", "ok", f"{url}: deployment_mode self_hosted_ce, version {body.get('version')}")


def _check_grpc(settings: Settings, host: str, port: int, token: str | None) -> Check:
    """One real ``kumiho.KumihoService/GetProjects`` call over plaintext HTTP/2 on the HTTP port."""
    if not settings.kumiho.grpc:
        return Check("grpc", "warn", f"off ([kumiho] grpc = false): {WHO_NEEDS_GRPC} cannot use this appliance",
                     "set [kumiho] grpc = true if they should")
    import grpc

    from appliance.grpc_api.descriptor import message

    request_type, response_type = message("GetProjectsRequest"), message("GetProjectsResponse")
    target = f"{'[' + host + ']' if ':' in host else host}:{port}"
    metadata = [("authorization", f"Bearer {token}")] if token else None
    # no proxy: the appliance is on this machine (or the configured host), never behind http_proxy
    with grpc.insecure_channel(target, options=[("grpc.enable_http_proxy", 0)]) as channel:
        get_projects = channel.unary_unary("/kumiho.KumihoService/GetProjects",
                                           request_serializer=request_type.SerializeToString,
                                           response_deserializer=response_type.FromString)
        try:
            answer: Any = get_projects(request_type(), timeout=TIMEOUT, metadata=metadata)
        except grpc.RpcError as exc:
            return _grpc_refusal(target, exc.code(), exc.details())
    return Check("grpc", "ok", f"kumiho.KumihoService answers on {target} (GetProjects: {len(answer.projects)} "
                 f"project{'' if len(answer.projects) == 1 else 's'})")


def _grpc_refusal(target: str, code: Any, details: str | None) -> Check:
    import grpc

    said = f"{code.name}: {details}" if details else code.name
    if code == grpc.StatusCode.UNAUTHENTICATED:
        return Check("grpc", "fail", f"{target} refused doctor's token ({said})", TOKEN_FIX)
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return Check("grpc", "warn", f"GetProjects on {target} got no answer within {TIMEOUT:.0f} s; the appliance "
                     "may be busy", "run kumiho-ce doctor again when it is less busy")
    return Check("grpc", "fail", f"{target} does not serve Kumiho's gRPC ({said}): {WHO_NEEDS_GRPC} cannot use it",
                 "if another program holds the port, stop it or move kumiho-ce (port); else upgrade kumiho-ce")


def _check_redis(settings: Settings, token: str | None) -> Check:
    """Who listens on the working-memory port, asked with ``HELLO`` and no credentials; then ``PING``, after
    ``AUTH`` with the appliance's token when the listener is the appliance's and asks for it. The token goes only
    to a listener known to be kumiho-ce's (its HELLO says ``server: kumiho-ce``, or its NOAUTH refusal carries
    kumiho-ce's text): when the port is taken, the appliance's own listener is off and another program has it."""
    port = settings.kumiho.redis_port
    if port == 0:
        return Check("redis", "ok", "off ([kumiho] redis_port = 0): the stock Kumiho sidecar then needs "
                     "KUMIHO_MEMORY_PROXY_URL (POST /api/memory/redis) for its working memory")
    where = f"127.0.0.1:{port}"
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=TIMEOUT) as conn:
            replies = conn.makefile("rb")
            conn.sendall(_resp("HELLO"))  # no protocol version: the answer comes in RESP2, a flat array
            hello = _read_reply(replies)
            locked = isinstance(hello, bytes) and hello.startswith(b"-NOAUTH") and NOAUTH_MARK.encode() in hello
            if not locked and not _says_kumiho_ce(hello):
                return Check("redis", "warn", f"{where} is held by another program (it answered HELLO with "
                             f"{_shown(hello)}), so the appliance's working-memory listener is off: doctor sent it no "
                             "token", REDIS_PORT_FIX)
            if locked and not token:
                return Check("redis", "fail", f"working memory on {where} asks for the appliance's token, which "
                             "doctor cannot read", TOKEN_FIX)
            conn.sendall((_resp("AUTH", token) if locked and token else b"") + _resp("PING"))
            authed = _read_reply(replies) if locked else b"+OK"
            reply = _read_reply(replies)
    except ValueError as exc:
        return Check("redis", "warn", f"{where} does not answer in the Redis protocol ({exc}): another program holds "
                     "the port", REDIS_PORT_FIX)
    except OSError as exc:
        return Check("redis", "warn", f"nothing answers on {where} ({exc.strerror or exc}): the stock Kumiho "
                     "sidecar's working memory (KUMIHO_UPSTASH_REDIS_URL) will fail",
                     "see the appliance log: when the port was taken at its start, " + REDIS_PORT_FIX)
    if isinstance(reply, bytes) and reply.startswith(b"+PONG"):
        return Check("redis", "ok", f"working memory answers PING on {where}")
    if isinstance(authed, bytes) and authed.startswith(b"-WRONGPASS"):
        return Check("redis", "fail", f"working memory on {where} refused doctor's token", TOKEN_FIX)
    return Check("redis", "warn", f"working memory on {where} answered PING with {_shown(reply)}",
                 "see the appliance log")


# An answer of HELLO is a few lines; a listener that is not Redis at all may send anything, so reading is bounded
MAX_REPLY_LINE = 512
MAX_REPLY_ITEMS = 64


def _read_reply(replies: Any, depth: int = 0) -> Any:
    """One RESP2 reply: a status, error or integer line as bytes (with its marker), a bulk string's bytes, None
    or a list. ValueError on anything that is not one (or past the bounds above)."""
    line = replies.readline(MAX_REPLY_LINE)
    if not line.endswith(b"\r\n"):
        raise ValueError(f"no Redis reply (got {line[:60]!r})")
    kind, rest = line[:1], line[1:-2]
    if kind in (b"+", b"-", b":"):
        return line[:-2]
    if kind == b"$" and rest.lstrip(b"-").isdigit() and int(rest) <= MAX_REPLY_LINE:
        return None if int(rest) < 0 else replies.read(int(rest) + 2)[:-2]
    if kind == b"*" and rest.lstrip(b"-").isdigit() and int(rest) <= MAX_REPLY_ITEMS and depth < 2:
        return None if int(rest) < 0 else [_read_reply(replies, depth + 1) for _ in range(int(rest))]
    raise ValueError(f"no Redis reply (got {line[:60]!r})")


def _says_kumiho_ce(hello: Any) -> bool:
    """Whether a HELLO answer (RESP2: a flat array of names and values) names kumiho-ce as the server."""
    return isinstance(hello, list) and any(name == b"server" and value == b"kumiho-ce"
                                           for name, value in zip(hello[::2], hello[1::2], strict=False))


def _shown(reply: Any) -> str:
    return repr(reply)[:80]


def _resp(*parts: str) -> bytes:
    """One command in the Redis protocol's request form (an array of bulk strings)."""
    encoded = [part.encode() for part in parts]
    return b"*%d\r\n" % len(encoded) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in encoded)


def _check_openai(settings: Settings, host: str, port: int, token: str | None) -> Check:
    if not settings.inference.openai_api:
        return Check("openai", "ok", "off ([inference] openai_api = false): the stock sidecar's LLM features need "
                     "another KUMIHO_LLM_BASE_URL")
    url = _url(host, port, "/v1/models")
    try:
        body = _get(url, token)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            return Check("openai", "fail", f"{url} refused doctor's token ({exc.code})", TOKEN_FIX)
        return Check("openai", "warn", f"{url} answers {exc.code}: the OpenAI-compatible API is not served",
                     "see the appliance log")
    except (OSError, ValueError) as exc:
        return Check("openai", "warn", f"{url} does not answer ({exc})", "see the appliance log")
    models = [str(m.get("id")) for m in body.get("data", []) if isinstance(m, dict)] if isinstance(body, dict) else []
    if not models:
        return Check("openai", "warn", f"{url} lists no model: chat completions will fail until a chat model is "
                     "installed", "kumiho-ce models install, then restart kumiho-ce")
    return Check("openai", "ok", f"{url}: {', '.join(models[:5])}")
