"""Writing memories (reference §4.8): space, stacking onto a similar item, revision, artifact file, tags,
bundle, provenance edges — for one memory or a batch, in one graph transaction (all or nothing).

Order of a write: decide every memory's target (stacking searches) → check every space name → write the
artifact files durably (fsynced with their folder: the graph's commit is fsynced, and a file it points to
must not be lost when the commit survives) → one graph transaction for all memories. A failed transaction
deletes the files it would have pointed to, so a failure leaves neither a half-written graph nor orphan
artifacts; what a crash between file and commit leaves is swept at the next start (``artifacts.sweep``).
"""

from __future__ import annotations

import contextlib
import logging
import re
import unicodedata
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from appliance.core import kref as krefs
from appliance.core import names
from appliance.core.search import SearchFilter, SearchRequest, searchable_text
from appliance.errors import AlreadyExists, InvalidArgument, NotFound
from appliance.fsutil import fsync_dir, inside, write_durably
from appliance.graph import CreatedMemory, GraphStore, NewMemory
from appliance.memory import records
from appliance.memory.spaces import memory_item_name, slug, space_of
from appliance.search.service import SearchService

log = logging.getLogger(__name__)
Stage = Callable[[list[str], dict[str, np.ndarray]], None]  # revision krefs, vectors by searchable text

# Stacking thresholds on the one 0..1 scale (D1; docs/mcp-tools.md): a strong match stacks on its own; a
# middle-band match only with the same memory type; both also need lexical overlap, because a false stack
# moves `published` and hides the older memory (reference §4.8 step 5).
STACK_STRONG = 0.75
STACK_MIDDLE = 0.55
STACK_MIN_OVERLAP = 0.17
STACK_MIN_TOKENS = 8
SUMMARY_LIMIT = 2000
# One write holds the graph's single writer for its whole transaction (all or nothing), and every memory,
# tag and provenance edge in it costs several graph queries: 100 captures × 100 sources (10,000 edges) held
# it 44 s. These caps keep the largest write of one call to a few seconds (benchmarks/bounds_bench.py;
# docs/mcp-tools.md "Bounds"), whatever the surface's schema allows; agents write a few captures per turn.
MAX_MEMORIES_PER_WRITE = 10
MAX_EDGES_PER_WRITE = 100
_FILES = ThreadPoolExecutor(max_workers=8, thread_name_prefix="artifact-files")  # a batch's files, written together
_WORD = re.compile(r"[0-9a-z_]{2,}")
_UNSAFE = re.compile(r"[^\w-]")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7a3]+")


@dataclass
class Draft:
    """One memory to write, already validated and redacted."""

    project: str
    space: str  # normalised space path, "/P/a/b"
    kind: str
    memory_type: str
    title: str
    summary: str
    user_text: str = ""
    assistant_text: str = ""
    tags: list[str] | None = None  # None = the default ["published"]
    metadata: dict[str, str] = field(default_factory=dict)
    bundle_name: str = ""
    source_krefs: list[str] = field(default_factory=list)
    edge_type: str = "DERIVED_FROM"
    artifact_name: str = "chat_io"
    artifact_location: str = ""
    stack: bool = True
    revises: str = ""  # kref of an item (or one of its revisions) this memory is a new revision of


@dataclass
class Plan:
    draft: Draft
    item_kref: str = ""  # existing item to add a revision to ("" = create item_name)
    item_name: str = ""
    previous_revision_kref: str = ""
    stacked: bool = False
    stack_score: float = 0.0
    stack_runner_up: float = 0.0
    stack_overlap: float = 0.0
    artifact_path: Path | None = None
    text: str = ""  # the searchable text ``vector`` embeds
    vector: np.ndarray | None = None


