"""Writes (reference §4.8, §4.9, §4.14): storing one memory, reflect's captures, an execution's outcome.

Every call writes its memories in one graph transaction (``MemoryWriter.write``: all or none), after
everything that could refuse them was checked. A reflect with an ``idempotency_prefix`` marks each capture's
revision with the key ``<prefix>:<capture index>`` (Kumiho's per-row key) and its buffered response with the
prefix, so that a retry returns the first call's memories instead of writing them again — after a restart
too, since the marks are stored with what they mark.
"""

from __future__ import annotations

import json
import re
import threading
import zlib
from collections.abc import Callable
from contextlib import nullcontext
from typing import TYPE_CHECKING, Any

from appliance.core import kref as krefs
from appliance.core import redaction
from appliance.core.model import Revision
from appliance.errors import InvalidArgument, NotFound
from appliance.graph import GraphStore
from appliance.memory import records
from appliance.memory.client import Client
from appliance.memory.sessions import remember_recalled, resolve_session
from appliance.memory.spaces import project_for, storage_space
from appliance.memory.working import WorkingMemory
from appliance.memory.writer import Draft, MemoryWriter, check_drafts, clip_summary
from appliance.operations.fields import METADATA_VALUE_LENGTH
from appliance.operations.writes import CaptureInput, ReflectInput, StoreExecutionInput, StoreInput

if TYPE_CHECKING:
    from appliance.services import Handler

CAPTURE_TYPES = ("decision", "preference", "fact", "correction", "architecture", "implementation", "synthesis",
                 "reflection", "summary", "skill")  # the seed's ten (D7); other lowercase words are accepted
MAX_METADATA_VALUE = METADATA_VALUE_LENGTH  # characters of one caller metadata value, JSON-encoded
SURROUNDING_TEXT = "surrounding_text"  # caller metadata indexed with the memory (core/search.py)
IDEMPOTENCY_KEY = "idempotency_key"  # revision metadata of a capture / working-memory message metadata
_EVENT_DATE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")
_PREFIX_LOCKS = 64  # reflects with different prefixes rarely share one of these; a fixed number bounds the memory

QueueEdgeDiscovery = Callable[[list[str]], dict[str, Any]]  # revision krefs → what reflect's answer says


