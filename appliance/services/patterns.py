"""Experiences, outcomes and pattern proposals (the keyless tools a host's own model drives): snapshots and
proposals written through the memory writer (one transaction each, unpublished, ``evidence:unverified``),
sources read back from the graph. The checks themselves are pure (appliance.core.experiences, .patterns,
.insights); this service reads and writes.

Idempotency: a snapshot's item is named after its content digest (``record_id``; a proposal's
``candidate_id``), so recording the same thing again finds the item instead of writing a second one and
answers ``idempotent: true`` with what was stored the first time."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from appliance.core import experiences, insights, patterns
from appliance.core import kref as krefs
from appliance.core.model import Revision
from appliance.errors import AlreadyExists, Conflict, InvalidArgument, NotFound
from appliance.graph import GraphStore
from appliance.memory.client import Client
from appliance.memory.spaces import memory_item_name, project_for, space_of, storage_space
from appliance.memory.writer import Draft, MemoryWriter
from appliance.operations.patterns import (
    CheckPatternInput,
    PreparePatternsInput,
    RecordExperienceInput,
    RecordOutcomeInput,
    StorePatternInput,
    ValidateInsightResponseInput,
)

if TYPE_CHECKING:
    from appliance.services import Handler

EXPERIENCE_SPACE = "experiences"  # where record_experience writes without a space_path
EXPERIENCE_TAGS = ["experience", "evidence:unverified"]
PATTERN_TAGS = ["pattern-candidate", "inferred", "proposal", "evidence:unverified"]


class PatternService:
    def __init__(self, graph: GraphStore, writer: MemoryWriter) -> None:
        self.graph, self.writer = graph, writer

    def handlers(self) -> dict[str, Handler]:
        return {
            "kumiho_memory_record_experience": self.record_experience,
            "kumiho_memory_record_outcome": self.record_outcome,
            "kumiho_memory_prepare_patterns": self.prepare_patterns,
            "kumiho_memory_store_pattern": self.store_pattern,
            "kumiho_memory_check_pattern": self.check_pattern,
            "kumiho_memory_validate_insight_response": self.validate_insight_response,
        }

    # -- experiences and outcomes ------------------------------------------------------------------------
    def record_experience(self, args: RecordExperienceInput, client: Client) -> dict[str, Any]:
        record = experiences.normalize_experience(args.record.model_dump(exclude_none=True))
        self._existing_sources(record["source_krefs"], "record.source_krefs")
        project = project_for(None, client)
        space = storage_space(project, args.space_path or EXPERIENCE_SPACE)
        return self._store_snapshot(record, project, space, record["source_krefs"])

    def record_outcome(self, args: RecordOutcomeInput, client: Client) -> dict[str, Any]:
        record = experiences.normalize_outcome(args.experience_kref, args.outcome.model_dump(exclude_none=True))
        parent = self._revision(args.experience_kref, "experience_kref")
        found = experiences.decode(parent.metadata)
        if found is None or found["record_type"] != "experience":
            raise InvalidArgument("experience_kref: not an experience snapshot; pass the revision_kref that "
                                  "kumiho_memory_record_experience returned", field="experience_kref")
        self._existing_sources(record["source_krefs"], "outcome.source_krefs")
        parsed = krefs.parse(args.experience_kref)
        sources = list(dict.fromkeys([args.experience_kref, *record["source_krefs"]]))
        return self._store_snapshot(record, parsed.project, parsed.space_path, sources)

    def _store_snapshot(self, record: dict[str, Any], project: str, space: str,
                        sources: list[str]) -> dict[str, Any]:
        key = record["record_id"]
        title = record.get("title") or f"Outcome: {record['observed_outcome']}"[:160]
        name = memory_item_name(title, key)
        found = self._stored(space, name, experiences.KIND, "record_id", key)
        if found is None:
            stored = {**record, "recorded_at": self._now()}
            state = record.get("decision_state", "unknown")
            draft = Draft(
                project=project, space=space, kind=experiences.KIND, memory_type=record["record_type"],
                title=title, summary=record.get("observed_outcome") or record.get("decision", ""),
                assistant_text=json.dumps(stored, ensure_ascii=False, indent=1),
                tags=EXPERIENCE_TAGS + (["proposal"] if state in ("proposal", "proposed") else []),
                metadata={"experience_record": experiences.canonical(stored), "record_id": key,
                          "schema": experiences.SCHEMA, "origin": record["origin"], "evidence_level": "unverified",
                          "decision_state": state},
                source_krefs=sources, stack=False)
            found = self._write(draft, name, experiences.KIND, "record_id", key)
        result, revision, idempotent = found
        return {**result, "record": experiences.decode(revision.metadata), "idempotent": idempotent,
                "deduplication_key": key, "belief_promoted": False}

    # -- patterns ----------------------------------------------------------------------------------------
    def prepare_patterns(self, args: PreparePatternsInput, client: Client) -> dict[str, Any]:
        spaces = _absolute_spaces(args.space_paths)
        snapshots: dict[str, dict[str, Any]] = {}
        for index, ref in enumerate(args.source_krefs):
            field = f"source_krefs[{index}]"
            if ref in snapshots:
                continue
            experiences.pinned(ref, field)
            if not patterns.inside(ref, spaces):
                raise InvalidArgument(f"{field}: {ref} lies outside space_paths; name its space there",
                                      field=field)
            snapshots[ref] = self._snapshot(ref, field)
        return patterns.prepare(spaces, list(snapshots.values()))

    def store_pattern(self, args: StorePatternInput, client: Client) -> dict[str, Any]:
        candidate = patterns.validate_candidate(args.request, args.candidate)
        prepared = patterns.verified_sources(args.request)
        project = _one_project(args.request["space_paths"])
        space = storage_space(project, args.space_path)
        for ref in candidate["source_krefs"]:
            field = f"candidate.source_krefs[{args.candidate['source_krefs'].index(ref)}]"  # as the host sent it
            try:
                current = self._snapshot(ref, field)
            except (NotFound, InvalidArgument):
                raise Conflict(f"{field}: {ref} can no longer be read as a snapshot; prepare again",
                               field=field) from None
            if current != prepared[ref]:
                raise Conflict(f"{field}: {ref} changed since kumiho_memory_prepare_patterns; prepare again",
                               field=field)
            stale = [reason for reason, on in current["source_state"].items() if on]
            if stale:
                raise Conflict(f"{field}: {ref} is stale ({', '.join(stale)}); cite current revisions: prepare "
                               "again", field=field)
        key = candidate["candidate_id"]
        name = memory_item_name(candidate["title"], key)
        found = self._stored(space, name, patterns.KIND, "candidate_id", key)
        if found is None:
            draft = Draft(
                project=project, space=space, kind=patterns.KIND, memory_type=patterns.KIND,
                title=candidate["title"], summary=candidate["hypothesis"],
                assistant_text=json.dumps(candidate, ensure_ascii=False, indent=1), tags=list(PATTERN_TAGS),
                metadata={"pattern_candidate": experiences.canonical(candidate), "candidate_id": key,
                          "origin": "agent", "decision_state": "proposal", "inferred": "true",
                          "evidence_level": "unverified"},
                source_krefs=candidate["source_krefs"], stack=False)
            found = self._write(draft, name, patterns.KIND, "candidate_id", key)
        result, revision, idempotent = found
        linked = self._linked(revision.kref, candidate["source_krefs"])
        return {**result, "status": "stored_proposal", "candidate": patterns.decode(revision.metadata),
                "candidate_id": key, "evidence_level": "unverified", "idempotent": idempotent,
                "lineage_status": "complete" if linked else "metadata_only", "graph_links_verified": linked}

    def check_pattern(self, args: CheckPatternInput, client: Client) -> dict[str, Any]:
        spaces = _absolute_spaces(args.space_paths)
        ref = args.pattern_kref
        experiences.pinned(ref, "pattern_kref")
        if not patterns.inside(ref, spaces):
            raise InvalidArgument(f"pattern_kref: {ref} lies outside space_paths; name its space there",
                                  field="pattern_kref")
        revision = self._revision(ref, "pattern_kref")
        candidate = patterns.decode(revision.metadata)
        if candidate is None:
            raise InvalidArgument("pattern_kref: not a stored pattern proposal; pass the revision_kref that "
                                  "kumiho_memory_store_pattern returned", field="pattern_kref")
        sources: dict[str, list[str] | None] = {}
        for source in candidate["source_krefs"]:
            try:
                sources[source] = self._stale(self.graph.get_revision(source)) \
                    if patterns.inside(source, spaces) else None
            except NotFound:
                sources[source] = None
        report = patterns.health(ref, self._stale(revision), sources)
        return {**report, "pattern_kref": ref, "candidate_id": candidate["candidate_id"],
                "kind": candidate["kind"], "title": candidate["title"], "space_paths": spaces}

    def validate_insight_response(self, args: ValidateInsightResponseInput, client: Client) -> dict[str, Any]:
        return insights.validate(args.request, args.response)

    # -- reading ---------------------------------------------------------------------------------------
    def _revision(self, ref: str, field: str) -> Revision:
        try:
            return self.graph.get_revision(ref)
        except NotFound:
            raise NotFound(f"{field}: {ref} does not exist", field=field) from None

    def _existing_sources(self, refs: list[str], field: str) -> None:
        for index, ref in enumerate(refs):
            self._revision(ref, f"{field}[{index}]")

    def _snapshot(self, ref: str, field: str) -> dict[str, Any]:
        revision = self._revision(ref, field)
        record = experiences.decode(revision.metadata)
        if record is None:
            raise InvalidArgument(f"{field}: {ref} is not an experience or outcome snapshot (record them with "
                                  "kumiho_memory_record_experience / _record_outcome)", field=field)
        stale = self._stale(revision)
        state = {reason: reason in stale for reason in patterns.STALE_REASONS}
        return patterns.snapshot(ref, record, revision.metadata.get("evidence_level", "unverified"), state)

    def _stale(self, revision: Revision) -> list[str]:
        """Why a pinned revision is no longer current: deprecated (it or its item), superseded (a correction
        replaced it), newer_revision (its item has a later one)."""
        reasons = []
        if revision.deprecated or self.graph.get_item(revision.item_kref).deprecated:
            reasons.append("deprecated")
        if revision.metadata.get("status") == "superseded" or revision.metadata.get("superseded_by"):
            reasons.append("superseded")
        if self.graph.get_revision(revision.item_kref).number > revision.number:
            reasons.append("newer_revision")
        return reasons

    def _stored(self, space: str, name: str, kind: str, key_name: str,
                key: str) -> tuple[dict[str, Any], Revision, bool] | None:
        """What an earlier identical call stored (its item is named after the content digest), or None."""
        item = str(krefs.Kref((*krefs.parse_space_path(space), name), kind))
        try:
            first = self.graph.get_revision(f"{item}?r=1")
        except NotFound:
            return None
        if first.metadata.get(key_name) != key:
            raise Conflict(f"{item} already holds another record under the same name; use another space_path",
                           field="space_path")
        artifact = str(krefs.parse(first.kref).with_revision(first.number, first.default_artifact)) \
            if first.default_artifact else ""
        result = {"space_path": space_of(space), "item_kref": item, "revision_kref": first.kref, "bundle_kref": "",
                  "artifact_kref": artifact, "summary": first.metadata.get("summary", ""), "edges_created": [],
                  "stacked": False, "stack_score": 0.0, "stack_runner_up": 0.0, "stack_overlap": 0.0,
                  "stack_mode": "two-band"}
        return result, first, True

    def _write(self, draft: Draft, name: str, kind: str, key_name: str,
               key: str) -> tuple[dict[str, Any], Revision, bool]:
        plan = self.writer.plan(draft)
        plan.item_name = name
        try:
            result = self.writer.write([plan])[0]
        except AlreadyExists:  # an identical call won the race: answer with what it stored
            found = self._stored(draft.space, name, kind, key_name, key)
            if found is None:
                raise
            return found
        return result, self.graph.get_revision(result["revision_kref"]), False

    def _linked(self, revision_kref: str, sources: list[str]) -> bool:
        edges = self.graph.get_edges(revision_kref, "DERIVED_FROM", "outgoing").items
        return set(sources) <= {edge.target_kref for edge in edges}

    def _now(self) -> str:
        return datetime.now(UTC).isoformat()


def _absolute_spaces(values: list[str]) -> list[str]:
    spaces = []
    for index, value in enumerate(values):
        field = f"space_paths[{index}]"
        if not value.startswith("/"):
            raise InvalidArgument(f"{field}: give an absolute space path starting with the project, such as "
                                  "/CognitiveMemory/experiences", field=field)
        spaces.append(krefs.space_path(krefs.parse_space_path(value, field)))
    return list(dict.fromkeys(spaces))


def _one_project(spaces: list[str]) -> str:
    projects = {space.strip("/").split("/", 1)[0] for space in spaces}
    if len(projects) != 1:
        raise InvalidArgument("request.space_paths: a pattern's sources lie in one project; prepare per project",
                              field="request.space_paths")
    return projects.pop()