def overlap_tokens(text: str) -> set[str]:
    """Latin/digit words of ≥ 2 characters plus CJK character bigrams (reference §4.8 step 5)."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    found = set(_WORD.findall(folded))
    for run in _CJK.findall(folded):
        found.update([run] if len(run) == 1 else (run[i:i + 2] for i in range(len(run) - 1)))
    return found


def lexical_overlap(a: str, b: str) -> float:
    ta, tb = overlap_tokens(a), overlap_tokens(b)
    if len(ta) < STACK_MIN_TOKENS or len(tb) < STACK_MIN_TOKENS:
        return 0.0
    return len(ta & tb) / len(ta | tb)


class MemoryWriter:
    def __init__(self, graph: GraphStore, search: SearchService, artifact_root: Path,
                 stage: Stage = lambda krefs, vectors: None) -> None:
        self.graph, self.search, self.artifact_root = graph, search, artifact_root
        self.stage = stage  # after the commit: the new revisions and their vectors go to the index at once

    # -- deciding --------------------------------------------------------------------------------------
    def plan(self, draft: Draft) -> Plan:
        return self.plan_all([draft])[0]

    def plan_all(self, drafts: list[Draft]) -> list[Plan]:
        """Every draft's target: a revision of the item it revises, of a similar item (stacking), else a new
        item. The memories' texts are embedded once, together: the stacking searches use these vectors, and
        the index gets them after the commit (``stage``)."""
        plans = [self._revise_plan(d) if d.revises else Plan(d) for d in drafts]
        self.embed(plans)
        for plan in plans:
            d = plan.draft
            if not d.revises and d.stack:
                self._stacking(plan)
            if not plan.item_kref:
                plan.item_name = memory_item_name(d.title or d.summary, d.user_text, d.assistant_text)
        return plans

    def embed(self, plans: list[Plan]) -> None:
        """Embed the searchable text of every plan that has no vector yet, in one call to the embedder."""
        todo = [p for p in plans if p.vector is None]
        if not todo:
            return
        for plan in todo:
            plan.text = self._text(plan)
        vectors = self.search.embedder.embed([p.text for p in todo])
        for plan, vector in zip(todo, vectors, strict=True):
            plan.vector = vector

    def _text(self, plan: Plan) -> str:
        """The text the index will find this memory's revision by, exactly as it will be committed."""
        name = plan.item_name or (plan.item_kref.rsplit("/", 1)[1].rsplit(".", 1)[0] if plan.item_kref else
                                  memory_item_name(plan.draft.title or plan.draft.summary, plan.draft.user_text,
                                                   plan.draft.assistant_text))
        return searchable_text(name, _metadata(plan.draft), self._user_tags(plan.draft))

    def _revise_plan(self, draft: Draft) -> Plan:
        target = krefs.parse(draft.revises, "revises")
        item = str(target.item())
        current = self.graph.current_revisions([item]).get(item)
        if current is None:
            raise NotFound(f"revises: {item} does not exist; pass the kref of the memory to revise",
                           field="revises")
        draft.space = "/" + item.split("//", 1)[1].rsplit("/", 1)[0]
        return Plan(draft, item_kref=item, previous_revision_kref=current.kref)

    def _stacking(self, plan: Plan) -> None:
        d = plan.draft
        query = _stack_query(d.title, d.summary)
        if not query:
            return
        where = SearchFilter(project=d.project, spaces=(d.space,), kinds=(d.kind,))
        # no wait for the index: it holds what was staged after each commit (``stage``), this memory's own
        # vector is the query's (the text leg still searches the title and summary)
        hits = self.search.search(SearchRequest(query, where, "hybrid", limit=8), query_vector=plan.vector)
        by_item: dict[str, float] = {}
        for hit in hits:
            item = str(krefs.parse(hit.revision_kref).item())
            if space_of(item.split("//", 1)[1].rsplit("/", 1)[0]) == space_of(d.space):  # same space only
                by_item[item] = max(by_item.get(item, 0.0), hit.score)
        ranked = sorted(by_item.items(), key=lambda kv: -kv[1])
        if not ranked:
            return
        item, score = ranked[0]
        plan.stack_score = round(score, 4)
        plan.stack_runner_up = round(ranked[1][1], 4) if len(ranked) > 1 else 0.0
        if score < STACK_MIDDLE:
            return
        current = self.graph.current_revisions([item]).get(item)
        if current is None or current.deprecated:
            return
        theirs = f"{current.metadata.get('title', '')} {records.summary_of(current.metadata)}"
        plan.stack_overlap = round(lexical_overlap(f"{d.title} {d.summary}", theirs), 4)
        same_type = records.memory_type(current.metadata) == d.memory_type
        if plan.stack_overlap >= STACK_MIN_OVERLAP and (score >= STACK_STRONG or same_type):
            plan.item_kref, plan.previous_revision_kref, plan.stacked = item, current.kref, True

    # -- writing ---------------------------------------------------------------------------------------
    def write(self, plans: list[Plan]) -> list[dict[str, Any]]:
        """Write every plan in one transaction; returns one result per plan (reference §4.8 step 12). Once it
        has committed, the new revisions and their vectors go to the index (``stage``)."""
        self.embed(plans)
        results = self.write_in_transaction(plans)
        self.stage_written(plans, results)
        return results

    def write_in_transaction(self, plans: list[Plan], max_memories: int = MAX_MEMORIES_PER_WRITE,
                             also: Callable[[list[dict[str, Any]]], object] | None = None) -> list[dict[str, Any]]:
        """``write`` without the staging: the artifact files, then one transaction with the memories and what
        ``also(results)`` writes besides (the Memory API's supersession edges). The caller calls
        ``stage_written`` once it has committed. ``max_memories``: the caller's own bound (the Memory API's
        batch store)."""
        check_drafts([p.draft for p in plans], max_memories=max_memories)
        for plan in plans:  # names first: a write the graph would refuse must not touch the file system
            krefs.parse_space_path(plan.draft.space, "space_path")
        written: list[Path] = []
        try:
            files = [plan for plan in plans if not plan.draft.artifact_location]
            self._write_artifacts(files, written)
            for folder in dict.fromkeys(path.parent for path in written):  # the renames, once per folder
                fsync_dir(folder)

            def job() -> list[dict[str, Any]]:
                results = self._write_all(plans)
                if also is not None:
                    also(results)
                return results

            return self.graph.atomic(job)
        except BaseException:
            for path in written:
                path.unlink(missing_ok=True)
            for plan in plans:  # no plan points at a file removed here
                if plan.artifact_path in written:
                    plan.artifact_path = None
            raise

    def _write_artifacts(self, files: list[Plan], written: list[Path]) -> None:
        """Each plan's artifact file, its path set on the plan and added to ``written``. Every file is fsynced
        before the commit; fsyncs issued together share the file system's journal commits (100 one after another
        held a batch ~1 s on a busy disk). When one fails, the others are still waited for, so that ``written``
        names every file on disk before the first error is raised (the caller removes them)."""
        if len(files) <= 1:
            for plan in files:
                plan.artifact_path = self._write_artifact(plan)
                written.append(plan.artifact_path)
            return
        futures = [_FILES.submit(self._write_artifact, plan) for plan in files]
        wait(futures)
        failure: BaseException | None = None
        for plan, future in zip(files, futures, strict=True):
            error = future.exception()
            if error is None:
                plan.artifact_path = future.result()
                written.append(plan.artifact_path)
            elif failure is None:
                failure = error
        if failure is not None:
            raise failure

    def stage_written(self, plans: list[Plan], results: list[dict[str, Any]]) -> None:
        """Hand the committed revisions and the vectors of their texts (as committed) to the index: they are
        searchable when it returns (a revision without a vector is embedded there)."""
        vectors = {}
        for plan in plans:
            if plan.vector is not None and plan.text == self._text(plan):  # the text a vector embeds is the row's
                vectors[plan.text] = plan.vector
        self.stage([r["revision_kref"] for r in results], vectors)

    def _write_all(self, plans: list[Plan]) -> list[dict[str, Any]]:
        g = self.graph
        created = g.create_memories([NewMemory(
            space=p.draft.space, item_name=p.item_name, kind=p.draft.kind, metadata=_metadata(p.draft),
            artifact_name=p.draft.artifact_name, artifact_location=p.draft.artifact_location or str(p.artifact_path),
            tags=tuple(self._tags(p)), item_kref=p.item_kref) for p in plans])
        return [self._links(plan, memory) for plan, memory in zip(plans, created, strict=True)]

    def _links(self, plan: Plan, memory: CreatedMemory) -> dict[str, Any]:
        """The memory's bundle, provenance edges and supersession, and what the call answers about it."""
        d, g = plan.draft, self.graph
        item_kref, revision_kref, space = memory.item_kref, memory.revision_kref, memory.space
        bundle_kref = ""
        if d.bundle_name and not d.revises:
            bundle = g.create_bundle(space, slug(d.bundle_name, 64))
            if not plan.stacked:
                # the same memory stored again has the same item name, and the item is a member already;
                # the check is a read, so the transaction stays clean (Kùzu rolls back partial writes badly)
                with contextlib.suppress(AlreadyExists):
                    g.add_bundle_member(bundle.kref, item_kref)
            bundle_kref = bundle.kref
        edges, skipped = [], []
        for target in d.source_krefs:
            try:
                g.create_edge(revision_kref, target, d.edge_type)
                edges.append(target)
            except NotFound as exc:  # read before any write of the edge: the transaction stays clean
                skipped.append({"kref": target, "reason": exc.message})
        if d.revises and plan.previous_revision_kref:
            g.create_edge(revision_kref, plan.previous_revision_kref, "SUPERSEDES",
                          {"reason": "belief update", "basis": "agent"})
            g.update_revision_metadata(plan.previous_revision_kref,
                                       {"status": "superseded", "superseded_by": revision_kref})
        result: dict[str, Any] = {
            "space_path": space_of(space), "item_kref": item_kref, "revision_kref": revision_kref,
            "bundle_kref": bundle_kref, "artifact_kref": memory.artifact_kref, "summary": d.summary,
            "edges_created": edges, "stacked": plan.stacked, "stack_score": plan.stack_score,
            "stack_runner_up": plan.stack_runner_up, "stack_overlap": plan.stack_overlap,
            "stack_mode": "two-band",
        }
        if skipped:
            result["edges_skipped"] = skipped
        if plan.previous_revision_kref:
            result["previous_revision_kref"] = plan.previous_revision_kref
        return result

    @staticmethod
    def _user_tags(d: Draft) -> list[str]:
        return [t for t in dict.fromkeys(d.tags if d.tags is not None else [names.PUBLISHED]) if t != names.LATEST]

    def _tags(self, plan: Plan) -> list[str]:
        d = plan.draft
        wanted = self._user_tags(d)
        if d.revises:  # a correction is published only where the item already had a published revision
            wanted = [t for t in wanted if t != names.PUBLISHED]
            if names.PUBLISHED in self.graph.current_revisions([plan.item_kref])[plan.item_kref].tags:
                wanted.append(names.PUBLISHED)
        return wanted

    def _write_artifact(self, plan: Plan) -> Path:
        """A Markdown record of the memory under the data directory, one file per revision (a stacked
        revision gets a file of its own: earlier revisions' artifacts stay as they were). It is on disk
        (fsynced, with its folder) before the graph commit that points at it."""
        d = plan.draft
        name = plan.item_name or plan.item_kref.rsplit("/", 1)[1].rsplit(".", 1)[0]
        folder = inside(self.artifact_root, *d.space.strip("/").split("/"), field="space_path")
        safe = _UNSAFE.sub("_", name)
        path = folder / f"{safe}.{uuid.uuid4().hex[:8]}.md"
        lines = ["---", f"title: {d.title}", f"type: {d.memory_type}", f"summary: {d.summary}", "---", ""]
        if d.user_text:
            lines.append(f"**User:** {d.user_text}")
        if d.assistant_text:
            lines.append(f"**Assistant:** {d.assistant_text}")
        return write_durably(path, "\n".join(lines) + "\n", sync_folder=False)  # write() syncs the folders


