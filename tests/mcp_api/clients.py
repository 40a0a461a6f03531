"""MCP clients for the tests: the official SDK over streamable HTTP and over stdio (``kumiho-ce mcp`` as a
real subprocess), and a raw HTTP client that behaves like Revka's (old protocol version, JSON only)."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.appliance_process import ROOT, cli_env


@asynccontextmanager
async def http_session(base_url: str) -> AsyncIterator[ClientSession]:
    async with streamable_http_client(base_url + "/mcp") as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        yield session


def in_http_session(base_url: str, steps: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    """Run ``steps`` with one MCP session over HTTP, from synchronous test code."""
    async def main() -> Any:
        async with http_session(base_url) as session:
            return await steps(session)

    return anyio.run(main)


@asynccontextmanager
async def stdio_session(data_dir: Path, port: int, **env: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "appliance", "mcp"], cwd=str(ROOT),
                                   env={**cli_env(data_dir, KUMIHO_CE_PORT=str(port)), **env})
    with open(data_dir.parent / "shim.log", "a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


def stop_background_appliance(data_dir: Path) -> None:
    """Stop the appliance a ``kumiho-ce mcp`` shim started in the background (it outlives the shim)."""
    runtime = json.loads((data_dir / "server.json").read_text())
    os.kill(int(runtime["pid"]), signal.SIGTERM)
    deadline = time.monotonic() + 30
    while (data_dir / "server.json").exists() and time.monotonic() < deadline:
        time.sleep(0.1)


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """The tool's JSON result as agent hosts read it: the text block, parsed."""
    result = await session.call_tool(tool, arguments)
    payload = json.loads(result.content[0].text)  # type: ignore[union-attr]
    assert (result.is_error is True) == ("error" in payload), payload
    if not result.is_error:
        assert result.structured_content == payload
    return payload  # type: ignore[no-any-return]


class RevkaLikeClient:
    """Revka's MCP client habits (issue 4): protocolVersion 2024-11-05, POSTs accepting JSON or SSE,
    reads tools/list once, hands ``content[0].text`` to the model and ignores ``isError``."""

    def __init__(self, base_url: str) -> None:
        self.url = base_url + "/mcp"
        self.http = httpx.Client(timeout=30)
        self.next_id = 0

    def __enter__(self) -> RevkaLikeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.http.close()

    def post(self, method: str, params: dict[str, Any] | None = None, notify: bool = False) -> httpx.Response:
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method, **({"params": params} if params else {})}
        if not notify:
            self.next_id += 1
            body["id"] = self.next_id
        return self.http.post(self.url, json=body, headers={
            "accept": "application/json, text/event-stream", "content-type": "application/json"})

    def handshake(self) -> dict[str, Any]:
        answer = self.post("initialize", {"protocolVersion": "2024-11-05", "capabilities": {},
                                          "clientInfo": {"name": "revka", "version": "0.1"}})
        assert answer.headers["content-type"].startswith("application/json"), answer.headers
        self.post("notifications/initialized", notify=True)
        return answer.json()["result"]  # type: ignore[no-any-return]

    def tool_text(self, name: str, arguments: dict[str, Any]) -> str:
        answer = self.post("tools/call", {"name": name, "arguments": arguments})
        assert answer.headers["content-type"].startswith("application/json"), answer.headers
        return answer.json()["result"]["content"][0]["text"]  # type: ignore[no-any-return]
