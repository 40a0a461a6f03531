"""``kumiho-ce mcp`` as agent hosts spawn it: a real subprocess speaking MCP on stdio, forwarding to the
appliance (started in the background when none runs); many at once share one store."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from appliance.mcp_api.catalogue import tools
from tests.appliance_process import ROOT, Running, cli_env, free_port, serve
from tests.fixtures import REFERENCE_NAMES
from tests.mcp_api.clients import call, http_session, stdio_session, stop_background_appliance


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with serve(tmp_path_factory.mktemp("stdio") / "data") as running:
        yield running


def test_the_shim_starts_the_appliance_when_none_runs_and_round_trips(tmp_path: Path) -> None:
    data, port = tmp_path / "data", free_port()

    async def steps() -> tuple[dict[str, Any], dict[str, Any]]:
        async with stdio_session(data, port) as session:
            reflected = await call(session, "kumiho_memory_reflect", session_id="stdio-1", response="ok",
                                   captures=[{"type": "fact", "title": "The staging database is Postgres 16",
                                              "content": "Staging runs Postgres 16 on host db-stage.",
                                              "space_hint": "facts"}])
            engaged = await call(session, "kumiho_memory_engage", query="which Postgres version does staging run?")
            return reflected, engaged

    try:
        reflected, engaged = anyio.run(steps)
    finally:
        stop_background_appliance(data)
    assert engaged["source_krefs"][0] == reflected["stored_krefs"][0]
    assert "Postgres 16" in engaged["context"]


def test_stdout_carries_nothing_but_protocol(app: Running) -> None:
    port = app.base_url.rsplit(":", 1)[1]
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "kumiho_memory_engage", "arguments": {
                "query": "anything at all", "space_paths": ["CognitiveMemory"], "recall_mode": "summarized",
                "limit": 3}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "kumiho_memory_recall",
                                                                      "arguments": {"limit": 0}}},
    ]
    shim = subprocess.run([sys.executable, "-m", "appliance", "mcp"], cwd=ROOT, text=True, timeout=60,
                          input="".join(json.dumps(m) + "\n" for m in lines), capture_output=True,
                          env=cli_env(app.data_dir, KUMIHO_CE_PORT=port))
    answers = {a["id"]: a for a in map(json.loads, shim.stdout.splitlines())}  # every line is JSON-RPC
    assert set(answers) == {1, 2, 3} and shim.returncode == 0
    assert answers[1]["result"]["protocolVersion"] == "2024-11-05"
    assert json.loads(answers[2]["result"]["content"][0]["text"])["count"] == 0
    assert answers[3]["result"]["isError"] is True


def test_per_client_environment_travels_with_the_client(app: Running) -> None:
    """D10: a shim's KUMIHO_MEMORY_RETRIEVAL_LIMIT caps its own operator engage, not everyone's."""
    port = int(app.base_url.rsplit(":", 1)[1])

    async def steps() -> tuple[dict[str, Any], dict[str, Any]]:
        async with http_session(app.base_url) as http:
            for i in range(4):
                await call(http, "kumiho_memory_store", title=f"Cycling route {i}",
                           user_text=f"Route {i} along the river is 2{i} km of cycling.", space_path=f"routes/{i}")
            shared = await call(http, "memory_engage", query="cycling routes along the river", limit=10,
                                min_score=0.0)
        async with stdio_session(app.data_dir, port, KUMIHO_MEMORY_RETRIEVAL_LIMIT="1") as stdio:
            own = await call(stdio, "memory_engage", query="cycling routes along the river", limit=10)
        return shared, own

    shared, own = anyio.run(steps)
    assert shared["limit"] == 3 and own["limit"] == 1 and own["count"] <= 1


def test_eight_stdio_and_eight_http_clients_write_and_read_at_once(app: Running) -> None:
    port = int(app.base_url.rsplit(":", 1)[1])
    acknowledged: list[str] = []
    errors: list[Any] = []

    async def client(name: str, session: Any) -> None:
        for i in range(4):
            stored = await session_call(session, "kumiho_memory_store", title=f"{name} note {i}",
                                        user_text=f"Client {name} wrote note {i} about topic {i * 7}.",
                                        space_path=f"load/{name}", stack_revisions=False)
            if stored is not None:
                acknowledged.append(stored["revision_kref"])
            await session_call(session, "kumiho_memory_engage", query=f"what did client {name} write?")

    async def session_call(session: Any, tool: str, **arguments: Any) -> dict[str, Any] | None:
        result = await session.call_tool(tool, arguments)
        payload = json.loads(result.content[0].text)
        if result.is_error:
            errors.append(payload)
            return None
        return payload  # type: ignore[no-any-return]

    async def over_stdio(name: str) -> None:
        async with stdio_session(app.data_dir, port) as session:
            await client(name, session)

    async def over_http(name: str) -> None:
        async with http_session(app.base_url) as session:
            await client(name, session)

    async def main() -> list[str]:
        async with anyio.create_task_group() as group:
            for n in range(8):
                group.start_soon(over_stdio, f"stdio{n}")
                group.start_soon(over_http, f"http{n}")
        async with http_session(app.base_url) as session:
            missing = []
            for kref in acknowledged:
                found = await session.call_tool("kumiho_resolve_kref", {"kref": kref})
                if found.is_error:
                    missing.append(kref)
            return missing

    missing = anyio.run(main)
    assert errors == []
    assert len(acknowledged) == 16 * 4 and len(set(acknowledged)) == 64
    assert missing == []


def test_every_tool_answers_over_stdio(app: Running) -> None:
    """The shim forwards every tool: each one called with valid arguments through ``kumiho-ce mcp``, here or in
    the scripted flow over stdio (test_catalogue_flow.py walks every tool of Kumiho's catalogue; this walks the
    operator tools and the memory tools once more on their own)."""
    port = int(app.base_url.rsplit(":", 1)[1])

    async def steps() -> dict[str, dict[str, Any]]:
        async with stdio_session(app.data_dir, port) as s:
            stored = await call(s, "kumiho_memory_store", title="Stdio tour", user_text="Every tool over stdio.",
                                space_path="tour")
            item, revision = stored["item_kref"], stored["revision_kref"]
            ingested = await call(s, "kumiho_memory_ingest", user_id="tour", message="hello over stdio")
            sid = ingested["session_id"]
            calls: dict[str, dict[str, Any]] = {
                "kumiho_memory_engage": {"query": "stdio tour"},
                "kumiho_memory_reflect": {"session_id": sid, "response": "ok"},
                "kumiho_memory_recall": {"query": "stdio tour"},
                "kumiho_memory_retrieve": {"query": "stdio tour"},
                "kumiho_fulltext_search": {"query": "stdio"},
                "kumiho_memory_add_response": {"session_id": sid, "response": "hi"},
                "kumiho_memory_store_execution": {"task": "ls", "stdout": "a b"},
                "kumiho_memory_consolidate": {"session_id": sid, "summary": "A short stdio tour."},
                "kumiho_memory_discover_edges": {"revision_kref": revision, "summary": "tour"},
                "kumiho_memory_dream_state": {"dry_run": True},
                "kumiho_resolve_kref": {"kref": revision},
                "kumiho_get_edges": {"revision_kref": revision},
                "kumiho_get_revision_by_tag": {"item_kref": item},
                "kumiho_deprecate_item": {"item_kref": item, "deprecated": False},
                "memory_engage": {"query": "stdio tour"},
                "memory_reflect": {"session_id": sid, "response": "ok"},
                "memory_retrieve": {"query": "stdio tour"},
                "memory_search": {"context_filter": "CognitiveMemory/tour"},
                "memory_fulltext": {"query": "stdio"},
                "memory_get_item": {"kref": item},
                "memory_resolve_kref": {"kref": item},
                "memory_get_revision_by_tag": {"item_kref": item},
                "memory_store": {"title": "Operator stdio note", "summary": "From the tour."},
                "memory_graph": {"limit": 20},
                "kumiho_create_project": {"name": "StdioTour"},
                "kumiho_list_projects": {},
                "kumiho_get_project": {"name": "StdioTour"},
                "kumiho_create_space": {"project_name": "StdioTour", "space_name": "a"},
                "kumiho_get_spaces": {"project_name": "StdioTour", "recursive": True},
                "kumiho_get_space": {"space_path": "/StdioTour/a"},
                "kumiho_create_item": {"space_path": "/StdioTour/a", "item_name": "x", "kind": "note"},
                "kumiho_get_item": {"kref": "kref://StdioTour/a/x.note"},
                "kumiho_search_items": {"context_filter": "StdioTour", "auth_token": "ignored"},
                "kumiho_set_metadata": {"kref": "kref://StdioTour/a/x.note", "metadata": {"k": "v"}},
                "kumiho_delete_item": {"item_kref": "kref://StdioTour/a/x.note"},
                "kumiho_delete_space": {"space_path": "/StdioTour/a"},
                "kumiho_delete_project": {"project_name": "StdioTour", "force": True},  # the snapshot only
            }
            answers = {"kumiho_memory_store": stored, "kumiho_memory_ingest": ingested}
            for tool, arguments in calls.items():
                answers[tool] = await call(s, tool, **arguments)
            return answers

    answers = anyio.run(steps)
    assert not [t for t, a in answers.items() if "error" in a]
    assert set(tools()) <= set(answers) | REFERENCE_NAMES
