"""The bearer token of an appliance bound beyond loopback (a real ``kumiho-ce serve`` on a private address in
its own network namespace) or on loopback with ``require_token``: an unusable token stops the start, an empty
token file is replaced, and only an exact ``Authorization: Bearer <token>`` or ``X-Kumiho-Token: <token>`` gets
in."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from tests.appliance_process import cli_env, free_port, kumiho_ce, serve
from tests.mcp_api.clients import call, stdio_session, stop_background_appliance
from tests.netns import PRIVATE_ADDRESS, run_in_private_network

STORE = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
         "params": {"name": "kumiho_memory_store", "arguments": {"user_text": "the door code is 4711"}}}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def raw_status(base_url: str, path: str, authorization: str | None, *extra: str) -> int:
    """The status of one request sent byte for byte (HTTP clients tidy the whitespace this is about); ``extra``
    are more header lines."""
    host, port = base_url.removeprefix("http://").rsplit(":", 1)
    body = json.dumps(STORE).encode() if path == "/mcp" else b""
    head = [f"{'POST' if body else 'GET'} {path} HTTP/1.1", f"Host: {host}:{port}", "Connection: close",
            "Accept: application/json, text/event-stream", "Content-Type: application/json",
            f"Content-Length: {len(body)}"]
    if authorization is not None:
        head.append(f"Authorization: {authorization}")
    head += extra
    with socket.create_connection((host, int(port)), timeout=30) as conn:
        conn.sendall("\r\n".join(head).encode() + b"\r\n\r\n" + body)
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    return int(answer.split(b" ", 2)[1])


def _refused_start(data_dir: Path, **env: str) -> str:
    """The error a beyond-loopback start prints (it must not start)."""
    result = kumiho_ce("serve", "--host", PRIVATE_ADDRESS, "--port", str(free_port()),
                       env=cli_env(data_dir, **env), timeout=40)
    assert result.returncode == 2, result.stderr
    last = result.stderr.strip().splitlines()[-1]
    assert "Traceback" not in result.stderr and last.startswith("kumiho-ce: error: "), result.stderr
    return last


@pytest.mark.parametrize(("token", "problem"), [
    ("", "is empty"), ("   ", "is empty"), ("short-token", "is 11 characters long; at least 32"),
    ("a" * 40 + " b", "has characters a bearer token cannot carry"),
])
def test_an_unusable_configured_token_stops_the_start(tmp_path: Path, token: str, problem: str) -> None:
    def body() -> None:
        error = _refused_start(tmp_path / "data", KUMIHO_CE_API_TOKEN=token)
        assert f"the bearer token in the api_token setting {problem}" in error
        assert "token_urlsafe(32)" in error  # how to make a good one
        assert token.strip() == "" or token not in error  # the secret itself is never printed

    run_in_private_network(body)


def test_a_short_token_file_stops_the_start(tmp_path: Path) -> None:
    def body() -> None:
        data = tmp_path / "data"
        data.mkdir(mode=0o700)
        (data / "token").write_text("abc123\n")
        error = _refused_start(data)
        assert f"the bearer token in the file {data / 'token'} is 6 characters long" in error
        assert "delete the file" in error

    run_in_private_network(body)


def test_an_empty_token_file_is_replaced_and_only_the_exact_header_gets_in(tmp_path: Path) -> None:
    """An empty token file (a crash or a full disk during its first write) used to let ``Bearer `` in."""

    def body() -> None:
        data = tmp_path / "data"
        data.mkdir(mode=0o700)
        (data / "token").write_text("")
        with serve(data, host=PRIVATE_ADDRESS) as app:
            for empty in ("Bearer ", "Bearer  ", "Bearer", ""):  # what an empty token used to accept
                assert raw_status(app.base_url, "/mcp", empty) == 401, empty
            token = (data / "token").read_text().strip()
            assert len(token) >= 43 and (data / "token").stat().st_mode & 0o077 == 0
            assert [p.name for p in data.iterdir() if p.name.startswith(".token")] == []  # no temporary left
            log = (data.parent / "data.log").read_text()
            assert "token file" in log and "was empty; a new token was written" in log

            for path in ("/api/_ready", "/api/v1/search?q=door", "/mcp"):
                for refused in (None, "", "Bearer", "Bearer ", "Bearer  ", f"Bearer  {token}",
                                f"bearer {token}", f"Basic {token}", f"Bearer {token}x", token, f"Bearer\t{token}"):
                    assert raw_status(app.base_url, path, refused) == 401, (path, refused)
            # whitespace after a header's value is not part of it (RFC 9110): the token is the same
            assert raw_status(app.base_url, "/api/_ready", f"Bearer {token} ") == 200
            assert raw_status(app.base_url, "/api/_live", None) == 200  # Kumiho's SDK probe needs no token
            assert raw_status(app.base_url, "/api/_ready", f"Bearer {token}") == 200
            stored = httpx.post(app.base_url + "/mcp", json=STORE, timeout=30,
                                headers={**MCP_HEADERS, "authorization": f"Bearer {token}"})
            assert stored.status_code == 200 and not stored.json()["result"].get("isError"), stored.text
            twice = httpx.get(app.base_url + "/api/_ready", headers=[
                ("authorization", f"Bearer {token}"), ("authorization", f"Bearer {token}")])
            assert twice.status_code == 401
        assert (data / "token").read_text() == token + "\n"  # kept across stops

    run_in_private_network(body)


def test_a_good_configured_token_is_used_and_the_file_is_left_alone(tmp_path: Path) -> None:
    token = "K" * 20 + "-._~+/" + "z" * 12 + "=="

    def body() -> None:
        with serve(tmp_path / "data", host=PRIVATE_ADDRESS, KUMIHO_CE_API_TOKEN=token) as app:
            assert httpx.get(app.base_url + "/api/_ready", headers={"authorization": f"Bearer {token}"}
                             ).status_code == 200
            assert httpx.get(app.base_url + "/api/_ready", headers={"authorization": "Bearer " + token[:-2]}
                             ).status_code == 401
            # without the token a body is not even read: 401, not the 413 its size would earn
            huge = httpx.post(app.base_url + "/mcp", content=b"x" * (5 << 20), headers=MCP_HEADERS, timeout=60)
            assert huge.status_code == 401, huge.text
            authorized = {**MCP_HEADERS, "authorization": f"Bearer {token}"}
            huge = httpx.post(app.base_url + "/mcp", content=b"x" * (5 << 20), headers=authorized, timeout=60)
            assert huge.status_code == 413, huge.text
        assert not (tmp_path / "data" / "token").exists()

    run_in_private_network(body)


def test_require_token_asks_for_it_on_loopback_too_in_either_header(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serve(data, KUMIHO_CE_REQUIRE_TOKEN="true") as app:
        token = (data / "token").read_text().strip()
        assert len(token) >= 43 and (data / "token").stat().st_mode & 0o077 == 0
        assert "require_token is set: every request but /api/_live needs the bearer token" in \
            (tmp_path / "data.log").read_text()
        assert raw_status(app.base_url, "/api/_live", None) == 200  # Kumiho's SDK probe needs no token
        for path in ("/api/_ready", "/api/v1/search?q=door", "/mcp", "/api/no-such-route"):
            assert raw_status(app.base_url, path, None) == 401, path
            for refused in ("", f"{token}x", f"Bearer {token}", token[:-1], f" x{token}"):
                assert raw_status(app.base_url, path, None, f"X-Kumiho-Token: {refused}") == 401, (path, refused)
            assert raw_status(app.base_url, path, None, f"X-Kumiho-Token: {token}",
                              f"X-Kumiho-Token: {token}") == 401, path  # one header, as for Authorization
            assert raw_status(app.base_url, path, f"Bearer {token}", "X-Kumiho-Token: " + "w" * 40) == 401, path
        assert raw_status(app.base_url, "/api/_ready", f"Bearer {token}") == 200
        assert raw_status(app.base_url, "/api/_ready", None, f"X-Kumiho-Token: {token}") == 200  # Revka's way
        assert raw_status(app.base_url, "/api/_ready", f"Bearer {token}", "X-Kumiho-Token: ") == 200
        stored = httpx.post(app.base_url + "/mcp", json=STORE, timeout=30,
                            headers={**MCP_HEADERS, "x-kumiho-token": token})
        assert stored.status_code == 200 and not stored.json()["result"].get("isError"), stored.text


def test_the_stdio_bridge_sends_the_token_an_appliance_requires_on_loopback(tmp_path: Path) -> None:
    """An agent host's `kumiho-ce mcp` needs no change: it reads the token the appliance it started wrote."""
    data, port = tmp_path / "data", free_port()

    async def steps() -> dict[str, Any]:
        async with stdio_session(data, port, KUMIHO_CE_REQUIRE_TOKEN="true") as session:
            return await call(session, "kumiho_memory_store", user_text="the door code is 4711")

    try:
        stored = anyio.run(steps)
        assert "error" not in stored, stored
        without = httpx.post(f"http://127.0.0.1:{port}/mcp", json=STORE, headers=MCP_HEADERS, timeout=30)
        assert without.status_code == 401  # the appliance the bridge started does require it
    finally:
        stop_background_appliance(data)