class WriteService:
    def __init__(self, graph: GraphStore, writer: MemoryWriter, working: WorkingMemory,
                 queue_edge_discovery: QueueEdgeDiscovery) -> None:
        self.graph, self.writer, self.working = graph, writer, working
        self.queue_edge_discovery = queue_edge_discovery  # D12: reflect does not wait for it
        # A retry of a reflect can overlap the first call (the client timed out while it was still writing): the
        # lookup of earlier keys and the writes must not interleave, or both calls write everything. Every write
        # goes through this one process, so a lock per (project, prefix) — striped — serializes them.
        self._prefix_locks = tuple(threading.Lock() for _ in range(_PREFIX_LOCKS))

    def handlers(self) -> dict[str, Handler]:
        return {"kumiho_memory_store": self.store, "kumiho_memory_reflect": self.reflect,
                "kumiho_memory_store_execution": self.store_execution}

    # -- store ---------------------------------------------------------------------------------------------
    def store(self, args: StoreInput, client: Client, *, operator: bool = False) -> dict[str, Any]:
        """One memory (§4.8). ``operator``: memory_store, where a title alone is enough."""
        user_text, assistant_text = args.user_text or "", args.assistant_text or ""
        if not (user_text.strip() or assistant_text.strip() or (operator and args.title)):
            raise InvalidArgument("user_text: give the text to remember (user_text or assistant_text)",
                                  field="user_text")
        # the text the filters judge is the first one with something in it: a blank user_text next to an
        # assistant_text is no empty memory
        judged = next((text for text in (user_text, assistant_text, args.title or "") if text.strip()), "")
        skipped = redaction.skip_reason(judged)
        if skipped:
            return {"stored": False, "skipped": skipped}
        project = project_for(args.project, client)
        policy = self._policy(args.policy_kref) if args.policy_kref else _Policy()
        kind = policy.kind if policy.kind and "memory_item_kind" not in args.model_fields_set \
            else args.memory_item_kind
        summary = clip_summary(args.summary or assistant_text or user_text or args.title or "")
        metadata, warnings = _caller_metadata(args.metadata)
        draft = Draft(
            project=project, space=policy.space(project, args.space_path, args.space_hint), kind=kind,
            memory_type=args.memory_type.lower(), title=args.title or summary[:120], summary=summary,
            user_text=user_text, assistant_text=assistant_text, tags=list(args.tags) if args.tags else None,
            metadata={**policy.metadata, **metadata}, bundle_name=args.bundle_name or "",
            source_krefs=_krefs(args.source_revision_krefs, "source_revision_krefs"), edge_type=args.edge_type,
            artifact_name=args.artifact_name, artifact_location=args.artifact_location or "",
            stack=args.stack_revisions)
        result = self.writer.write([self.writer.plan(draft)])[0]
        if policy.kinds and kind not in policy.kinds:  # the reference only warns about such a kind
            warnings.append(f"memory_item_kind: {kind!r} is not one of the policy's memory_kinds "
                            f"({', '.join(policy.kinds)})")
        if warnings:
            result["warnings"] = warnings
        return {"stored": True, **result}

    def _policy(self, policy_kref: str) -> _Policy:
        """The memory policy a store follows (§4.8 step 2): the named revision, or the item's published
        (else latest) one; its ``schema`` and its JSON ``policy`` (memory_item_kind, memory_kinds, space_root)."""
        parsed = krefs.parse(policy_kref, "policy_kref")
        if parsed.revision is not None:
            revision: Revision | None = self.graph.get_revision(policy_kref)
        else:
            item = str(parsed.item())
            revision = self.graph.current_revisions([item]).get(item)
        if revision is None:
            raise NotFound(f"policy_kref: {policy_kref[:200]} has no revision; name a policy item or revision",
                           field="policy_kref")
        try:
            policy = json.loads(revision.metadata.get("policy") or "null")
        except ValueError:
            policy = None
        if not isinstance(policy, dict):
            raise InvalidArgument(f"policy_kref: {revision.kref} holds no policy (its 'policy' metadata must be a "
                                  "JSON object with memory_item_kind, memory_kinds or space_root); name a policy "
                                  "revision or omit policy_kref", field="policy_kref")
        kinds = policy.get("memory_kinds")
        return _Policy(
            kind=str(policy.get("memory_item_kind") or ""),
            kinds=tuple(str(k) for k in kinds) if isinstance(kinds, list) else (),
            root=str(policy.get("space_root") or "").strip().strip("/"),
            metadata={"schema": revision.metadata["schema"]} if revision.metadata.get("schema") else {})

    # -- reflect -------------------------------------------------------------------------------------------
    def reflect(self, args: ReflectInput, client: Client) -> dict[str, Any]:
        """Buffer the response, then store every capture in one transaction (all or none)."""
        project = project_for(None, client)
        captures = args.captures or []
        sources = _krefs(args.source_krefs, "source_krefs")
        prefix = args.idempotency_prefix
        keys = [f"{prefix}:{index}" for index in range(len(captures))] if prefix else []
        drafts, dropped = [], []
        for index, capture in enumerate(captures):  # validate everything before writing anything
            draft, bad_date = _capture_draft(index, capture, args.space_path, project, sources)
            if keys:
                draft.metadata[IDEMPOTENCY_KEY] = keys[index]
            drafts.append(draft)
            if bad_date:
                dropped.append({"title": draft.title, "event_date": bad_date})
        check_drafts(drafts, [f"captures[{i}]." for i in range(len(drafts))])
        response = args.response
        buffer = bool(response.strip()) and not redaction.skip_reason(response)
        if buffer:
            self.working.check_content(response, "response")
        # from the lookup of earlier keys to the last write, a retry with the same prefix waits for this call
        with self._prefix_lock(project, prefix) if prefix else nullcontext():
            earlier = self.graph.revisions_with_metadata(project, IDEMPOTENCY_KEY, keys) if keys else {}
            fresh = [i for i in range(len(drafts)) if not keys or keys[i] not in earlier]
            # one embedding call for every capture; a `revises` that does not exist fails here
            plans = self.writer.plan_all([drafts[i] for i in fresh]) if fresh else []
            # only now, with nothing left to refuse, may the call touch the working memory
            session_id, source = resolve_session(self.working, session_id=args.session_id, user_id=args.user_id,
                                                 context=args.context, host_session_id=client.host_session_id,
                                                 project=project)
            buffered = created = False
            if buffer and not (prefix and self.working.find_message(project, session_id, IDEMPOTENCY_KEY, prefix)):
                appended = self.working.append(project, session_id, "assistant", response,
                                               {IDEMPOTENCY_KEY: prefix} if prefix else None)
                buffered, created = True, appended.created_bucket
            elif buffer:
                buffered = True  # by the first call with this prefix
            written = iter(self.writer.write(plans) if plans else [])
            results = [next(written) if i in fresh else _replayed(earlier[keys[i]]) for i in range(len(drafts))]
            result: dict[str, Any] = {
                "buffered": buffered, "captures_stored": len(results), "edges_discovered": 0,
                "stored_krefs": [r["revision_kref"] for r in results], "created_bucket": created,
                "capture_results": results, "session_id": session_id, "session_id_source": source,
            }
            if prefix:
                result["replayed_captures"] = len(results) - len(fresh)
            new = [results[i]["revision_kref"] for i in fresh]
            if new and args.discover_edges:
                result.update(self.queue_edge_discovery(new))
            if sources:
                remember_recalled(self.working, project, session_id, sources)
            if dropped:
                result["dropped_event_dates"] = dropped
            return result

    def _prefix_lock(self, project: str, prefix: str) -> threading.Lock:
        return self._prefix_locks[zlib.crc32(f"{project}\0{prefix}".encode()) % len(self._prefix_locks)]

    # -- store_execution -----------------------------------------------------------------------------------
    def store_execution(self, args: StoreExecutionInput, client: Client) -> dict[str, Any]:
        """A command's outcome (§4.14): ``error`` on failure, else ``action``; its output as an artifact."""
        task, status, exit_code = args.task, args.status, args.exit_code
        failed = status in ("failed", "error", "blocked") or (exit_code is not None and exit_code != 0)
        stderr, stdout = args.stderr or "", args.stdout or ""
        if failed:
            summary = (f"Attempted '{task}' but failed: {stderr[:200]}" if stderr
                       else f"Attempted '{task}' but failed with status '{status}'")
        else:
            summary = f"Executed '{task}' successfully"
        memory_type = "error" if failed else "action"
        topics = list(args.topics or [])
        execution_log = "\n".join([f"# Tool Execution: {task}", "", f"- status: {status}", f"- exit code: {exit_code}",
                                   f"- duration: {args.duration_ms} ms", "", "## stdout", "```", stdout, "```",
                                   "", "## stderr", "```", stderr, "```"])
        project = project_for(None, client)
        draft = Draft(project=project, space=storage_space(project, None, args.space_hint),
                      kind="conversation", memory_type=memory_type,
                      title=(f"Failed: {task[:60]}" if failed else f"Successfully executed: {task[:60]}"),
                      summary=summary, user_text=task, assistant_text=execution_log,
                      tags=[memory_type, status, "published"], bundle_name=topics[0] if topics else "",
                      metadata=records.metadata_values({"exit_code": exit_code, "duration_ms": args.duration_ms,
                                                        "topics": topics or None, "tools": args.tools}),
                      artifact_name="execution_log", stack=False)
        stored = self.writer.write([self.writer.plan(draft)])[0]
        return {"success": True, "memory_type": memory_type, "store_result": stored}