def check_drafts(drafts: list[Draft], prefixes: list[str] | None = None,
                 max_memories: int = MAX_MEMORIES_PER_WRITE) -> None:
    """Refuse, before anything is written, what the graph would refuse halfway through the transaction (a
    rollback after partial writes left Kùzu answering write-write conflicts, then crashing), and a write
    larger than one transaction may be. ``prefixes`` name each draft's place in the call (``captures[0].``)."""
    check_write_size(drafts, max_memories=max_memories)
    for draft, where in zip(drafts, prefixes or [""] * len(drafts), strict=True):
        names.kind(draft.kind, f"{where}memory_item_kind")
        names.edge_type(draft.edge_type, f"{where}edge_type")
        names.metadata(draft.metadata, f"{where}metadata")
        for tag in draft.tags or ():
            if tag != names.LATEST:  # ignored when given
                names.user_tag(tag, f"{where}tags")
        names.artifact_name(draft.artifact_name, f"{where}artifact_name")
        if draft.artifact_location and not draft.artifact_location.strip():
            raise InvalidArgument(f"{where}artifact_location: give a file path or URI, or omit it",
                                  field=f"{where}artifact_location")


def check_write_size(drafts: list[Draft], field: str = "captures", max_memories: int = MAX_MEMORIES_PER_WRITE
                     ) -> None:
    """Refuse, before anything is written, a write larger than one transaction may be (all or nothing)."""
    if len(drafts) > max_memories:
        raise InvalidArgument(f"{field}: at most {max_memories} memories in one call (got {len(drafts)}); "
                              "split them over several calls", field=field)
    edges = sum(len(d.source_krefs) for d in drafts)
    if edges > MAX_EDGES_PER_WRITE:
        raise InvalidArgument(
            f"source_krefs: this call would write {edges} provenance edges (every capture links to every "
            f"source); at most {MAX_EDGES_PER_WRITE} in one call: cite only the sources that matter, or split "
            "the captures over several calls", field="source_krefs")


def _metadata(d: Draft) -> dict[str, str]:
    """The revision metadata of a memory (what the graph commits and the index reads)."""
    return {"schema": records.SCHEMA, "type": d.memory_type, "memory_type": d.memory_type, "title": d.title,
            "summary": d.summary, "space": space_of(d.space), **d.metadata}


def _stack_query(title: str, summary: str, limit: int = 180) -> str:
    query = title[:limit]
    room = limit - len(query) - 1
    if summary and room >= 16:
        query = f"{query} {summary[:room]}".strip()
    return query or summary[:limit]


def clip_summary(text: str) -> str:
    text = text.strip()
    return text if len(text) <= SUMMARY_LIMIT else text[: SUMMARY_LIMIT - 3] + "..."

