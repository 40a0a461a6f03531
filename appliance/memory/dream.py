"""Dream State (reference §4.13): the model reviews memories in batches and proposes deprecations, tags,
metadata and relationships; the appliance applies only what passes the guardrails.

Guardrails (``guard``, pure): a proposal must name a memory of its batch; never memories younger than
``min_age_days`` (or of unknown age); never ``official`` evidence, ``corroborated`` only with a stated
reason; never a memory another proposal of this run links to; never ``published`` memories unless
``allow_published_deprecation``; and never more than ``max_deprecation_ratio`` of the memories assessed in
the run (the least relevant first). ``dry_run`` writes nothing at all. Everything a real run changes, its
report revision and its cursor are one graph transaction.

A cursor (item metadata ``last_run_at`` on ``/<project>/_dream_state/dream_state.report``) makes the next run
look only at memories created since; every run leaves a report revision and a Markdown report file.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from appliance.core import names
from appliance.core.model import Revision, every_item
from appliance.core.ports import ChatModel, ModelCancelled, ModelError, answer_budget
from appliance.errors import InvalidArgument, KumihoError, NotFound
from appliance.fsutil import inside, write_durably
from appliance.graph import GraphStore
from appliance.inference import prompts
from appliance.memory import records, typed_graph

CURSOR_SPACE = "_dream_state"
CURSOR_ITEM = "dream_state"
CURSOR_KIND = "report"  # not `conversation`: recall never shows the reports
RELATIONSHIPS = ("DERIVED_FROM", "REFERENCED", "DEPENDS_ON", "SUPERSEDES")
# "keep", or why a memory should go: a named reason instead of a bare boolean, which a small model set to
# true for every memory after the first.
VERDICTS = ("keep", "duplicate", "superseded", "trivial")
_RESERVED_TAGS = {"latest", "published"}
_PROTECTED_KEYS = {"schema", "type", "memory_type", "title", "summary", "content", "space", "evidence_level"}
_TAG = re.compile(r"[^a-z0-9_:-]+")
SUMMARY_CHARS = 300


@dataclass(frozen=True)
class DreamParams:
    project: str
    batch_size: int = 20
    dry_run: bool = False
    max_deprecation_ratio: float = 0.5
    allow_published_deprecation: bool = False
    extra_instructions: str = ""
    min_age_days: float = 7.0
    kind: str = "conversation"
    maintain_graph: bool = False  # typed-graph maintenance after the assessment (appliance.memory.typed_graph)
    maintenance_llm: bool = False  # … with entity merges the model proposes
    code_project: str | None = None  # … and the decisions of this code-decision project deduplicated
    assess: bool = True  # False: no model, only the graph maintenance runs (the cursor stays)

    def __post_init__(self) -> None:
        if not 0.1 <= self.max_deprecation_ratio <= 0.9:
            raise InvalidArgument("max_deprecation_ratio: must be between 0.1 and 0.9 (the share of assessed "
                                  "memories one run may deprecate)", field="max_deprecation_ratio")
        if not 1 <= self.batch_size <= 50:
            raise InvalidArgument("batch_size: must be between 1 and 50", field="batch_size")


@dataclass
class Assessment:
    index: int
    relevance: int = 5
    deprecate: bool = False
    reason: str = ""
    tags: list[str] = field(default_factory=list)
    metadata: dict[str, str] = field(default_factory=dict)
    related: list[int] = field(default_factory=list)
    relationship: str = ""


@dataclass(frozen=True)
class Verdict:
    deprecate: list[tuple[Revision, str]]  # (revision, reason), within the ratio
    guarded: list[dict[str, str]]  # {kref, guard}: proposals the guardrails refused


def assessment_schema(size: int) -> dict[str, Any]:
    """One assessment per memory, in the batch's order (exactly ``size``): a small model asked for a list
    of indexed assessments answered one and stopped; a fixed-length list makes it go through them all."""
    index = {"type": "integer", "minimum": 0, "maximum": max(0, size - 1)}
    return {"type": "object", "properties": {"assessments": {
        "type": "array", "minItems": size, "maxItems": size, "items": {
            "type": "object",
            "properties": {
                "title": {"type": "string", "maxLength": 60},  # echoed: keeps a small model on this memory
                "verdict": {"enum": list(VERDICTS)},
                "reason": {"type": "string", "maxLength": 120},
                "relevance": {"type": "integer", "minimum": 0, "maximum": 10},
                "tags": {"type": "array", "maxItems": 3, "items": {"type": "string", "minLength": 2,
                                                                   "maxLength": 30}},
                "related": {"type": "array", "maxItems": 3, "items": index},
                "relationship": {"enum": [*RELATIONSHIPS, ""]},
                "metadata_updates": {"type": "array", "maxItems": 2, "items": {
                    "type": "object", "properties": {"key": {"type": "string", "minLength": 1, "maxLength": 30},
                                                     "value": {"type": "string", "maxLength": 80}},
                    "required": ["key", "value"], "additionalProperties": False}},
            },
            "required": ["title", "verdict", "reason", "relevance", "tags", "related", "relationship"],
            "additionalProperties": False}}}, "required": ["assessments"], "additionalProperties": False}


def evidence_of(revision: Revision) -> str:
    """The stronger of the metadata grade and an ``evidence:<level>`` tag."""
    order = ["unverified", "single_source", "corroborated", "official"]
    grades = [revision.metadata.get("evidence_level", "")] + \
        [t.split(":", 1)[1] for t in revision.tags if t.startswith("evidence:")]
    known = [g for g in grades if g in order]
    return max(known, key=order.index) if known else ""


def guard(proposals: list[tuple[Revision, Assessment]], params: DreamParams, now: datetime,
          referenced: set[str], assessed: int) -> Verdict:
    """Which proposed deprecations may happen (pure). ``proposals``: every (memory, assessment) of the run;
    ``referenced``: revisions some proposal of this run links to; ``assessed``: memories assessed in the
    run, the base of the ratio."""
    young = now - timedelta(days=params.min_age_days)
    allowed: list[tuple[int, Revision, str]] = []
    guarded: list[dict[str, str]] = []
    for revision, a in proposals:
        if not a.deprecate:
            continue
        evidence = evidence_of(revision)
        created = _parse_time(revision.created_at)
        if created is None or created > young:
            why = "min_age"
        elif evidence == "official" or (evidence == "corroborated" and len(a.reason.strip()) < 10):
            why = "evidence"
        elif revision.kref in referenced:
            why = "reference"
        elif revision.published and not params.allow_published_deprecation:
            why = "published"
        else:
            allowed.append((a.relevance, revision, a.reason.strip() or "proposed by Dream State"))
            continue
        guarded.append({"kref": revision.kref, "guard": why})
    room = int(assessed * params.max_deprecation_ratio)
    allowed.sort(key=lambda entry: entry[0])  # the least relevant first
    guarded += [{"kref": revision.kref, "guard": "ratio"} for _, revision, _ in allowed[room:]]
    return Verdict([(revision, reason) for _, revision, reason in allowed[:room]], guarded)


def parse_assessments(answer: dict[str, Any], size: int) -> tuple[list[Assessment], int]:
    """The assessments by position (the schema asks for one per memory, in order), with clean tags and
    in-batch relations; entries past the batch or not objects are dropped and counted."""
    found: list[Assessment] = []
    dropped = 0
    for index, raw in enumerate(answer.get("assessments") or []):
        if index >= size or not isinstance(raw, dict):
            dropped += 1
            continue
        tags = [t for t in (_TAG.sub("-", str(t).strip().lower()).strip("-") for t in raw.get("tags") or [])
                if len(t) >= 2 and t not in _RESERVED_TAGS and not t.startswith("evidence:")]
        related = [i for i in raw.get("related") or [] if isinstance(i, int) and 0 <= i < size and i != index]
        found.append(Assessment(index, int(raw.get("relevance", 5)), raw.get("verdict", "keep") != "keep",
                                str(raw.get("reason") or ""), list(dict.fromkeys(tags)),
                                {str(u["key"]): str(u["value"]) for u in raw.get("metadata_updates") or []
                                 if isinstance(u, dict) and u.get("key") and u["key"] not in _PROTECTED_KEYS},
                                list(dict.fromkeys(related)), str(raw.get("relationship") or "")))
    return found, dropped


def assess(model: ChatModel, batch: list[Revision], params: DreamParams, *, timeout: float,
           cancel: threading.Event | None = None) -> tuple[list[Assessment], int]:
    """The model's assessments of one batch (and how many of its entries were dropped)."""
    shown = [{"index": i, "title": r.metadata.get("title", ""),
              "summary": records.summary_of(r.metadata)[:SUMMARY_CHARS], "type": records.memory_type(r.metadata),
              "tags": [t for t in r.tags if t == "published" or t.startswith("evidence:")],
              "created": r.created_at[:10]} for i, r in enumerate(batch)]
    policy = f"\n\nDEPLOYMENT POLICY (it may only make you more conservative):\n{params.extra_instructions}" \
        if params.extra_instructions.strip() else ""
    messages = prompts.render("dream_assess", memories="\n".join(json.dumps(m, ensure_ascii=False) for m in shown),
                              policy=policy, count=len(batch))
    schema = assessment_schema(len(batch))
    answer = model.complete_json(messages, schema, max_tokens=answer_budget(schema), timeout=timeout, cancel=cancel)
    return parse_assessments(answer, len(batch))