class _Policy:
    """What a store's ``policy_kref`` contributes; empty without one."""

    def __init__(self, kind: str = "", kinds: tuple[str, ...] = (), root: str = "",
                 metadata: dict[str, str] | None = None) -> None:
        self.kind, self.kinds, self.root, self.metadata = kind, kinds, root, metadata or {}

    def space(self, project: str, space_path: str | None, space_hint: str | None) -> str:
        """The memory's space; under the policy's ``space_root`` when it sets one."""
        space = storage_space(project, space_path, space_hint)
        if not self.root:
            return space
        relative = space.removeprefix("/" + project).strip("/")
        return storage_space(project, f"{self.root}/{relative}" if relative else self.root)


def _capture_draft(index: int, capture: CaptureInput, space_path: str | None, project: str,
                   sources: list[str]) -> tuple[Draft, str | None]:
    """One capture as a memory (§4.9 steps 2–4) and its event date when that was dropped."""
    where = f"captures[{index}]"
    for key, value in (("title", capture.title), ("content", capture.content)):
        if not value.strip():
            raise InvalidArgument(f"{where}.{key}: give a non-empty {key}", field=f"{where}.{key}")
    metadata: dict[str, str] = {}
    bad_date = None
    if capture.event_date:
        if _EVENT_DATE.match(capture.event_date):
            metadata["event_date"] = capture.event_date
        else:
            bad_date = capture.event_date
    stated: dict[str, str | None] = {"origin": capture.origin, "decision_state": capture.decision_state}
    metadata.update({key: value for key, value in stated.items() if value and value != "unknown"})
    space_hint = capture.space_hint or space_path
    if capture.revises:
        krefs.parse(capture.revises, f"{where}.revises")
    content = clip_summary(capture.content)
    draft = Draft(
        project=project, space=storage_space(project, None, space_hint), kind="conversation",
        memory_type=capture.type, title=capture.title.strip()[:200], summary=content, assistant_text=content,
        tags=list(capture.tags) if capture.tags else None, metadata=metadata, source_krefs=sources,
        stack=bool(space_hint), revises=capture.revises or "")
    return draft, bad_date


