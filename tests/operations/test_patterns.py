"""Experiences, outcomes and patterns through the official MCP client over real HTTP (in-process appliance,
real Kùzu and LanceDB in a tmp dir): record an experience (twice: the second stores nothing), its outcome,
prepare a pattern request, store a candidate (a tampered one is refused), check it (fresh, then stale after
a source gets a new revision), and validate insight answers; malformed calls get the error shape."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from appliance.core import insights
from tests.inprocess import InProcess, serve_in_process
from tests.mcp_api.clients import call, in_http_session

PROJECT = "CognitiveMemory"
SPACE = f"/{PROJECT}/experiences"


def experience(name: str, **changes: Any) -> dict[str, Any]:
    return {"experience_id": f"release-{name}", "title": f"Pilot before the {name} rollout",
            "situation": "A small team faced an uncertain deployment of the billing service.",
            "goal": "Release without an outage", "decision": "Run a one-week pilot with two customers",
            "rationale": "Observe the operating cost before committing", "expected_outcome": "Lower rollout risk",
            "alternatives": ["Broad rollout", "Delay the release"], "applicability_conditions": ["Small team"],
            "origin": "user", "decision_state": "accepted", **changes}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with serve_in_process(tmp_path_factory.mktemp("patterns") / "data", None) as running:
        yield running


def run(app: InProcess, steps: Any) -> Any:
    return in_http_session(app.base_url, steps)


def test_experience_outcome_pattern_lifecycle(app: InProcess) -> None:
    async def steps(session: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["first"] = await call(session, "kumiho_memory_record_experience", record=experience("march"))
        out["again"] = await call(session, "kumiho_memory_record_experience", record=experience("march"))
        out["second"] = await call(session, "kumiho_memory_record_experience", record=experience("april"),
                                   space_path="experiences")
        exp = out["first"]["revision_kref"]
        out["outcome"] = await call(session, "kumiho_memory_record_outcome", experience_kref=exp, outcome={
            "observed_outcome": "The pilot found a cost spike; the rollout waited a week.",
            "observed_at": "2026-04-02T09:00:00Z", "outcome_status": "mixed", "acceptance": "accepted"})
        out["outcome_again"] = await call(session, "kumiho_memory_record_outcome", experience_kref=exp, outcome={
            "observed_outcome": "The pilot found a cost spike; the rollout waited a week.",
            "observed_at": "2026-04-02T09:00:00Z", "outcome_status": "mixed", "acceptance": "accepted"})
        out["outcome_edges"] = await call(session, "kumiho_get_edges", revision_kref=out["outcome"]["revision_kref"],
                                          direction="outgoing")
        sources = [exp, out["second"]["revision_kref"], out["outcome"]["revision_kref"]]
        request = await call(session, "kumiho_memory_prepare_patterns", source_krefs=sources, space_paths=[SPACE])
        out["request"] = request
        candidate = {"kind": "recurring_pattern", "title": "Pilot before broad rollouts",
                     "hypothesis": "A short pilot may reveal operating costs before a broad rollout.",
                     "applicability_conditions": ["Operating cost is uncertain"], "counterexamples": [],
                     "source_krefs": sources}
        out["stored"] = await call(session, "kumiho_memory_store_pattern", request=request, candidate=candidate,
                                   space_path="patterns")
        out["stored_again"] = await call(session, "kumiho_memory_store_pattern", request=request,
                                         candidate=candidate, space_path="patterns")
        foreign = {**candidate, "source_krefs": [*sources[:2], "kref://CognitiveMemory/other/x.experience?r=1"]}
        out["foreign"] = await call(session, "kumiho_memory_store_pattern", request=request, candidate=foreign,
                                    space_path="patterns")
        tampered = copy.deepcopy(request)
        tampered["sources"][0]["text"]["decision"] = "Roll out to everyone at once"
        out["tampered"] = await call(session, "kumiho_memory_store_pattern", request=tampered, candidate=candidate,
                                     space_path="patterns")
        pattern = out["stored"]["revision_kref"]
        scopes = [SPACE, f"/{PROJECT}/patterns"]
        out["fresh"] = await call(session, "kumiho_memory_check_pattern", pattern_kref=pattern, space_paths=scopes)
        out["narrow"] = await call(session, "kumiho_memory_check_pattern", pattern_kref=pattern,
                                   space_paths=[f"/{PROJECT}/patterns"])
        # a correction of the second experience: its item gets revision 2, the pinned r=1 is no longer current
        out["revised"] = await call(session, "kumiho_memory_reflect", session_id="s-patterns", response="Noted.",
                                    captures=[{"type": "correction", "title": "The April pilot ran two weeks",
                                               "content": "The April pilot ran two weeks, not one.",
                                               "revises": out["second"]["revision_kref"]}])
        out["stale"] = await call(session, "kumiho_memory_check_pattern", pattern_kref=pattern, space_paths=scopes)
        out["after_change"] = await call(session, "kumiho_memory_store_pattern", request=request,
                                         candidate={**candidate, "title": "Pilot first"}, space_path="patterns")
        return out

    out = run(app, steps)
    first = out["first"]
    assert first["idempotent"] is False and first["belief_promoted"] is False
    assert first["space_path"] == f"{PROJECT}/experiences" and first["item_kref"].endswith(".experience")
    assert len(first["deduplication_key"]) == 64 and first["record"]["record_id"] == first["deduplication_key"]
    assert first["record"]["decision"] == "Run a one-week pilot with two customers"
    again = out["again"]
    assert again["idempotent"] is True and again["revision_kref"] == first["revision_kref"]
    assert again["deduplication_key"] == first["deduplication_key"]
    assert again["record"] == first["record"]  # the stored snapshot, recorded_at of the first call included
    assert out["second"]["deduplication_key"] != first["deduplication_key"]

    outcome = out["outcome"]
    assert outcome["record"]["record_type"] == "outcome" and outcome["idempotent"] is False
    assert outcome["record"]["observed_at"] == "2026-04-02T09:00:00+00:00"
    assert outcome["record"]["experience_kref"] == first["revision_kref"]
    assert outcome["space_path"] == first["space_path"] and outcome["edges_created"] == [first["revision_kref"]]
    assert out["outcome_again"]["idempotent"] is True
    assert out["outcome_again"]["revision_kref"] == outcome["revision_kref"]
    assert [(e["edge_type"], e["target_kref"]) for e in out["outcome_edges"]["edges"]] == \
        [("DERIVED_FROM", first["revision_kref"])]

    request = out["request"]
    assert request["status"] == "ready" and request["space_paths"] == [SPACE]
    assert request["source_krefs"] == [first["revision_kref"], out["second"]["revision_kref"],
                                       outcome["revision_kref"]]
    assert [s["record_type"] for s in request["sources"]] == ["experience", "experience", "outcome"]
    assert request["sources"][0]["text"]["goal"] == "Release without an outage"
    assert request["limits"]["max_sources"] == 12 and "source_krefs" in request["output_contract"]
    assert len(request["snapshot_id"]) == 64

    stored = out["stored"]
    assert stored["status"] == "stored_proposal" and stored["idempotent"] is False
    assert stored["item_kref"].endswith(".pattern_candidate") and stored["space_path"] == f"{PROJECT}/patterns"
    assert stored["candidate"]["evidence_level"] == "unverified" and stored["candidate"]["inferred"] is True
    assert stored["graph_links_verified"] is True and sorted(stored["edges_created"]) == sorted(request["source_krefs"])
    assert out["stored_again"]["idempotent"] is True
    assert out["stored_again"]["revision_kref"] == stored["revision_kref"]

    foreign = out["foreign"]["error"]
    assert foreign["code"] == "invalid_argument" and foreign["field"] == "candidate.source_krefs[2]"
    tampered = out["tampered"]["error"]
    assert tampered["code"] == "invalid_argument" and tampered["field"] == "request.snapshot_id"

    fresh = out["fresh"]
    assert fresh["status"] == "reviewable" and fresh["stale_sources"] == [] and fresh["missing_source_krefs"] == []
    assert fresh["applicability"] == "unknown" and fresh["semantic_support_verified"] is False
    assert out["narrow"]["status"] == "unknown" and len(out["narrow"]["missing_source_krefs"]) == 3
    assert out["revised"]["captures_stored"] == 1
    stale = out["stale"]
    assert stale["status"] == "stale"
    assert stale["stale_sources"] == [{"kref": out["second"]["revision_kref"], "reason": "superseded"},
                                      {"kref": out["second"]["revision_kref"], "reason": "newer_revision"}]
    changed = out["after_change"]["error"]
    assert changed["code"] == "conflict" and changed["field"] == "candidate.source_krefs[1]"


def test_a_recurring_pattern_needs_two_experiences_and_prepare_checks_its_sources(app: InProcess) -> None:
    async def steps(session: Any) -> dict[str, Any]:
        one = await call(session, "kumiho_memory_record_experience", record=experience("solo"),
                         space_path="solo")
        space = f"/{PROJECT}/solo"
        request = await call(session, "kumiho_memory_prepare_patterns", source_krefs=[one["revision_kref"]],
                             space_paths=[space])
        lesson = {"kind": "recurring_pattern", "title": "Pilot", "hypothesis": "Pilots help.",
                  "applicability_conditions": ["Small team"], "counterexamples": [],
                  "source_krefs": [one["revision_kref"]]}
        return {
            "recurring": await call(session, "kumiho_memory_store_pattern", request=request, candidate=lesson,
                                    space_path="solo"),
            "lesson": await call(session, "kumiho_memory_store_pattern", request=request,
                                 candidate={**lesson, "kind": "conditional_lesson"}, space_path="solo"),
            "outside": await call(session, "kumiho_memory_prepare_patterns", source_krefs=[one["revision_kref"]],
                                  space_paths=[f"/{PROJECT}/elsewhere"]),
            "relative": await call(session, "kumiho_memory_prepare_patterns", source_krefs=[one["revision_kref"]],
                                   space_paths=["solo"]),
            "unpinned": await call(session, "kumiho_memory_prepare_patterns",
                                   source_krefs=[one["item_kref"]], space_paths=[space]),
            "missing": await call(session, "kumiho_memory_prepare_patterns",
                                  source_krefs=[one["revision_kref"].replace("?r=1", "?r=9")], space_paths=[space]),
            "not_experience": await call(session, "kumiho_memory_check_pattern", pattern_kref=one["revision_kref"],
                                         space_paths=[space]),
            "no_parent": await call(session, "kumiho_memory_record_outcome",
                                    experience_kref=f"kref://{PROJECT}/solo/nothing.experience?r=1",
                                    outcome={"observed_outcome": "x", "observed_at": "2026-04-02T09:00:00Z"}),
        }

    out = run(app, steps)
    assert out["recurring"]["error"]["field"] == "candidate.source_krefs"
    assert "two distinct experiences" in out["recurring"]["error"]["message"]
    assert out["lesson"]["status"] == "stored_proposal"
    assert out["outside"]["error"]["field"] == "source_krefs[0]"
    assert out["relative"]["error"]["field"] == "space_paths[0]"
    assert out["unpinned"]["error"] == {"code": "invalid_argument", "field": "source_krefs[0]",
                                        "message": out["unpinned"]["error"]["message"]}
    assert "?r=N" in out["unpinned"]["error"]["message"]
    assert out["missing"]["error"]["code"] == "not_found" and out["missing"]["error"]["field"] == "source_krefs[0]"
    assert out["not_experience"]["error"]["field"] == "pattern_kref"
    assert out["no_parent"]["error"]["code"] == "not_found"
    assert out["no_parent"]["error"]["field"] == "experience_kref"


def test_snapshots_stay_out_of_recall_and_a_deprecated_source_makes_the_pattern_stale(app: InProcess) -> None:
    async def steps(session: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        one = await call(session, "kumiho_memory_record_experience", space_path="zeppelins", record=experience(
            "zeppelin", title="Zeppelin hangar lease renegotiation", decision="Renegotiate the zeppelin hangar lease"))
        space = f"/{PROJECT}/zeppelins"
        request = await call(session, "kumiho_memory_prepare_patterns", source_krefs=[one["revision_kref"]],
                             space_paths=[space])
        stored = await call(session, "kumiho_memory_store_pattern", request=request, space_path="zeppelins",
                            candidate={"kind": "conditional_lesson", "title": "Renegotiate zeppelin leases early",
                                       "hypothesis": "Early talks may lower the zeppelin hangar cost.",
                                       "applicability_conditions": ["A lease ends within a year"],
                                       "counterexamples": ["The landlord refused once"],
                                       "source_krefs": [one["revision_kref"]]})
        out["stored"] = stored
        await call(session, "kumiho_memory_store", user_text="The zeppelin hangar lease ends in May.",
                   title="Zeppelin hangar lease", space_path="zeppelins")
        out["engage"] = await call(session, "kumiho_memory_engage", query="zeppelin hangar lease")
        out["found"] = await call(session, "kumiho_fulltext_search", query="zeppelin hangar lease")
        out["fresh"] = await call(session, "kumiho_memory_check_pattern", pattern_kref=stored["revision_kref"],
                                  space_paths=[space])
        await call(session, "kumiho_deprecate_item", item_kref=one["item_kref"])
        out["stale"] = await call(session, "kumiho_memory_check_pattern", pattern_kref=stored["revision_kref"],
                                  space_paths=[space])
        out["found_after"] = await call(session, "kumiho_fulltext_search", query="zeppelin hangar lease")
        await call(session, "kumiho_deprecate_item", item_kref=stored["item_kref"])
        out["pattern_gone"] = await call(session, "kumiho_memory_check_pattern",
                                         pattern_kref=stored["revision_kref"], space_paths=[space])
        out["ids"] = (one["item_kref"], stored["item_kref"])
        return out

    out = run(app, steps)
    experience_item, pattern_item = out["ids"]
    assert out["stored"]["candidate"]["counterexample_status"] == "reported"
    # snapshots and proposals are not memories engage hands to an agent; the stored memory is
    assert [r["title"] for r in out["engage"]["results"]] == ["Zeppelin hangar lease"]
    assert {experience_item, pattern_item} <= {r["item"]["kref"] for r in out["found"]["results"]}
    assert out["fresh"]["status"] == "reviewable"
    assert out["stale"]["status"] == "stale"
    assert out["stale"]["stale_sources"] == [{"kref": out["stored"]["candidate"]["source_krefs"][0],
                                              "reason": "deprecated"}]
    after = {r["item"]["kref"] for r in out["found_after"]["results"]}
    assert pattern_item in after and experience_item not in after
    assert {"kref": out["stored"]["revision_kref"], "reason": "pattern_deprecated"} in \
        out["pattern_gone"]["stale_sources"]


def test_validate_insight_response_checks_citations_against_the_request(app: InProcess) -> None:
    memories = [{"kref": "kref://CognitiveMemory/decisions/grpc.conversation?r=2", "title": "Chose gRPC",
                 "summary": "We chose gRPC for the transport service.", "type": "decision",
                 "created_at": "2026-03-27T10:00:00+00:00"}]
    request = insights.synthesis_request("which protocol?", memories, current_context="designing a new service",
                                         goals=["keep latency low"])
    good = {"mode": "hypothesis", "answer": "gRPC again, probably.", "source_krefs": [memories[0]["kref"]],
            "hypotheses": [{"statement": "Streaming needs may recur.", "source_krefs": [memories[0]["kref"]],
                            "conditions": ["The new service streams"], "alternative_explanation": "Team habit",
                            "verification_step": "Ask whether it streams", "caveats": []}]}
    foreign = "kref://CognitiveMemory/decisions/rest.conversation?r=1"
    bad = {**good, "answer": f"REST, as {foreign} says.", "source_krefs": [memories[0]["kref"], foreign]}

    async def steps(session: Any) -> dict[str, Any]:
        return {
            "good": await call(session, "kumiho_memory_validate_insight_response", request=request, response=good),
            "bad": await call(session, "kumiho_memory_validate_insight_response", request=request, response=bad),
            "direct": await call(session, "kumiho_memory_validate_insight_response", request=request,
                                 response={"mode": "direct", "answer": "gRPC.", "source_krefs": [],
                                           "hypotheses": good["hypotheses"]}),
            "changed": await call(session, "kumiho_memory_validate_insight_response",
                                  request={**request, "query": "something else"}, response=good),
        }

    out = run(app, steps)
    assert out["good"]["valid"] is True and out["good"]["errors"] == []
    assert out["good"]["validation_scope"] == "structural_only"
    assert out["bad"]["valid"] is False and out["bad"]["unsupported_source_krefs"] == [foreign]
    assert out["direct"]["valid"] is False
    assert any(e.startswith("response.hypotheses") for e in out["direct"]["errors"])
    assert any(e.startswith("response.hypotheses[0].source_krefs") for e in out["direct"]["errors"])
    assert out["changed"]["valid"] is False
    assert any(e.startswith("request.snapshot_fingerprint") for e in out["changed"]["errors"])


@pytest.mark.parametrize(("tool", "arguments", "field"), [
    ("kumiho_memory_record_experience", {"record": experience("x"), "project": "Other"}, "project"),
    ("kumiho_memory_record_experience", {"record": {**experience("x"), "mood": "good"}}, "record.mood"),
    ("kumiho_memory_record_experience", {"record": experience("x", title="t" * 161)}, "record.title"),
    ("kumiho_memory_record_experience", {"record": experience("x", situation="  ")}, "record.situation"),
    ("kumiho_memory_record_experience", {"record": experience("x", experience_id="bad id")},
     "record.experience_id"),
    ("kumiho_memory_record_experience", {"record": experience("x", origin="rumour")}, "record.origin"),
    ("kumiho_memory_record_experience", {"record": experience("x", alternatives=["a"] * 13)},
     "record.alternatives"),
    ("kumiho_memory_record_experience", {"record": experience("x", observed_outcome="It worked")},
     "record.observed_at"),
    ("kumiho_memory_record_experience", {"record": experience("x", observed_outcome="It worked",
                                                              observed_at="yesterday")}, "record.observed_at"),
    ("kumiho_memory_record_experience", {"record": experience("x", source_krefs=["kref://P/a/b.conversation"])},
     "record.source_krefs[0]"),
    ("kumiho_memory_record_experience", {"record": experience("x", source_krefs=[
        "kref://CognitiveMemory/a/missing.conversation?r=1"])}, "record.source_krefs[0]"),
    ("kumiho_memory_record_outcome", {"experience_kref": "kref://CognitiveMemory/e/x.experience?r=1",
                                      "outcome": {"observed_outcome": "x"}}, "outcome.observed_at"),
    ("kumiho_memory_record_outcome", {"experience_kref": "k" * 513, "outcome": {}}, "experience_kref"),
    ("kumiho_memory_prepare_patterns", {"source_krefs": [], "space_paths": [SPACE]}, "source_krefs"),
    ("kumiho_memory_prepare_patterns", {"source_krefs": ["kref://a/b.experience?r=1"] * 13,
                                        "space_paths": [SPACE]}, "source_krefs"),
    ("kumiho_memory_prepare_patterns", {"source_krefs": ["kref://a/b.experience?r=1"], "space_paths": []},
     "space_paths"),
    ("kumiho_memory_prepare_patterns", {"source_krefs": ["kref://a/b.experience?r=1"], "space_paths": [SPACE],
                                        "limit": 3}, "limit"),
    ("kumiho_memory_store_pattern", {"request": {}, "candidate": {}}, "space_path"),
    ("kumiho_memory_store_pattern", {"request": {"schema": "x"}, "candidate": {}, "space_path": "p"},
     "request.schema"),
    ("kumiho_memory_check_pattern", {"pattern_kref": "kref://CognitiveMemory/p/x.pattern_candidate?r=1",
                                     "space_paths": ["/" + "s" * 256]}, "space_paths[0]"),
    ("kumiho_memory_check_pattern", {"pattern_kref": "kref://CognitiveMemory/p/x.pattern_candidate?r=1",
                                     "space_paths": []}, "space_paths"),
    ("kumiho_memory_validate_insight_response", {"request": {}, "response": "not an object"}, "response"),
])
def test_malformed_calls_get_the_error_shape_naming_the_field(app: InProcess, tool: str, arguments: dict[str, Any],
                                                              field: str) -> None:
    async def steps(session: Any) -> Any:
        result = await session.call_tool(tool, arguments)
        return result

    result = run(app, steps)
    import json

    payload = json.loads(result.content[0].text)
    assert result.is_error is True, payload
    assert set(payload) == {"error"} and payload["error"]["field"] == field, payload
    assert "Traceback" not in payload["error"]["message"]