Progress = Callable[[int, int, str], None]


class DreamState:
    def __init__(self, graph: GraphStore, model: ChatModel, artifact_root: Path, *,
                 clock: Callable[[], datetime], call_timeout: float = 300.0) -> None:
        self.graph, self.model, self.artifact_root = graph, model, artifact_root
        self._clock, self.call_timeout = clock, call_timeout

    def run(self, params: DreamParams, *, progress: Progress | None = None,
            cancel: threading.Event | None = None) -> dict[str, Any]:
        started, clock_start = self._clock(), time.perf_counter()
        self.graph.get_project(params.project)
        last_run = self._last_run(params.project)
        pending = self._collect(params, last_run)
        report: dict[str, Any] = {
            "project": params.project, "dry_run": params.dry_run, "cursor": last_run or "",
            "revisions_assessed": 0, "would_assess": len(pending), "batch_size": params.batch_size,
            "deprecated": 0, "metadata_updated": 0, "tags_added": 0, "edges_created": 0,
            "deprecations_proposed": 0, "deprecations_guarded": [], "malformed_assessments": 0, "errors": [],
            "model": self.model.model_id, "extra_instructions_active": bool(params.extra_instructions)}
        batches = [pending[i:i + params.batch_size] for i in range(0, len(pending), params.batch_size)] \
            if params.assess else []
        assessed: list[tuple[list[Revision], list[Assessment]]] = []
        for number, batch in enumerate(batches):
            if progress:
                progress(number, len(batches), f"assessing batch {number + 1} of {len(batches)}")
            try:
                found, dropped = assess(self.model, batch, params, timeout=self.call_timeout, cancel=cancel)
            except ModelCancelled:
                raise
            except ModelError as exc:  # one bad batch does not stop the run; its memories wait for the next
                report["errors"].append({"batch": number, "code": exc.code, "message": exc.message})
                continue
            report["malformed_assessments"] += dropped
            report["revisions_assessed"] += len(batch)
            assessed.append((batch, found))
        plan = self._plan(assessed, params, report)
        if params.maintain_graph:
            plan.maintenance = self._plan_maintenance(params, report, cancel)
        if progress:
            progress(len(batches), len(batches), "applying" if not params.dry_run else "dry run: nothing applied")
        report["duration_ms"] = round((time.perf_counter() - clock_start) * 1000)
        if params.dry_run:
            report["would_deprecate"] = [{"kref": r.kref, "reason": why} for r, why in plan.deprecate]
            report["would_tag"] = {k: v for k, v in plan.tags.items() if v}
            report["would_link"] = [{"source": s, "target": t, "edge_type": e} for s, t, e in plan.edges]
            return report
        failed_batches = (bool(report["errors"]) and not assessed) or not params.assess
        try:
            self.graph.atomic(lambda: self._apply(plan, params, report, started, keep_cursor=failed_batches))
        except BaseException:  # nothing was applied: no report file either
            if report.get("report_path"):
                Path(report.pop("report_path")).unlink(missing_ok=True)
            raise
        return report

    def _plan_maintenance(self, params: DreamParams, report: dict[str, Any],
                          cancel: threading.Event | None) -> typed_graph.MaintenancePlan:
        """What graph maintenance will change (read before the transaction that applies it; the model's
        merge proposals, when asked for, are asked for here, outside any transaction)."""
        plan = typed_graph.plan_maintenance(self.graph, params.project, params.code_project)
        if params.maintenance_llm and not params.assess:
            plan.notes["llm_merges_skipped"] = "no local model: entity merges by the model were skipped"
        elif params.maintenance_llm:
            entities = typed_graph.nodes(self.graph, params.project, typed_graph.ENTITY_KIND, typed_graph.ENTITY_SPACE)
            try:
                typed_graph.model_merges(plan, entities, merge_proposals(self.model, entities,
                                                                         timeout=self.call_timeout, cancel=cancel))
            except ModelCancelled:
                raise
            except ModelError as exc:
                report["errors"].append({"maintenance": "llm_merges", "code": exc.code, "message": exc.message})
        report["maintenance"] = {**plan.counts(), "edges_repointed": 0}
        if params.dry_run:
            report["maintenance"]["would_merge"] = [
                {"canonical": m.canonical.kref, "duplicate": m.duplicate.kref, "basis": m.why}
                for m in plan.entity_merges + plan.llm_merges + plan.fact_merges + plan.decision_dupes][:100]
            report["maintenance"]["would_prune"] = [r.kref for r in plan.orphans][:100]
        return plan

    def pending_count(self, params: DreamParams) -> int:
        """How many memories the next run would assess (no model needed)."""
        return len(self._collect(params, self._last_run(params.project)))

    # -- steps -----------------------------------------------------------------------------------------
    def _collect(self, params: DreamParams, last_run: str | None) -> list[Revision]:
        found = every_item(lambda cursor: self.graph.search_items(context_filter=params.project,
                                                                   kind_filter=params.kind, cursor=cursor))
        read_only = self.graph.policy.read_only  # the operator's read-only namespaces: not Dream State's to change
        items = [i.kref for i in found if f"/{CURSOR_SPACE}/" not in i.kref
                 and not (read_only and read_only.touched("revision.updated", i.kref))]
        current = self.graph.current_revisions(items)
        fresh = [r for r in current.values() if not r.deprecated and (last_run is None or r.created_at > last_run)]
        return sorted(fresh, key=lambda r: (r.created_at, r.kref))

    def _plan(self, assessed: list[tuple[list[Revision], list[Assessment]]], params: DreamParams,
              report: dict[str, Any]) -> _Plan:
        plan = _Plan()
        for batch, found in assessed:
            for a in found:
                source = batch[a.index].kref
                if a.tags:
                    plan.tags[source] = [t for t in a.tags if t not in batch[a.index].tags]
                if a.metadata:
                    plan.metadata[source] = a.metadata
                for other in a.related:
                    plan.edges.append((source, batch[other].kref, a.relationship or "REFERENCED"))
        referenced = {target for _, target, _ in plan.edges}
        proposals = [(batch[a.index], a) for batch, found in assessed for a in found]
        report["deprecations_proposed"] = sum(a.deprecate for _, a in proposals)
        verdict = guard(proposals, params, self._clock(), referenced, sum(len(b) for b, _ in assessed))
        plan.deprecate, report["deprecations_guarded"] = verdict.deprecate, verdict.guarded
        return plan

    def _apply(self, plan: _Plan, params: DreamParams, report: dict[str, Any], started: datetime, *,
               keep_cursor: bool) -> None:
        g = self.graph
        for revision, _ in plan.deprecate:
            g.set_deprecated(revision.kref, True)
            report["deprecated"] += 1
        for kref, tags in plan.tags.items():
            for tag in tags:
                g.tag_revision(kref, names.user_tag(tag))
                report["tags_added"] += 1
        for kref, values in plan.metadata.items():
            g.update_revision_metadata(kref, values)
            report["metadata_updated"] += 1
        for source, target, edge_type in plan.edges:
            try:
                g.create_edge(source, target, edge_type, {"basis": "dream-state", "reason": "Dream State"})
                report["edges_created"] += 1
            except (NotFound, KumihoError) as exc:
                report["errors"].append({"edge": f"{source} -> {target}", "message": exc.message})
        report["deprecated_krefs"] = [r.kref for r, _ in plan.deprecate]
        if plan.maintenance is not None:
            report["maintenance"].update(typed_graph.apply_maintenance(g, plan.maintenance))
        self._write_report(params, report, started, keep_cursor)

    def _last_run(self, project: str) -> str | None:
        try:
            item = self.graph.get_item(f"kref://{project}/{CURSOR_SPACE}/{CURSOR_ITEM}.{CURSOR_KIND}")
        except NotFound:
            return None
        return item.metadata.get("last_run_at") or None

    def _write_report(self, params: DreamParams, report: dict[str, Any], started: datetime,
                      keep_cursor: bool) -> None:
        g = self.graph
        space = g.ensure_space(f"/{params.project}/{CURSOR_SPACE}").path
        item = g.create_item(space, CURSOR_ITEM, CURSOR_KIND)
        run_at = started.isoformat()
        counters = {k: str(report[k]) for k in ("revisions_assessed", "deprecated", "metadata_updated",
                                                "tags_added", "edges_created", "deprecations_proposed")}
        revision = g.create_revision(item.kref, {
            "type": "dream_state_report", "title": f"Dream State {run_at[:16]}", "run_at": run_at,
            "cursor": report["cursor"], "duration_ms": str(report["duration_ms"]),
            "deprecations_guarded": str(len(report["deprecations_guarded"])), "errors": str(len(report["errors"])),
            **counters, **{f"maintenance_{k}": str(v) for k, v in report.get("maintenance", {}).items()
                           if isinstance(v, int)}})
        folder = inside(self.artifact_root, params.project, CURSOR_SPACE, "reports")
        path = folder / f"dream_state_{started.strftime('%Y%m%dT%H%M%S')}_{uuid.uuid4().hex[:6]}.md"
        write_durably(path, _markdown(report, run_at))  # on disk before the commit that points at it
        g.create_artifact(revision.kref, "report", str(path))
        g.set_default_artifact(revision.kref, "report")
        if not keep_cursor:  # a run whose every batch failed looks at the same memories next time
            g.update_item_metadata(item.kref, {"last_run_at": run_at})
        report["report_kref"] = revision.kref
        report["report_path"] = str(path)


