"""The Memory API's rules seen from the MCP tools (the official ``mcp`` client over real HTTP, in-process
appliance on real stores): the seed's write filters hold for ``kumiho_memory_store`` and
``kumiho_memory_ingest`` exactly as for the REST route (one table, tests/write_filters.py), and a recall scoped
to one namespace's space returns none of another namespace's entries."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from mcp.client.session import ClientSession

from tests.inprocess import InProcess, serve_in_process
from tests.mcp_api.clients import call, in_http_session
from tests.memory_api.conftest import API
from tests.write_filters import KEPT_CONTENT, SKIPPED_CONTENT


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with serve_in_process(tmp_path_factory.mktemp("memory-mcp") / "data", None,
                          inference={"chat_model": "none"}) as running:
        yield running


def test_memory_store_and_ingest_skip_what_revka_skips_and_keep_the_rest(app: InProcess) -> None:
    async def steps(session: ClientSession) -> dict[str, Any]:
        seen: dict[str, Any] = {"store": {}, "ingest": {}}
        for text in [content for content, _ in SKIPPED_CONTENT] + list(KEPT_CONTENT):
            stored = await call(session, "kumiho_memory_store", user_text=text, title="filter case")
            seen["store"][text] = stored.get("skipped") if stored["stored"] is False else stored["item_kref"]
            ingested = await call(session, "kumiho_memory_ingest", message=text, user_id="filters-user",
                                    session_id="filters-session")
            assert "error" not in ingested, ingested
            seen["ingest"][text] = ingested.get("skipped")
        # a blank user_text next to a real assistant_text is no empty memory
        seen["blank_user"] = await call(session, "kumiho_memory_store", user_text="   ",
                                        assistant_text="Paris is the capital of France.", title="blank user")
        seen["buffered"] = await call(session, "kumiho_chat_get", session_id="filters-session", user_id="filters-user",
                                      limit=100)
        return seen

    seen = in_http_session(app.base_url, steps)
    for content, reason in SKIPPED_CONTENT:
        assert seen["store"][content] == reason, content
        assert seen["ingest"][content] == reason, content
    for content in KEPT_CONTENT:
        kref = seen["store"][content]
        assert kref.startswith("kref://"), (content, kref)
        assert not app.services.graph.current_revisions([kref])[kref].deprecated  # a live memory in the graph
        assert seen["ingest"][content] is None, content
    buffered = [m["content"] for m in seen["buffered"]["messages"]]
    assert buffered == list(KEPT_CONTENT)  # the skipped messages were never buffered
    assert seen["blank_user"]["stored"] is True


def test_an_mcp_recall_scoped_to_a_namespace_returns_only_its_entries(app: InProcess) -> None:
    project = app.services.settings.kumiho.default_project
    content = "The rooftop garden is watered every Thursday morning."
    krefs = {}
    for namespace in ("default", "garden-a", "garden-b"):
        stored = httpx.post(app.base_url + API, json={"key": f"garden-{namespace}", "content": content,
                                                      "namespace": namespace}, timeout=30)
        assert stored.status_code == 201, stored.text
        krefs[namespace] = stored.json()["kref"]
    query = "when is the rooftop garden watered?"

    async def steps(session: ClientSession) -> dict[str, set[str]]:
        found = {}
        for name, spaces in {"a": [f"{project}/Memory/garden-a"], "b": [f"/{project}/Memory/garden-b"],
                             "default": [f"{project}/Memory"]}.items():
            engaged = await call(session, "kumiho_memory_engage", query=query, limit=20, space_paths=spaces)
            recalled = await call(session, "kumiho_memory_recall", query=query, limit=20, space_paths=spaces)
            found[f"engage-{name}"] = {r["kref"].split("?")[0] for r in engaged["results"]}
            found[f"recall-{name}"] = {r["item_kref"] for r in recalled["results"]}
        return found

    found = in_http_session(app.base_url, steps)
    for tool in ("engage", "recall"):
        assert found[f"{tool}-a"] & set(krefs.values()) == {krefs["garden-a"]}, found
        assert found[f"{tool}-b"] & set(krefs.values()) == {krefs["garden-b"]}, found
        # the default namespace's space holds the others' spaces, and MCP scopes take a space with the spaces
        # below it (docs/memory-api.md says how an agent scopes to the default namespace alone)
        assert found[f"{tool}-default"] & set(krefs.values()) == set(krefs.values()), found