def _replayed(revision: Revision) -> dict[str, Any]:
    """A capture an earlier reflect with the same idempotency key stored: what that call answered about it."""
    artifact = f"{revision.kref}&a={revision.default_artifact}" if revision.default_artifact else ""
    return {"space_path": revision.metadata.get("space", ""), "item_kref": revision.item_kref,
            "revision_kref": revision.kref, "artifact_kref": artifact,
            "summary": records.summary_of(revision.metadata), "replayed": True}


def _caller_metadata(values: dict[str, Any] | None) -> tuple[dict[str, str], list[str]]:
    """The caller's metadata, bounded, and warnings. ``surrounding_text`` is indexed with the memory, so the
    filters that judge a memory's own text judge it too: text they would never store (cron output, distilled
    content) is left out with a warning; credentials were already redacted at the door, as in every value."""
    encoded = records.metadata_values(values)
    for key, value in encoded.items():
        if len(value) > MAX_METADATA_VALUE:
            raise InvalidArgument(f"metadata.{key[:64]}: at most {MAX_METADATA_VALUE} characters (JSON-encoded "
                                  f"when not a string; got {len(value)}); keep long text in the memory itself",
                                  field=f"metadata.{key[:64]}")
    warnings: list[str] = []
    surrounding = encoded.get(SURROUNDING_TEXT)
    skipped = redaction.skip_reason(surrounding) if surrounding is not None else None
    if skipped:
        del encoded[SURROUNDING_TEXT]
        if surrounding and surrounding.strip():
            warnings.append(f"metadata.{SURROUNDING_TEXT}: left out ({skipped})")
    return encoded, warnings


def _krefs(values: list[str] | None, field: str) -> list[str]:
    """Source krefs parsed (a bad one is an error naming its place), duplicates dropped."""
    return list(dict.fromkeys(str(krefs.parse(value, f"{field}[{index}]")) for index, value in
                              enumerate(values or [])))