@dataclass
class _Plan:
    deprecate: list[tuple[Revision, str]] = field(default_factory=list)
    tags: dict[str, list[str]] = field(default_factory=dict)
    metadata: dict[str, dict[str, str]] = field(default_factory=dict)
    edges: list[tuple[str, str, str]] = field(default_factory=list)
    maintenance: typed_graph.MaintenancePlan | None = None


MERGE_NAMES = 200  # entity names the model sees at most


def merges_schema() -> dict[str, Any]:
    name = {"type": "string", "minLength": 1, "maxLength": 100}
    return {"type": "object", "properties": {"merges": {"type": "array", "maxItems": 20, "items": {
        "type": "object", "properties": {"canonical": name, "duplicate": name},
        "required": ["canonical", "duplicate"], "additionalProperties": False}}},
        "required": ["merges"], "additionalProperties": False}


def merge_proposals(model: ChatModel, entities: list[Revision], *, timeout: float,
                    cancel: threading.Event | None = None) -> list[tuple[str, str]]:
    """(canonical, duplicate) entity names the model says name the same thing; none for fewer than two."""
    shown = [r.metadata.get("name", "") for r in entities[:MERGE_NAMES] if r.metadata.get("name")]
    if len(shown) < 2:
        return []
    schema = merges_schema()
    answer = model.complete_json(prompts.render("entity_merges", names="\n".join(f"- {n}" for n in shown)),
                                 schema, max_tokens=answer_budget(schema), timeout=timeout, cancel=cancel)
    return [(str(m["canonical"]), str(m["duplicate"])) for m in answer.get("merges") or []]


