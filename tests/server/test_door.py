"""The front door of a real ``kumiho-ce serve``: Host and Origin checked on every route, CORS only when
configured, request bodies bounded, integer headers parsed strictly."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from tests.appliance_process import Running, serve
from tests.problems import problem

# Every kind of route: health, search, jobs, the model, the schema, the MCP mount, no route at all.
ROUTES = [("GET", "/api/_live"), ("GET", "/api/_ready"), ("GET", "/api/v1/search?q=password"),
          ("GET", "/api/jobs"), ("GET", "/api/model"), ("GET", "/api/schema/openapi.json"),
          ("POST", "/api/jobs/job-1/cancel"), ("POST", "/mcp"), ("GET", "/api/no-such-route"),
          ("DELETE", "/api/_live")]
MCP_LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with serve(tmp_path_factory.mktemp("door") / "data",
               KUMIHO_CE_HTTP__ALLOWED_HOSTS='["memory.lan"]',
               KUMIHO_CE_HTTP__CORS_ORIGINS='["http://dash.example:8080"]',
               KUMIHO_CE_HTTP__MAX_BODY_BYTES="4096") as running:
        yield running


def _request(app: Running, method: str, path: str, **headers: str) -> httpx.Response:
    body = json.dumps(MCP_LIST) if path == "/mcp" else None
    return httpx.request(method, app.base_url + path, content=body, timeout=30,
                         headers={**(MCP_HEADERS if path == "/mcp" else {}), **headers})


def _port(app: Running) -> str:
    return app.base_url.rsplit(":", 1)[1]


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_a_rebound_name_is_refused_on_every_route(app: Running, method: str, path: str) -> None:
    answer = _request(app, method, path, host=f"evil.example:{_port(app)}")
    assert answer.status_code == 421, answer.text
    error = problem(answer)
    assert error["code"] == "forbidden_host" and "http.allowed_hosts" in error["message"]
    assert "access-control-allow-origin" not in answer.headers


@pytest.mark.parametrize(("method", "path"), ROUTES)
def test_another_page_is_refused_on_every_route_before_any_handler(app: Running, method: str, path: str) -> None:
    answer = _request(app, method, path, origin="http://evil.example")
    assert answer.status_code == 403, answer.text  # the cancel handler would have said 404 for this job
    error = problem(answer)
    assert error["code"] == "forbidden_origin" and "http.cors_origins" in error["message"]
    assert "access-control-allow-origin" not in answer.headers
    assert _request(app, method, path, origin="null").status_code == 403  # sandboxed frames, file:// pages


@pytest.mark.parametrize("headers", [
    {},  # curl, SDKs, agent hosts: no Origin
    {"host": "localhost:{port}"}, {"host": "127.0.0.1:{port}"}, {"host": "[::1]:{port}"}, {"host": "memory.lan"},
    {"origin": "http://127.0.0.1:{port}"},  # the appliance's own pages
    {"origin": "http://localhost:5173"},  # a page served on this machine, appliance bound to loopback
])
def test_local_clients_and_configured_names_pass(app: Running, headers: dict[str, str]) -> None:
    filled = {name: value.format(port=_port(app)) for name, value in headers.items()}
    assert _request(app, "GET", "/api/_ready", **filled).status_code == 200
    mcp = _request(app, "POST", "/mcp", **filled)
    assert mcp.status_code == 200 and "tools" in mcp.json()["result"]
    assert "access-control-allow-origin" not in mcp.headers  # no CORS for anyone not configured


def test_cors_only_for_configured_origins(app: Running) -> None:
    origin = "http://dash.example:8080"
    preflight = httpx.options(app.base_url + "/mcp", headers={
        "origin": origin, "access-control-request-method": "POST",
        "access-control-request-headers": "content-type, mcp-protocol-version"})
    assert preflight.status_code == 204
    assert preflight.headers["access-control-allow-origin"] == origin
    assert "mcp-protocol-version" in preflight.headers["access-control-allow-headers"]
    answer = _request(app, "POST", "/mcp", origin=origin)
    assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == origin
    other = httpx.options(app.base_url + "/mcp", headers={"origin": "http://dash.example:9999",
                                                         "access-control-request-method": "POST"})
    assert other.status_code == 403 and "access-control-allow-origin" not in other.headers


@pytest.mark.parametrize("path", ["/mcp", "/api/jobs/job-1/cancel"])
def test_a_body_over_the_limit_never_reaches_a_handler(app: Running, path: str) -> None:
    big = json.dumps({**MCP_LIST, "params": {"padding": "x" * 8192}}).encode()
    sized = httpx.post(app.base_url + path, content=big, headers=MCP_HEADERS)
    assert sized.status_code == 413
    error = problem(sized)
    assert (error["code"], error["detail"]) == ("payload_too_large", (
        "the request body is larger than 4096 bytes (the http.max_body_bytes setting); send less per request"))

    def chunks() -> Iterator[bytes]:  # no Content-Length: the door counts what arrives
        for start in range(0, len(big), 1024):
            yield big[start:start + 1024]

    chunked = httpx.post(app.base_url + path, content=chunks(), headers=MCP_HEADERS)
    assert chunked.status_code == 413 and problem(chunked)["code"] == "payload_too_large"
    assert _request(app, "POST", "/mcp").status_code == 200  # within the limit, as before


@pytest.mark.parametrize("value", ["²".encode("latin-1"), b"\xb9", b"0", b"101", b"-1", b"1e2", b"3.0", b"+5",
                                   b"99999999999999999999", "٣".encode()])
def test_the_retrieval_limit_header_is_parsed_strictly(app: Running, value: bytes) -> None:
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "memory_engage", "arguments": {"query": "anything"}}}
    answer = httpx.post(app.base_url + "/mcp", json=call, timeout=30,
                        headers={**MCP_HEADERS, "x-kumiho-retrieval-limit": value})
    assert answer.status_code == 200, answer.text
    result = answer.json()["result"]
    assert result["isError"] is True, result
    error = json.loads(result["content"][0]["text"])["error"]
    assert error["code"] == "invalid_argument" and error["field"] == "x-kumiho-retrieval-limit"
    assert "whole number from 1 to 100" in error["message"]


def test_a_valid_retrieval_limit_header_caps_the_operator_tools(app: Running) -> None:
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "memory_engage", "arguments": {"query": "anything", "limit": 50}}}
    answer = httpx.post(app.base_url + "/mcp", json=call, headers={**MCP_HEADERS, "x-kumiho-retrieval-limit": "7"})
    assert answer.status_code == 200 and not answer.json()["result"].get("isError"), answer.text


def test_query_parameters_out_of_bounds_answer_400_naming_them(app: Running) -> None:
    for query in ("limit=%C2%B2", "limit=0", "limit=101", "min_score=nan", "min_score=2"):
        answer = httpx.get(f"{app.base_url}/api/v1/search?q=x&{query}")
        assert answer.status_code == 400, (query, answer.text)
        assert query.split("=")[0] in problem(answer)["message"], answer.text
