"""The door and the token guard hold on every route the built app serves: the routes are read from its Litestar
route table (so a route added later is covered without touching this file), plus the ``/mcp`` mount and a path
that matches no route.

For each method and path, on real stores (Litestar's TestClient runs the app's lifespan; each request goes
through the whole ASGI app, headers exactly as written here):

* a re-pointed name in ``Host`` (DNS rebinding) → 421; another page's ``Origin`` or ``Origin: null`` → 403;
* a browser's cross-site request that may change something (``Sec-Fetch-Site: cross-site``) or a form body
  → 403 / 415;
* beyond loopback, and on loopback with ``require_token``: no token or a malformed one → 401 (``/api/_live``
  excepted); the exact token, as ``Authorization: Bearer`` or ``X-Kumiho-Token``, passes;
* with the right credentials and a harmless request, never a 5xx.

A streaming answer (server-sent events) is read up to its status and then disconnected.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from litestar.routes import ASGIRoute, HTTPRoute
from litestar.testing import TestClient

from appliance.admin_api.auth import OPEN_PATHS
from appliance.admin_api.ui import public_page
from appliance.app import ApplianceApp, build_app, open_services
from appliance.config import load_settings
from appliance.server.door import SAFE_METHODS
from tests.problems import problem_of

TOKEN = "T0ken-" + "x" * 30 + "_.~+/=="
PORT = 9190
UNKNOWN = [("GET", "/api/no-such-route"), ("POST", "/api/no-such-route")]
MOUNT_METHODS = ("GET", "POST", "DELETE")
PLACEHOLDER = {int: "1", float: "1.5"}


@dataclass
class Answer:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""

    def problem(self) -> dict[str, Any]:
        assert self.headers.get("content-type", "").startswith("application/problem+json"), self.headers
        return problem_of(self.status, json.loads(self.body))


@dataclass
class Appliance:
    """The built app of one configuration, its lifespan running in ``client``'s event loop."""

    app: ApplianceApp
    client: TestClient[Any]
    host: str  # the Host header a legitimate client sends
    token: str | None  # None: no token is asked for

    def call(self, method: str, target: str, headers: dict[str, str] | list[tuple[str, str]] | None = None,
             *, credentials: bool = True) -> Answer:
        pairs = list(headers.items()) if isinstance(headers, dict) else list(headers or [])
        names = {name.lower() for name, _ in pairs}
        if "host" not in names:
            pairs.append(("host", self.host))
        if credentials and self.token and not names & {"authorization", "x-kumiho-token"}:
            pairs.append(("authorization", f"Bearer {self.token}"))
        body = b""
        if method not in SAFE_METHODS:
            body = b"{}"
            if "content-type" not in names:
                pairs.append(("content-type", "application/json"))
        pairs.append(("accept", "application/json, text/event-stream"))
        raw = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in pairs]
        return self.client.blocking_portal.call(_exchange, self.app, method, target, raw, body)


async def _exchange(app: ApplianceApp, method: str, target: str, headers: list[tuple[bytes, bytes]],
                    body: bytes) -> Answer:
    """One request through the ASGI app. The answer is read until it is complete or, for a stream that goes
    on, for a moment after it started; then the client disconnects."""
    path, _, query = target.partition("?")
    scope = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.3"}, "http_version": "1.1",
             "method": method, "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "",
             "query_string": query.encode(), "headers": headers, "client": ("127.0.0.1", 50000),
             "server": ("127.0.0.1", PORT), "state": {}}
    started, complete, gone = asyncio.Event(), asyncio.Event(), asyncio.Event()
    answer = Answer(0)
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await gone.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            answer.status = message["status"]
            answer.headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in message["headers"]}
            started.set()
        elif message["type"] == "http.response.body":
            answer.body += message.get("body", b"")
            if not message.get("more_body", False):
                complete.set()

    task = asyncio.create_task(app(scope, receive, send))
    try:
        await asyncio.wait_for(started.wait(), timeout=60)
        await asyncio.wait_for(complete.wait(), timeout=1)
    except TimeoutError:
        if not started.is_set():
            raise AssertionError(f"{method} {target}: no answer within 60 s") from None
    finally:
        gone.set()
        with contextlib.suppress(TimeoutError):  # a stream that does not watch for the disconnect is cancelled
            await asyncio.wait_for(task, timeout=10)
    return answer


