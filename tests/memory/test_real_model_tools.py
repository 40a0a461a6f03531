"""One real run of each model-backed tool with the real default model (and MiniLM), through MCP over HTTP on
real stores. The model's words vary, so these assert invariants: schema-valid results, guardrails held,
nothing outside the scope changed, and the summary names the session's key facts."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.inprocess import InProcess, serve_in_process
from tests.mcp_api.clients import call
from tests.memory.test_model_tools import run
from tests.real_model import default_model

pytestmark = pytest.mark.real_model
SAMPLES = json.loads((Path(__file__).parents[2] / "benchmarks" / "data" / "llm_samples.json").read_text())


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    model = default_model()
    with serve_in_process(tmp_path_factory.mktemp("real") / "data", model, search={"embedder": "minilm"},
                          inference={"tool_wait_seconds": 240},
                          maintenance={"idle_consolidation_minutes": 0, "dream_state_min_age_days": 0,
                                       "dream_state_time": ""}) as running:
        yield running


def test_consolidate_summarises_a_real_session(app: InProcess) -> None:
    session = next(s for s in SAMPLES["sessions"] if s["id"] == "s3")  # choosing a database, 12 messages

    async def steps(mcp: Any) -> dict[str, Any]:
        for message in session["messages"]:
            if message["role"] == "user":
                await call(mcp, "kumiho_memory_ingest", user_id="dev", session_id="real-s3", message=message["content"])
            else:
                await call(mcp, "kumiho_memory_add_response", session_id="real-s3", response=message["content"])
        return await call(mcp, "kumiho_memory_consolidate", session_id="real-s3")

    done = run(app, steps)
    assert done["success"] is True and done["cleared_messages"] == len(session["messages"])
    revision = app.services.graph.get_revision(done["store_result"]["revision_kref"])
    assert 0 < len(revision.metadata["title"]) <= 80 and {"summarized", "published"} <= set(revision.tags)
    text = f"{revision.metadata['title']} {done['summary']}".lower()
    mentioned = [fact for fact in session["key_facts"] if fact.lower() in text]
    assert len(mentioned) * 2 >= len(session["key_facts"]), (session["key_facts"], done["summary"])


def _store_all(app: InProcess, memories: list[tuple[str, str]], space: str, **extra: Any) -> list[dict[str, Any]]:
    async def steps(mcp: Any) -> list[dict[str, Any]]:
        return [await call(mcp, "kumiho_memory_store", title=title, user_text=text, space_path=space,
                           stack_revisions=False, **extra) for title, text in memories]

    return run(app, steps)  # type: ignore[no-any-return]


def test_discover_edges_and_graph_augmented_recall_with_the_real_model(app: InProcess) -> None:
    memories = [(m["title"], m["summary"]) for m in SAMPLES["implications"]]
    stored = _store_all(app, memories, "engineering")
    outside = _store_all(app, [("Postgres for the invoicing service", SAMPLES["implications"][0]["summary"])],
                         "elsewhere")[0]
    source = stored[0]

    async def steps(mcp: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        edges = await call(mcp, "kumiho_memory_discover_edges", revision_kref=source["revision_kref"],
                           summary=memories[0][1], max_queries=3, max_edges=2, min_score=0.3)
        recalled = await call(mcp, "kumiho_memory_recall", query=SAMPLES["reformulations"][0]["query"],
                              graph_augmented=True, limit=3)
        return edges, recalled

    edges, recalled = run(app, steps)
    mine = {m["revision_kref"] for m in stored}
    assert edges["count"] <= 2 and all(e["score"] >= 0.3 for e in edges["edges"])
    assert all(e["target"] in mine and e["target"] != source["revision_kref"] for e in edges["edges"])
    assert outside["revision_kref"] not in {e["target"] for e in edges["edges"]}  # scope: the memory's space
    assert all(0 < len(e["query"]) <= 80 for e in edges["edges"])
    report = recalled["graph_augmented"]
    assert report["used"] is True and 1 <= len(report["queries"]) <= 4 and recalled["count"] >= 1


def test_dream_state_dry_run_then_real_run_hold_the_guardrails(app: InProcess) -> None:
    """Eight sample memories (a superseded date, a near-duplicate, a greeting among them) in a project of
    their own: one batch, so the two runs take about two minutes on 2 cores."""
    graph = app.services.graph
    graph.ensure_project("Dreams")
    samples = SAMPLES["dream"][:8]
    drafts = _store_all(app, [(m["title"], m["summary"]) for m in samples[:6]], "dream", tags=["draft"],
                        project="Dreams")
    kept = _store_all(app, [(m["title"], m["summary"]) for m in samples[6:]], "dream", project="Dreams")
    other = _store_all(app, [("Release date is May 2", "The team plans to ship v2.3 on May 2.")], "dream")[0]
    before = graph.stats()
    dry = run(app, lambda mcp: call(mcp, "kumiho_memory_dream_state", project="Dreams", dry_run=True, batch_size=8))
    assert dry["success"] is True and dry["revisions_assessed"] == 8, dry
    assert _written(graph.stats()) == _written(before)  # the index may catch up meanwhile: that is no write
    report = run(app, lambda mcp: call(mcp, "kumiho_memory_dream_state", project="Dreams", batch_size=8,
                                       max_deprecation_ratio=0.3))
    assert report["success"] is True and report["revisions_assessed"] == 8, report
    assert report["deprecated"] <= 2  # int(8 x 0.3)
    for memory in kept:  # published: never deprecated without allow_published_deprecation
        assert not graph.get_revision(memory["revision_kref"]).deprecated
    deprecated = {m["revision_kref"] for m in drafts if graph.get_revision(m["revision_kref"]).deprecated}
    assert deprecated == set(report["deprecated_krefs"])
    assert graph.get_revision(other["revision_kref"]).tags == ["latest", "published"]  # another project
    assert not graph.get_revision(other["revision_kref"]).deprecated
    assert Path(report["report_path"]).is_file()


def _written(stats: dict[str, int]) -> dict[str, int]:
    """What writes change in the graph's counts (not how far the search index has caught up)."""
    return {key: value for key, value in stats.items() if key != "unindexed_revisions"}
