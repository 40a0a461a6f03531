"""The model-backed tools on real llama.cpp code: the tiny random-weight GGUF (tests/inference/conftest.py
explains it) loads, generates under each tool's grammar, and its answers flow through the MCP tools. Its
words are noise, so these tests check the mechanics (schema-valid output, stored results, bounded sizes),
not the content."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from appliance.inference.gguf_fixture import write_tiny_llama
from appliance.inference.llm import LlamaModel
from tests.inprocess import InProcess, serve_in_process
from tests.mcp_api.clients import call
from tests.memory.test_model_tools import run


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    root = tmp_path_factory.mktemp("tiny")
    model = LlamaModel(write_tiny_llama(root / "tiny.gguf"), model_id="tiny", context_tokens=4096, threads=1)
    with serve_in_process(root / "data", model, maintenance={"idle_consolidation_minutes": 0,
                                                             "dream_state_min_age_days": 0}) as running:
        yield running


def test_consolidate_stores_what_the_model_wrote(app: InProcess) -> None:
    async def steps(session: Any) -> tuple[Any, dict[str, Any]]:
        await call(session, "kumiho_memory_ingest", user_id="t", session_id="s-tiny", message="Backups at 2am")
        await call(session, "kumiho_memory_add_response", session_id="s-tiny", response="Noted")
        done = await session.call_tool("kumiho_memory_consolidate", {"session_id": "s-tiny"})
        left = await call(session, "kumiho_memory_ingest", user_id="t", session_id="s-tiny", message="next")
        return done, left

    done, left = run(app, steps)
    payload = done.structured_content
    if done.is_error:  # noise may run out of tokens: then the error says so and the buffer is kept
        assert payload["error"]["code"] == "model_output_invalid" and len(left["working_memory"]) == 3
        raise AssertionError(f"the tiny model's summary did not fit its token budget: {payload}")
    assert payload["success"] is True and payload["summarized_by"] == "tiny"
    assert 0 < len(payload["summary"]) <= 2000 and [m["content"] for m in left["working_memory"]] == ["next"]
    revision = app.services.graph.get_revision(payload["store_result"]["revision_kref"])
    assert 0 < len(revision.metadata["title"]) <= 80 and "summarized" in revision.tags


def test_discover_edges_and_graph_augmented_recall_run_on_llama_cpp(app: InProcess) -> None:
    async def steps(session: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        stored = await call(session, "kumiho_memory_store", title="Tiny edge source", user_text="edge source text",
                            space_path="tiny")
        edges = await call(session, "kumiho_memory_discover_edges", revision_kref=stored["revision_kref"],
                           summary="edge source text", max_queries=2, max_edges=2)
        recalled = await call(session, "kumiho_memory_recall", query="edge source", graph_augmented=True)
        return edges, recalled

    edges, recalled = run(app, steps)
    assert edges["count"] == len(edges["edges"]) <= 2 and "job_id" in edges
    report = recalled["graph_augmented"]
    assert report["used"] is True and 1 <= len(report["queries"]) <= 4 and report["queries"][0] == "edge source"
    assert recalled["count"] >= 1


def test_dream_state_dry_run_assesses_with_llama_cpp(app: InProcess) -> None:
    async def steps(session: Any) -> dict[str, Any]:
        for title in ("Tiny one", "Tiny two", "Tiny three"):
            await call(session, "kumiho_memory_store", title=title, user_text=f"{title} text", space_path="tiny")
        return await call(session, "kumiho_memory_dream_state", dry_run=True, batch_size=3)

    report = run(app, steps)
    assert report["success"] is True and report["dry_run"] is True, report
    assert report["revisions_assessed"] >= 3 and report["errors"] == []
    assert report["deprecated"] == 0 and "report_kref" not in report