def served_routes(app: ApplianceApp) -> list[tuple[str, str]]:
    """(method, path) for every route of the app's route table, path parameters filled in."""
    found: set[tuple[str, str]] = set()
    for route in app.litestar.routes:
        path = route.path_format
        for name, definition in route.path_parameters.items():
            path = path.replace("{" + name + "}", PLACEHOLDER.get(definition.type, "x"))
        if isinstance(route, HTTPRoute):
            found |= {(method, path) for method in route.methods}
        elif isinstance(route, ASGIRoute):
            found |= {(method, path) for method in MOUNT_METHODS}
    return sorted(found | set(UNKNOWN))


ALL = ["loopback", "beyond_loopback", "require_token"]
TOKEN_REQUIRED = ["beyond_loopback", "require_token"]


@pytest.fixture(scope="module", params=ALL)
def appliance(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Appliance]:
    kind = request.param
    host = "10.200.0.1" if kind == "beyond_loopback" else "127.0.0.1"  # never bound: the app only reads it
    settings = load_settings(data_dir=tmp_path_factory.mktemp(kind) / "data", host=host, port=PORT,
                             api_token=TOKEN, require_token=kind == "require_token",
                             search={"embedder": "hashing"}, inference={"chat_model": "none"})
    with open_services(settings) as services:
        app = build_app(services)
        with TestClient(app, base_url=f"http://{host}:{PORT}") as client:
            yield Appliance(app, client, f"{host}:{PORT}", TOKEN if settings.token_required else None)


def test_the_route_table_holds_every_kind_of_route(appliance: Appliance) -> None:
    routes = served_routes(appliance.app)
    paths = {path for _, path in routes}
    assert {"/api/_live", "/api/_ready", "/mcp", "/api/schema/openapi.json", UNKNOWN[0][1]} <= paths, paths
    assert ("POST", "/api/v1/jobs/x/cancel") in routes  # path parameters filled, POST routes included


