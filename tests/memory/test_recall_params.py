"""Every parameter of the recall tools does something (or is refused with a message naming it), through the
official MCP client against the in-process app on real stores: engage's insight request (include_insights,
current_context, goals, include_learned_sources), its payload and timing report, full-text search's
artifacts and auth_token, and the operator wrappers that call the same service."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.inprocess import InProcess, serve_in_process
from tests.mcp_api.clients import call, in_http_session

DECISION = "We chose Postgres over MySQL for the billing service because of its JSON support."
STALE = "The billing service reads its invoices from the legacy FTP drop every night."
LESSON = "Postgres billing migration: doing the JSON columns first made the rest of the move painless."
REPLACED = "kref://CognitiveMemory/billing/ftp-retired.conversation?r=1"


@dataclass
class World:
    app: InProcess
    stored: dict[str, dict[str, Any]]  # what the module's memories are: kumiho_memory_store's answers


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    with serve_in_process(tmp_path_factory.mktemp("recall") / "data", None) as running:
        stored: dict[str, Any] = {}

        async def seed(session: Any) -> None:
            stored["decision"] = await call(session, "kumiho_memory_store", title="Billing database choice",
                                            user_text=DECISION, space_path="billing", memory_type="decision")
            stored["stale"] = await call(session, "kumiho_memory_store", title="Billing invoice import",
                                         user_text=STALE, space_path="billing", memory_type="fact",
                                         metadata={"grounding_stale": "true", "superseded_by": REPLACED})
            stored["lesson"] = await call(session, "kumiho_memory_store", title="Billing migration lesson",
                                          user_text=LESSON, space_path="billing", memory_item_kind="experience",
                                          memory_type="experience")

        in_http_session(running.base_url, seed)
        yield World(running, stored)


@pytest.fixture
def app(world: World) -> InProcess:
    return world.app


@pytest.fixture
def stored(world: World) -> dict[str, dict[str, Any]]:
    return world.stored


def run(app: InProcess, tool: str, **arguments: Any) -> dict[str, Any]:
    return in_http_session(app.base_url, lambda session: call(session, tool, **arguments))  # type: ignore[no-any-return]


def refused(app: InProcess, tool: str, **arguments: Any) -> dict[str, Any]:
    async def steps(session: Any) -> Any:
        return await session.call_tool(tool, arguments)

    result = in_http_session(app.base_url, steps)
    assert result.is_error is True
    return json.loads(result.content[0].text)["error"]  # type: ignore[no-any-return]


def fingerprint(request: dict[str, Any]) -> str:
    """Kumiho's snapshot fingerprint: sha256 of the request's canonical JSON without the fingerprint."""
    body = {k: v for k, v in request.items() if k != "snapshot_fingerprint"}
    return hashlib.sha256(json.dumps(body, ensure_ascii=False, sort_keys=True,
                                     separators=(",", ":")).encode()).hexdigest()


def test_engage_with_insights_returns_a_brief_and_a_request_the_host_can_answer(app: InProcess,
                                                                               stored: dict[str, Any]) -> None:
    query = "which database does the billing service use and why?"
    plain = run(app, "kumiho_memory_engage", query=query, limit=3)
    out = run(app, "kumiho_memory_engage", query=query, limit=3, include_insights=True,
              current_context="A new team took over billing last month.", goals=["Keep invoices exact"])
    # the insight request does not change what is recalled
    assert [r["kref"] for r in out["results"]] == [r["kref"] for r in plain["results"]]
    assert out["context"] == plain["context"] and out["source_krefs"] == plain["source_krefs"]
    request = out["synthesis_request"]
    assert request["schema_version"] == 1 and request["status"] == "ready"
    assert request["query"] == query
    assert request["current_context"] == "A new team took over billing last month."
    assert request["goals"] == ["Keep invoices exact"]
    assert request["source_krefs"] == out["source_krefs"] == [s["kref"] for s in request["sources"]]
    assert {"mode", "answer", "source_krefs", "hypotheses"} <= set(request["output_contract"])
    assert request["snapshot_fingerprint"] == fingerprint(request)
    leads = {lead["kind"]: lead for lead in out["insight_brief"]["candidates"]}
    assert leads["decision_review"]["source_krefs"] == [stored["decision"]["revision_kref"]]
    assert leads["changed_premise"]["missing_source_krefs"] == [REPLACED]  # named, not read
    assert "insight_brief" not in plain and "synthesis_request" not in plain


def test_learned_sources_add_experiences_to_the_request_only(app: InProcess, stored: dict[str, Any]) -> None:
    query = "what did we learn from the Postgres billing migration?"
    plain = run(app, "kumiho_memory_engage", query=query, include_insights=True)
    out = run(app, "kumiho_memory_engage", query=query, include_insights=True, include_learned_sources=True)
    lesson = stored["lesson"]["revision_kref"]
    assert out["learned_source_status"]["status"] == "ready"
    assert out["learned_source_status"]["source_krefs"] == [lesson]
    assert out["synthesis_request"]["source_krefs"][0] == lesson  # learned sources come first
    assert lesson not in out["source_krefs"] and out["results"] == plain["results"]  # recall itself unchanged
    assert "learned_source_status" not in plain


def test_learned_sources_without_include_insights_are_refused(app: InProcess) -> None:
    error = refused(app, "kumiho_memory_engage", query="billing database", include_learned_sources=True)
    assert error["field"] == "include_learned_sources"
    assert error["message"].startswith("include_learned_sources: requires include_insights=true")


def test_context_and_goals_without_include_insights_are_accepted_and_named_unused(app: InProcess) -> None:
    """Kumiho's clients may send current_context on every engage: it is no error, and the answer says it
    changed nothing (only the insight request reads it)."""
    query = "billing database choice"
    plain = run(app, "kumiho_memory_engage", query=query, limit=3)
    out = run(app, "kumiho_memory_engage", query=query, limit=3, current_context="We are mid-migration.",
              goals=["Ship on Friday"])
    reason = "only the insight request (include_insights: true) reads it"
    assert out["unused"] == {"current_context": reason, "goals": reason}
    assert out["results"] == plain["results"] and out["context"] == plain["context"]
    assert "synthesis_request" not in out and "unused" not in plain
    alone = run(app, "kumiho_memory_engage", query=query, limit=3, current_context="We are mid-migration.")
    assert alone["unused"] == {"current_context": reason}
    used = run(app, "kumiho_memory_engage", query=query, limit=3, include_insights=True,
               current_context="We are mid-migration.")
    assert "unused" not in used and used["synthesis_request"]["current_context"] == "We are mid-migration."


def test_engage_reports_its_payload_size_and_the_time_of_each_stage(app: InProcess) -> None:
    out = run(app, "kumiho_memory_engage", query="billing database choice for the service")
    assert out["count"] >= 1
    size = out.pop("approx_payload_tokens")
    assert size == len(json.dumps(out, ensure_ascii=False)) // 4 and size > out["approx_tokens"]
    timing = out["timing_ms"]
    assert {"retrieval", "search", "revisions", "context_assembly", "total"} <= set(timing)
    assert timing["search"] <= timing["retrieval"] <= timing["total"]


def test_fulltext_adds_each_results_artifacts_when_asked(app: InProcess, stored: dict[str, Any]) -> None:
    out = run(app, "kumiho_fulltext_search", query="billing invoice import", include_artifact_metadata=True)
    stale = stored["stale"]
    entry = next(r for r in out["results"] if r["item"]["kref"] == stale["item_kref"])
    assert [a["kref"] for a in entry["artifacts"]] == [stale["artifact_kref"]]
    assert entry["artifacts"][0]["revision_kref"] == stale["revision_kref"]
    assert Path(entry["artifacts"][0]["location"]).read_text().count(STALE) >= 1
    assert "revision" not in entry  # include_revision_metadata is its own switch
    plain = run(app, "kumiho_fulltext_search", query="billing invoice import")
    assert all("artifacts" not in r for r in plain["results"])


def test_fulltext_accepts_an_auth_token_and_ignores_it(app: InProcess) -> None:
    plain = run(app, "kumiho_fulltext_search", query="billing database")
    with_token = run(app, "kumiho_fulltext_search", query="billing database", auth_token="kumiho-cloud-token")
    # like any credential-named argument it is replaced before the call runs, and the answer says so
    assert with_token.pop("redacted") and with_token == plain and plain["count"] >= 1


def test_operator_engage_adds_keywords_and_topics_to_the_query(app: InProcess, stored: dict[str, Any]) -> None:
    out = run(app, "memory_engage", query="billing", keywords=["Postgres"], topics=["database"], min_score=0.0)
    decision = stored["decision"]["revision_kref"]
    assert out["source_krefs"][0] == decision and out["min_score"] >= 0.0
    latest = run(app, "memory_retrieve", query="billing service", space_paths=["billing"], mode="latest", limit=3)
    assert latest["created_at"] == sorted(latest["created_at"], reverse=True) and latest["mode"] == "latest"


def test_a_deprecated_memory_leaves_fulltext_and_recall_unless_asked_for(app: InProcess) -> None:
    async def steps(session: Any) -> dict[str, Any]:
        stored = await call(session, "kumiho_memory_store", title="Quartz kiln firing notes",
                            user_text="The quartz kiln fires at 1100 degrees on Tuesdays.", space_path="studio")
        await call(session, "kumiho_deprecate_item", item_kref=stored["item_kref"])
        return {"item": stored["item_kref"],
                "fulltext": await call(session, "kumiho_fulltext_search", query="quartz kiln firing"),
                "with_deprecated": await call(session, "kumiho_fulltext_search", query="quartz kiln firing",
                                              include_deprecated=True),
                "recall": await call(session, "kumiho_memory_recall", query="quartz kiln firing")}

    out = in_http_session(app.base_url, steps)
    assert out["item"] not in {r["item"]["kref"] for r in out["fulltext"]["results"]}
    assert out["item"] not in {r["item_kref"] for r in out["recall"]["results"]}
    assert out["item"] in {r["item"]["kref"] for r in out["with_deprecated"]["results"]}


def test_retrieve_reads_kumihos_words_for_its_modes_and_refuses_others(app: InProcess,
                                                                        stored: dict[str, Any]) -> None:
    """The input normalises the mode ("Most Recent" is latest, "oldest" is first; none lets the query say it);
    a word that is no mode is refused before anything is read, by both retrieve tools."""
    for tool in ("kumiho_memory_retrieve", "memory_retrieve"):
        assert run(app, tool, query="billing", mode="Most Recent")["mode"] == "latest"
        assert run(app, tool, query="billing", mode="oldest")["mode"] == "first"
        assert run(app, tool, query="the first billing decision", mode="")["mode"] == "first"
        assert run(app, tool, query="billing decision", mode="")["mode"] == "search"
        error = refused(app, tool, query="billing", mode="sideways")
        assert error["field"] == "mode" and error["message"] == (
            "mode: 'sideways' is not a retrieve mode; use search, latest or first")
    # an empty kind is the default kind: the conversation memories are found
    found = run(app, "kumiho_memory_retrieve", query="billing database choice", memory_item_kind="")
    assert stored["decision"]["item_kref"] in found["item_krefs"]


def test_the_operators_store_refuses_a_blank_title(app: InProcess) -> None:
    error = refused(app, "memory_store", title="   ", user_text="A memory without a name.")
    assert error == {"code": "invalid_argument", "message": "title: give the memory a title", "field": "title"}
