"""The pure checks behind the experience and pattern tools: canonical snapshots and their deduplication key,
pattern requests and their digest, candidate validation, source health, and the insight answer contract."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from appliance.core import experiences, insights, patterns
from appliance.errors import InvalidArgument

FRESH = {"deprecated": False, "superseded": False, "newer_revision": False}


def record(name: str = "a", **changes: Any) -> dict[str, Any]:
    return {"experience_id": f"exp-{name}", "title": f" Pilot {name} ", "situation": "Uncertain deployment",
            "goal": "Release", "decision": "Run a pilot", "rationale": "Observe cost", "expected_outcome": "Less risk",
            "alternatives": ["Broad rollout", "Broad rollout"], **changes}


def test_a_normalised_experience_is_canonical_and_its_key_depends_on_content_only() -> None:
    one = experiences.normalize_experience(record())
    assert one["title"] == "Pilot a" and one["alternatives"] == ["Broad rollout"]
    assert one["origin"] == one["decision_state"] == one["outcome_status"] == one["acceptance"] == "unknown"
    assert experiences.normalize_experience(record(title="Pilot a"))["record_id"] == one["record_id"]
    assert experiences.normalize_experience(record(goal="Ship"))["record_id"] != one["record_id"]
    stored = {**one, "recorded_at": "2026-01-01T00:00:00+00:00"}
    assert experiences.decode({"experience_record": experiences.canonical(stored)}) == stored
    edited = {**stored, "decision": "Something else"}
    assert experiences.decode({"experience_record": experiences.canonical(edited)}) is None  # not evidence


@pytest.mark.parametrize(("changes", "field"), [
    ({"experience_id": "has space"}, "record.experience_id"),
    ({"goal": "   "}, "record.goal"),
    ({"alternatives": ["ok", " "]}, "record.alternatives[1]"),
    ({"observed_outcome": "It worked"}, "record.observed_at"),
    ({"observed_at": "2026-01-01T00:00:00Z"}, "record.observed_outcome"),
    ({"outcome_status": "success"}, "record.observed_outcome"),
    ({"observed_outcome": "It worked", "observed_at": "2026-01-01T00:00"}, "record.observed_at"),
    ({"source_krefs": ["kref://P/s/x.conversation"]}, "record.source_krefs[0]"),
    ({"source_krefs": ["kref://P/s/x.conversation?t=published"]}, "record.source_krefs[0]"),
    ({"situation": "x" * 2000, "goal": "x" * 2000, "decision": "x" * 2000, "rationale": "x" * 2000,
      "expected_outcome": "x" * 2000, "alternatives": ["y" * 2000 + str(i) for i in range(12)]}, "record"),
])
def test_a_bad_experience_is_refused_naming_the_field(changes: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        experiences.normalize_experience(record(**changes))
    assert caught.value.field == field and caught.value.message.startswith(field + ":")


def test_an_outcome_is_pinned_to_its_experience_and_stored_in_utc() -> None:
    outcome = experiences.normalize_outcome("kref://P/e/x.experience?r=2", {
        "observed_outcome": "Cost spike", "observed_at": "2026-04-02T11:00:00+02:00"})
    assert outcome["observed_at"] == "2026-04-02T09:00:00+00:00" and outcome["record_type"] == "outcome"
    with pytest.raises(InvalidArgument) as caught:
        experiences.normalize_outcome("kref://P/e/x.experience", {"observed_outcome": "x", "observed_at": "y"})
    assert caught.value.field == "experience_kref"


def snapshot(name: str, kind: str = "experience", state: dict[str, bool] | None = None) -> dict[str, Any]:
    ref = f"kref://P/exp/{name}.experience?r=1"
    found = experiences.normalize_experience(record(name)) if kind == "experience" else \
        experiences.normalize_outcome(f"kref://P/exp/{name}.experience?r=1",
                                      {"observed_outcome": "Cost spike", "observed_at": "2026-04-02T09:00:00Z"})
    if kind == "outcome":
        ref = f"kref://P/exp/{name}-outcome.experience?r=1"
    return patterns.snapshot(ref, found, "unverified", state or FRESH)


def candidate(request: dict[str, Any], **changes: Any) -> dict[str, Any]:
    return {"kind": "recurring_pattern", "title": "Pilot first", "hypothesis": "Pilots may reveal cost.",
            "applicability_conditions": ["Cost unknown"], "counterexamples": [],
            "source_krefs": request["source_krefs"], **changes}


def test_a_request_carries_its_digest_and_a_valid_candidate_becomes_an_unverified_proposal() -> None:
    request = patterns.prepare(["/P/exp"], [snapshot("a"), snapshot("b"), snapshot("a", "outcome")])
    assert request["status"] == "ready" and len(request["source_krefs"]) == 3
    assert request["snapshot_id"] == patterns.request_digest(request)
    clean = patterns.validate_candidate(request, candidate(request))
    assert clean["evidence_level"] == "unverified" and clean["decision_state"] == "proposal"
    assert clean["inferred"] is True and clean["snapshot_id"] == request["snapshot_id"]
    assert patterns.decode({"pattern_candidate": experiences.canonical(clean)}) == clean
    assert patterns.decode({"pattern_candidate": experiences.canonical({**clean, "title": "x"})}) is None


@pytest.mark.parametrize(("change", "field"), [
    (lambda r, c: r["sources"][0]["text"].update(decision="Something else"), "request.snapshot_id"),
    (lambda r, c: r.update(schema="other"), "request.schema"),
    (lambda r, c: c.update(source_krefs=["kref://P/other/x.experience?r=1"]), "candidate.source_krefs[0]"),
    (lambda r, c: c.update(kind="law"), "candidate.kind"),
    (lambda r, c: c.update(title="t" * 161), "candidate.title"),
    (lambda r, c: c.update(applicability_conditions=[]), "candidate.applicability_conditions"),
    (lambda r, c: c.update(counterexamples=["ok", ""]), "candidate.counterexamples[1]"),
    (lambda r, c: c.update(confidence=0.9), "candidate.confidence"),
    (lambda r, c: c.update(source_krefs=r["source_krefs"][:1]), "candidate.source_krefs"),  # one experience
    (lambda r, c: c.update(source_krefs=r["source_krefs"][2:]), "candidate.source_krefs"),  # outcome only
])
def test_a_candidate_is_checked_against_its_request(change: Any, field: str) -> None:
    request = patterns.prepare(["/P/exp"], [snapshot("a"), snapshot("b"), snapshot("a", "outcome")])
    request, proposed = copy.deepcopy(request), candidate(request)
    change(request, proposed)
    with pytest.raises(InvalidArgument) as caught:
        patterns.validate_candidate(request, proposed)
    assert caught.value.field == field


def test_a_request_too_large_drops_sources_from_the_end_and_says_so() -> None:
    long = {k: "w" * 2000 for k in ("situation", "goal", "decision", "rationale", "expected_outcome")}
    sources = []
    for i in range(12):
        found = experiences.normalize_experience(record(str(i), applicability_conditions=["c" * 400] * 5, **long))
        sources.append(patterns.snapshot(f"kref://P/exp/{i}.experience?r=1", found, "unverified", FRESH))
    request = patterns.prepare(["/P"], sources)
    assert len(experiences.canonical(request)) <= patterns.MAX_REQUEST_CHARS
    assert request["truncated"] is True and request["omitted_source_krefs"]
    assert len(request["source_krefs"]) + len(request["omitted_source_krefs"]) == 12
    patterns.verified_sources(request)  # what prepare returns is always accepted back


def test_health_prefers_stale_over_unknown_and_never_claims_applicability() -> None:
    assert patterns.health("p", [], {"a": [], "b": []})["status"] == "reviewable"
    assert patterns.health("p", [], {"a": [], "b": None})["status"] == "unknown"
    report = patterns.health("p", ["deprecated"], {"a": ["newer_revision"], "b": None})
    assert report["status"] == "stale" and report["applicability"] == "unknown"
    assert report["stale_sources"] == [{"kref": "a", "reason": "newer_revision"},
                                       {"kref": "p", "reason": "pattern_deprecated"}]
    assert report["missing_source_krefs"] == ["b"]


REF = "kref://P/d/grpc.conversation?r=2"


def answer(**changes: Any) -> dict[str, Any]:
    return {"mode": "hypothesis", "answer": "gRPC.", "source_krefs": [REF],
            "hypotheses": [{"statement": "Streaming recurs.", "source_krefs": [REF], "conditions": ["streams"],
                            "alternative_explanation": "habit", "verification_step": "ask", "caveats": []}],
            **changes}


def test_a_synthesis_request_is_bounded_pinned_and_fingerprinted() -> None:
    memories = [{"kref": REF, "title": "Chose gRPC", "summary": "s" * 20000, "type": "decision"},
                {"kref": "kref://P/d/unpinned.conversation", "title": "x"},
                {"kref": REF, "title": "duplicate"}]
    request = insights.synthesis_request("q" * 3000, memories, goals=["g"] * 10)
    assert request["source_krefs"] == [REF] and request["budget"]["omitted_sources"] == 2
    assert request["sources"][0]["truncated_fields"] == ["summary"]
    assert request["budget"]["source_chars"] <= insights.DEFAULT_SOURCE_CHARS
    assert len(request["query"]) == 2000 and len(request["goals"]) == 8
    assert request["snapshot_fingerprint"] == insights.fingerprint(request)
    assert tuple(request) == insights.REQUEST_KEYS
    assert insights.synthesis_request("q", [])["status"] == "no_sources"


@pytest.mark.parametrize(("response", "error"), [
    (answer(mode="guess"), "response.mode"),
    (answer(answer=" "), "response.answer"),
    (answer(hypotheses=[]), "response.hypotheses"),
    (answer(mode="direct"), "response.hypotheses"),
    (answer(source_krefs=[REF, REF]), "response.source_krefs"),
    (answer(source_krefs=[]), "response.hypotheses[0].source_krefs"),
    (answer(hypotheses=[{**answer()["hypotheses"][0], "conditions": []}]), "response.hypotheses[0].conditions"),
    (answer(answer="see kref://P/d/rest.conversation?r=1."), "response: cites krefs"),
])
def test_an_insight_answer_breaking_the_contract_is_reported(response: dict[str, Any], error: str) -> None:
    request = insights.synthesis_request("q", [{"kref": REF, "title": "Chose gRPC", "summary": "gRPC"}])
    assert insights.validate(request, answer())["valid"] is True
    report = insights.validate(request, response)
    assert report["valid"] is False and any(e.startswith(error) for e in report["errors"]), report["errors"]
    assert report["semantic_support_verified"] is False


def test_an_insight_answer_to_a_changed_request_is_invalid() -> None:
    request = insights.synthesis_request("q", [{"kref": REF, "title": "Chose gRPC", "summary": "gRPC"}])
    forged = {**request, "sources": [*request["sources"], {"kref": "kref://P/d/rest.conversation?r=1"}],
              "source_krefs": [*request["source_krefs"], "kref://P/d/rest.conversation?r=1"]}
    report = insights.validate(forged, answer(source_krefs=[REF, "kref://P/d/rest.conversation?r=1"]))
    assert report["valid"] is False
    assert report["errors"] == ["request.snapshot_fingerprint: the request was changed after engage made it; "
                                "pass it unchanged"]
