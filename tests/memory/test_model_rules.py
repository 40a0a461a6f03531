"""The pure parts of the model-backed work: Dream State's guardrails and answer parsing, the transcript
the summariser reads, the stored summary text, and token budgets from schemas."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from appliance.core.model import Revision
from appliance.core.ports import answer_budget
from appliance.errors import InvalidArgument
from appliance.memory import consolidation
from appliance.memory.dream import Assessment, DreamParams, assessment_schema, evidence_of, guard, parse_assessments

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def revision(name: str, *, days: float = 30, tags: tuple[str, ...] = ("latest",), **meta: str) -> Revision:
    created = (NOW - timedelta(days=days)).isoformat()
    return Revision(f"kref://P/s/{name}.conversation?r=1", f"kref://P/s/{name}.conversation", 1, list(tags),
                    dict(meta), created, created, "local", "local", False, None)


def test_each_guard_keeps_its_memory() -> None:
    young = revision("young", days=2)
    official = revision("official", evidence_level="official")
    corroborated = revision("corroborated", tags=("latest", "evidence:corroborated"))
    linked = revision("linked")
    published = revision("published", tags=("latest", "published"))
    free = revision("free")
    proposals = [(r, Assessment(0, relevance=1, deprecate=True, reason="dup")) for r in
                 (young, official, corroborated, linked, published, free)]
    verdict = guard(proposals, DreamParams("P", max_deprecation_ratio=0.5), NOW, {linked.kref}, 6)
    assert [r.kref for r, _ in verdict.deprecate] == [free.kref]
    assert {g["guard"] for g in verdict.guarded} == {"min_age", "evidence", "reference", "published"}
    allowed = guard(proposals[4:5], DreamParams("P", allow_published_deprecation=True), NOW, set(), 6)
    assert [r.kref for r, _ in allowed.deprecate] == [published.kref]


def test_corroborated_memories_need_a_stated_reason() -> None:
    memory = revision("c", evidence_level="corroborated")
    short = guard([(memory, Assessment(0, deprecate=True, reason="old"))], DreamParams("P"), NOW, set(), 2)
    stated = guard([(memory, Assessment(0, deprecate=True, reason="replaced by the May 16 decision"))],
                   DreamParams("P"), NOW, set(), 2)
    assert short.deprecate == [] and len(stated.deprecate) == 1


def test_the_ratio_keeps_the_most_relevant_and_never_rounds_up() -> None:
    memories = [revision(f"m{i}") for i in range(5)]
    proposals = [(m, Assessment(i, relevance=9 - i, deprecate=True)) for i, m in enumerate(memories)]
    verdict = guard(proposals, DreamParams("P", max_deprecation_ratio=0.5), NOW, set(), 5)
    assert [r.kref for r, _ in verdict.deprecate] == [memories[4].kref, memories[3].kref]  # least relevant
    assert guard(proposals[:1], DreamParams("P", max_deprecation_ratio=0.5), NOW, set(), 1).deprecate == []


def test_bad_parameters_name_their_field() -> None:
    with pytest.raises(InvalidArgument) as caught:
        DreamParams("P", max_deprecation_ratio=0.05)
    assert caught.value.field == "max_deprecation_ratio"
    with pytest.raises(InvalidArgument):
        DreamParams("P", batch_size=0)


def test_assessments_are_read_by_position_with_clean_tags() -> None:
    answer = {"assessments": [
        {"title": "a", "verdict": "keep", "reason": "", "relevance": 3, "tags": ["Release Dates!", "published",
                                                                    "evidence:official", "x"],
         "related": [0, 1, 7], "relationship": "REFERENCED",
         "metadata_updates": [{"key": "topic", "value": "release"}, {"key": "title", "value": "no"}]},
        {"title": "b", "verdict": "superseded", "reason": "dup", "relevance": 1, "tags": [], "related": [],
         "relationship": ""},
        {"title": "c", "verdict": "trivial", "reason": "", "relevance": 1, "tags": [], "related": [],
         "relationship": ""}]}
    found, dropped = parse_assessments(answer, 2)
    assert dropped == 1 and [a.index for a in found] == [0, 1] and found[1].deprecate
    assert found[0].tags == ["release-dates"] and found[0].related == [1]
    assert found[0].metadata == {"topic": "release"}  # a memory's own content keys are protected
    schema = assessment_schema(3)["properties"]["assessments"]
    assert schema["minItems"] == schema["maxItems"] == 3  # one entry per memory: small models stop early


def test_evidence_is_the_stronger_of_metadata_and_tag() -> None:
    assert evidence_of(revision("a", tags=("evidence:official",), evidence_level="unverified")) == "official"
    assert evidence_of(revision("b")) == ""


def test_the_transcript_keeps_the_start_and_the_end_of_a_long_session() -> None:
    messages = [("user", f"message number {i} " + "x" * 80) for i in range(200)]
    text = consolidation.transcript(messages, budget=2000)
    assert len(text) <= 2000 and "message number 0 " in text and "message number 199 " in text
    assert "messages omitted" in text and "message number 100 " not in text
    assert consolidation.transcript([("user", "hi  there\nfriend")]) == "user: hi there friend"


def test_the_stored_summary_has_its_sections() -> None:
    text = consolidation.summary_text({"summary": "Moved to Debian.", "events": [
        {"when": "unknown", "event": "migration"}, {"when": "2026-03-14", "event": "cut-over"}],
        "knowledge": {"facts": ["port 5432", "port 5432"], "decisions": [{"decision": "Debian 12"}]},
        "implications": []})
    assert text == ("Moved to Debian.\n\nKey events:\n- migration\n- [2026-03-14] cut-over\n\n"
                    "Key facts:\n- port 5432\n\nDecisions:\n- Debian 12")


def test_token_budgets_cover_the_longest_answer_a_schema_allows() -> None:
    assert answer_budget({"type": "object", "properties": {"a": {"type": "string", "maxLength": 100}}}) >= 107
    small, large = answer_budget(assessment_schema(2)), answer_budget(assessment_schema(20))
    assert large > 9 * small > 0
    assert answer_budget(consolidation.SUMMARY_SCHEMA) >= 80 + 600 + 3 * 30 + 4 * 40 + 3 * 160 + 2 * 160 + 2 * 160
