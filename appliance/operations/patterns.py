"""Experiences, outcomes and patterns: the keyless memory tools a host's own model drives. The appliance stores
and checks what the host extracted or proposed (appliance.core.experiences, .patterns, .insights); it never
calls a model for them and never promotes a snapshot or a proposal to a belief. Every input is closed
(unknown keys refused), as in Kumiho's reference schemas."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from appliance.operations import fields
from appliance.operations.definition import ClosedInput, Operation

Text = Annotated[str, Field(max_length=2000)]
Texts = Annotated[list[Text], Field(max_length=12)]
PinnedKref = Annotated[str, Field(max_length=512)]
PinnedKrefs = Annotated[list[PinnedKref], Field(max_length=12)]
AbsoluteSpaces = Annotated[list[Annotated[str, Field(max_length=256)]], Field(
    min_length=1, max_length=8, description="1-8 absolute spaces such as /CognitiveMemory/experiences")]
PatternSources = Annotated[list[PinnedKref], Field(
    min_length=1, max_length=12, description="1-12 pinned experience or outcome revision krefs")]
ObservedAt = Annotated[str, Field(max_length=64, description="when the outcome was observed: ISO-8601 with its "
                                                             "time zone, such as 2026-03-27T10:15:00+00:00")]
# Kumiho's schemas of the experience tools carry maxLength 2000 on these enums; kept so the schemas match.
Origin = Annotated[fields.Origin, Field(max_length=2000)]
DecisionState = Annotated[fields.DecisionState, Field(max_length=2000)]
OutcomeStatus = Annotated[Literal["success", "failure", "mixed", "unknown"], Field(max_length=2000)]
Acceptance = Annotated[Literal["accepted", "rejected", "unknown"], Field(max_length=2000)]
# A request or an answer the appliance produced (or checks): any JSON object, its size checked by the service.
PatternRequest = Annotated[dict[str, Any], Field(max_length=32)]
Candidate = Annotated[dict[str, Any], Field(max_length=16)]


class ExperienceRecord(ClosedInput):
    experience_id: str = Field(max_length=128)
    title: str = Field(max_length=160)
    situation: Text
    goal: Text
    decision: Text
    rationale: Text
    expected_outcome: Text
    alternatives: Texts | None = None
    applicability_conditions: Texts | None = None
    origin: Origin | None = None
    decision_state: DecisionState | None = None
    source_krefs: PinnedKrefs | None = None
    observed_outcome: Text | None = None
    observed_at: ObservedAt | None = None
    outcome_status: OutcomeStatus | None = None
    acceptance: Acceptance | None = None


class RecordExperienceInput(ClosedInput):
    record: ExperienceRecord
    space_path: str | None = Field(None, max_length=512)


class Outcome(ClosedInput):
    observed_outcome: Text
    observed_at: ObservedAt
    outcome_status: OutcomeStatus | None = None
    acceptance: Acceptance | None = None
    origin: Origin | None = None
    source_krefs: PinnedKrefs | None = None


class RecordOutcomeInput(ClosedInput):
    experience_kref: PinnedKref
    outcome: Outcome


class PreparePatternsInput(ClosedInput):
    source_krefs: PatternSources
    space_paths: AbsoluteSpaces


class StorePatternInput(ClosedInput):
    request: PatternRequest
    candidate: Candidate
    space_path: str = Field(max_length=512)


class CheckPatternInput(ClosedInput):
    pattern_kref: PinnedKref
    space_paths: AbsoluteSpaces


class ValidateInsightResponseInput(ClosedInput):
    request: PatternRequest
    response: Candidate


OPERATIONS: tuple[Operation, ...] = (
    Operation(
        "kumiho_memory_record_experience", "Record an experience",
        "Store an experience snapshot your model extracted from a piece of work: a stable experience_id (reuse "
        "it on retries), the situation, goal, decision, rationale and expected outcome; optionally alternatives, "
        "applicability conditions, the pinned source revisions and an outcome already observed. KEYLESS: no model "
        "call. Stored unpublished as kind `experience` with evidence:unverified, never promoted to a belief. "
        "Recording the same snapshot again stores nothing new (idempotent: true, the same deduplication_key).",
        RecordExperienceInput),
    Operation(
        "kumiho_memory_record_outcome", "Record an experience outcome",
        "Append what was actually observed after an experience, as a separate outcome snapshot linked "
        "(DERIVED_FROM) to the pinned experience revision (kref ...?r=N). observed_at is when it was observed, "
        "not when it is recorded; acceptance is not success. KEYLESS; does not change the experience or promote "
        "a belief. The same outcome again stores nothing new (idempotent: true).",
        RecordOutcomeInput),
    Operation(
        "kumiho_memory_prepare_patterns", "Prepare pattern evidence",
        "Read at most 12 pinned experience/outcome revisions within 1-8 absolute spaces (/Project/space) and "
        "return a bounded pattern request for YOUR model: the source snapshots, limits, the output contract and "
        "a snapshot_id. Propose a conditional lesson or recurring pattern from it, then pass the request "
        "unchanged with your candidate to kumiho_memory_store_pattern. Read-only, KEYLESS.",
        PreparePatternsInput, read_only=True, idempotent=True),
    Operation(
        "kumiho_memory_store_pattern", "Store a pattern candidate",
        "Store your model's pattern candidate {kind: conditional_lesson|recurring_pattern, title, hypothesis, "
        "applicability_conditions, counterexamples, source_krefs} after checking it against the unchanged "
        "request from kumiho_memory_prepare_patterns: citations only among its sources, bounds kept, and every "
        "cited source read again and unchanged. Stored unpublished as an inferred, unverified proposal, never "
        "a belief. KEYLESS. The same candidate again stores nothing new (idempotent: true).",
        StorePatternInput),
    Operation(
        "kumiho_memory_check_pattern", "Check pattern applicability",
        "Re-check a stored pattern proposal's sources within absolute space_paths: stale when a source was "
        "deprecated, superseded or got a newer revision; unknown when a source cannot be read there; otherwise "
        "reviewable. Checks source health only, never truth or applicability to a new question. Read-only, "
        "KEYLESS.",
        CheckPatternInput, read_only=True, idempotent=True),
    Operation(
        "kumiho_memory_validate_insight_response", "Validate insight citations",
        "Check your model's answer to engage's synthesis_request (include_insights: true) against that request: "
        "the request unchanged, the answer's shape (mode, answer, source_krefs, hypotheses) and every cited kref "
        "among the request's sources. Returns a validation report; valid means well-formed with allowed "
        "citations, not that the sources support it. Read-only, KEYLESS, no graph access.",
        ValidateInsightResponseInput, read_only=True, idempotent=True),
)