def _parse_time(value: str) -> datetime | None:
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return None
    return moment if moment.tzinfo else None


def _markdown(report: dict[str, Any], run_at: str) -> str:
    lines = [f"# Dream State — {report['project']}", "", f"- run at: {run_at}", f"- model: {report['model']}",
             f"- cursor (memories after): {report['cursor'] or 'first run'}"]
    for key in ("revisions_assessed", "deprecations_proposed", "deprecated", "tags_added", "metadata_updated",
                "edges_created", "malformed_assessments", "duration_ms"):
        lines.append(f"- {key.replace('_', ' ')}: {report[key]}")
    if report.get("deprecated_krefs"):
        lines += ["", "## Deprecated", *[f"- {k}" for k in report["deprecated_krefs"]]]
    if report["deprecations_guarded"]:
        lines += ["", "## Kept by the guardrails", *[f"- {g['kref']} ({g['guard']})"
                                                      for g in report["deprecations_guarded"]]]
    if report.get("maintenance"):
        lines += ["", "## Graph maintenance", *[f"- {k.replace('_', ' ')}: {v}"
                                                for k, v in report["maintenance"].items() if not isinstance(v, list)]]
    if report["errors"]:
        lines += ["", "## Errors", *[f"- {json.dumps(e, ensure_ascii=False)}" for e in report["errors"]]]
    return "\n".join(lines) + "\n"