def test_every_route_refuses_a_rebound_name_another_page_and_cross_site_writes(appliance: Appliance) -> None:
    for method, path in served_routes(appliance.app):
        where = f"{method} {path}"
        rebound = appliance.call(method, path, {"host": f"evil.example:{PORT}"})
        assert rebound.status == 421 and rebound.problem()["code"] == "forbidden_host", (where, rebound)
        for origin in ("http://evil.example", "null", f"http://evil.example:{PORT}"):
            other = appliance.call(method, path, {"origin": origin})
            assert other.status == 403 and other.problem()["code"] == "forbidden_origin", (where, origin, other)
            assert "access-control-allow-origin" not in other.headers
        if method in SAFE_METHODS:
            continue
        cross = appliance.call(method, path, {"sec-fetch-site": "cross-site"})
        assert cross.status == 403 and cross.problem()["code"] == "forbidden_origin", (where, cross)
        for form in ("application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "text/plain"):
            forged = appliance.call(method, path, {"content-type": form})
            assert forged.status == 415, (where, form, forged)
            assert "application/json" in forged.problem()["detail"]


@pytest.mark.parametrize("appliance", TOKEN_REQUIRED, indirect=True)
def test_every_route_but_live_and_the_ui_shell_needs_the_exact_token_when_one_is_required(appliance: Appliance) -> None:
    token = appliance.token
    assert token is not None
    refused: list[list[tuple[str, str]]] = [
        [], [("authorization", "")], [("authorization", "Bearer")], [("authorization", "Bearer ")],
        [("authorization", f"Bearer  {token}")],
        [("authorization", f"bearer {token}")], [("authorization", f"Basic {token}")],
        [("authorization", f"Bearer {token}x")], [("authorization", f"Bearer {token[:-1]}")],
        [("authorization", token)], [("authorization", f"Bearer\t{token}")],
        [("authorization", f"Bearer {token}"), ("authorization", f"Bearer {token}")],
        [("x-kumiho-token", "")], [("x-kumiho-token", f" x{token}")],
        [("x-kumiho-token", f"Bearer {token}")], [("x-kumiho-token", f"{token}x")],
        [("x-kumiho-token", token), ("x-kumiho-token", token)],
        [("authorization", f"Bearer {token}"), ("x-kumiho-token", "not-the-token-" + "y" * 30)],
        [("authorization", "Bearer not-the-token-" + "y" * 30), ("x-kumiho-token", token)],
    ]
    accepted: list[list[tuple[str, str]]] = [
        [("authorization", f"Bearer {token}")], [("x-kumiho-token", token)],
        [("authorization", f"Bearer {token}"), ("x-kumiho-token", "")],  # Revka's empty header is no credential
        [("authorization", f"Bearer {token}"), ("x-kumiho-token", token)],
        # whitespace after a header's value is not part of it (RFC 9110; uvicorn 0.55 strips it before the app)
        [("authorization", f"Bearer {token} ")], [("x-kumiho-token", f"{token}\t")],
    ]
    shells = {p for m, p in served_routes(appliance.app) if public_page(m, p) and p.startswith(("/api", "/mcp"))}
    assert shells == {"/api/docs"}, shells  # the docs page's shell; the schema it loads needs the token
    for method, path in served_routes(appliance.app):
        for headers in refused:
            answer = appliance.call(method, path, headers, credentials=False)
            if path in OPEN_PATHS or public_page(method, path):  # the UI's shell holds no data; its API calls do
                assert answer.status != 401, (method, path, headers)
                continue
            assert answer.status == 401, (method, path, headers, answer)
            assert answer.problem()["code"] == "unauthorized" and "X-Kumiho-Token" in answer.problem()["detail"]
            assert answer.headers["www-authenticate"] == 'Bearer realm="kumiho-ce"'
        for headers in accepted:
            answer = appliance.call(method, path, headers, credentials=False)
            assert answer.status != 401 and answer.status < 500, (method, path, headers, answer)


def test_no_route_answers_a_5xx_to_a_harmless_request(appliance: Appliance) -> None:
    not_problems = set()
    for method, path in served_routes(appliance.app):
        for extra in ({}, {"origin": f"http://{appliance.host}", "sec-fetch-site": "same-origin"},
                      {"x-kumiho-token": ""}):
            answer = appliance.call(method, path, extra)
            assert answer.status < 500, (method, path, extra, answer)
            assert not re.search(rb"Traceback|File \"|\.py\b", answer.body), (method, path, answer)
            if answer.status < 400 or path == "/mcp":  # /mcp answers in JSON-RPC, the MCP transport's own
                continue
            if answer.headers.get("content-type", "").startswith("application/problem+json"):
                answer.problem()
            elif path.startswith("/v1/"):  # the OpenAI-compatible routes answer in OpenAI's error shape (the door
                # before them in problems)
                assert set(json.loads(answer.body)["error"]) == {"message", "type", "param", "code"}, answer
            else:
                not_problems.add((method, path))
    assert not not_problems, not_problems  # e.g. an unknown page under /api/schema (path parameters get "x")


@pytest.mark.parametrize("appliance", ["loopback"], indirect=True)
def test_any_kumiho_token_is_ignored_by_a_tokenless_appliance(appliance: Appliance) -> None:
    assert appliance.token is None
    for value in ("", "anything"):  # Revka sends its (empty) token to a local CE
        answer = appliance.call("GET", "/api/_ready", {"x-kumiho-token": value})
        assert answer.status == 200, answer
