"""The memory tools' behaviour (reference §4, MISSION §2–§3), independent of MCP: each public method takes
the tool's validated arguments and returns its JSON result. Errors are KumihoError subclasses; the MCP
surface turns them into tool errors (D9)."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from appliance.core import kref as krefs
from appliance.core import redaction
from appliance.core.search import SearchFilter, SearchRequest
from appliance.errors import Conflict, InvalidArgument, NotFound
from appliance.graph import GraphStore
from appliance.inference.chat import ChatModel, NoModel
from appliance.jobs import Job, JobQueue
from appliance.memory import consolidation, records, views
from appliance.memory.augmented import augmented_recall
from appliance.memory.cache import RecallCache
from appliance.memory.client import Client
from appliance.memory.model_tools import (
    ModelBackedTools,
    ModelOptions,
    Redact,
    _configured_model_only,
    patterns_only,
)
from appliance.memory.recall import Recaller, RecallQuery
from appliance.memory.sessions import after_consolidation, resolve_session
from appliance.memory.spaces import check_project, project_of, scopes, storage_space
from appliance.memory.working import WorkingMemory, message_number
from appliance.memory.writer import Draft, MemoryWriter, check_drafts, clip_summary

log = logging.getLogger(__name__)

CAPTURE_TYPES = ("decision", "preference", "fact", "correction", "architecture", "implementation", "synthesis",
                 "reflection", "summary", "skill")  # the seed's ten (D7); other lowercase words are accepted
_CAPTURE_TYPE = re.compile(r"^[a-z][a-z0-9_]{0,31}$")
_EVENT_DATE = re.compile(r"^\d{4}(-\d{2}(-\d{2})?)?$")
EVIDENCE_LEVELS = ("official", "corroborated", "single_source", "unverified")
CONSOLIDATE_AFTER = 50  # buffered messages before ingest says should_consolidate
RECALLED_KEPT = 20  # krefs a session remembers having recalled (its summary links to them)
MAX_METADATA_VALUE = 4096  # characters of one caller metadata value (JSON-encoded when not a string)
MAX_SUMMARY_OBJECT = 65536  # characters of an agent-written summary object, JSON-encoded


class MemoryService(ModelBackedTools):
    def __init__(self, graph: GraphStore, recaller: Recaller, writer: MemoryWriter, working: WorkingMemory, *,
                 cache: RecallCache, half_lives: dict[str, float] | None = None, model: ChatModel | None = None,
                 jobs: JobQueue | None = None, redact_pii: Redact = patterns_only,
                 artifact_root: Path | None = None, options: ModelOptions | None = None,
                 model_for: Callable[[dict[str, Any]], ChatModel] | None = None,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.graph, self.recaller, self.writer, self.working = graph, recaller, writer, working
        self.cache = cache
        self.half_lives = half_lives or {}
        self.model: ChatModel = model or NoModel("no chat model is configured")
        self.jobs = jobs
        self.redact_pii = redact_pii
        self.artifact_root = artifact_root or writer.artifact_root
        self.options = options or ModelOptions()
        self.model_for = model_for or _configured_model_only
        self._clock = clock

    # -- recall ----------------------------------------------------------------------------------------
    def recall(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        return self.cached("recall", args, client, lambda: self.run_recall(args, client, with_context=False))

    def engage(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        return self.cached("engage", args, client, lambda: self.run_recall(args, client, with_context=True))

    def cached(self, tool: str, args: dict[str, Any], client: Client,
                run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        key = self.cache.key(tool, args, client)
        hit = self.cache.get(key)
        if hit is not None:
            return {**hit, "cached": True}
        generation = self.cache.generation
        result = run()
        self.cache.put(key, result, generation)
        return result

    def run_recall(self, args: dict[str, Any], client: Client, *, with_context: bool,
                floor: float = 0.0, kind: str = "conversation", order: str = "relevance") -> dict[str, Any]:
        started = time.perf_counter()
        project = project_of(args, client)
        mode = args.get("recall_mode", "summarized")
        query = _query_text(args)
        spaces = scopes(project, args.get("space_paths"))
        self._check_spaces(spaces)
        recall = RecallQuery(
            query=query, project=project, spaces=spaces,
            kinds=(kind,), memory_types=tuple(t.lower() for t in args.get("memory_types") or ()),
            limit=_positive(args.get("limit", 5), "limit"), min_score=max(floor, float(args.get("min_score", 0.0))),
            mode=mode, order=order, half_lives=self.half_lives)
        augmented: dict[str, Any] | None = None
        if args.get("graph_augmented") and query.strip():
            unready = self.model_ready()
            if unready:
                augmented = {"used": False, "note": f"unavailable: {unready}; plain recall was used"}
            else:
                results, augmented = augmented_recall(self.recaller, self.graph, self.model, recall,
                                                      timeout=self.options.reformulate_seconds)
                augmented = {"used": True, **augmented}
        if augmented is None or not augmented["used"]:
            results = self.recaller.recall(recall)
        result: dict[str, Any] = {"results": results, "count": len(results), "recall_mode": mode}
        if with_context:
            context = records.context(results, mode)
            result = {"context": context, **result, "source_krefs": [r["kref"] for r in results],
                      "approx_tokens": len(context) // 4}
        if augmented is not None:
            result["graph_augmented"] = augmented
        result["timing_ms"] = {"total": round((time.perf_counter() - started) * 1000, 1)}
        return result

    def _check_spaces(self, spaces: tuple[str, ...]) -> None:
        for space in spaces:
            if space.count("/") == 1:  # a project's root: an empty or new project just recalls nothing
                continue
            try:
                self.graph.get_space(space)
            except NotFound:
                raise NotFound(f"space_paths: {space} does not exist; name an existing space (engage results "
                               "show theirs) or the project itself for everything", field="space_paths") from None

    def retrieve(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        """Modes search (relevance), latest (newest first) and first (the oldest match) — reference §4.6."""
        mode = _retrieve_mode(args.get("mode", "search"), str(args.get("query") or ""))
        project = project_of(args, client)
        limit = _positive(args.get("limit", 5), "limit")
        kind = args.get("memory_item_kind") or "conversation"
        recall_args = {**args, "limit": max(limit * 4, 20) if mode != "search" else limit}
        found = self.run_recall(recall_args, client, with_context=False, kind=kind,
                             order="latest" if mode == "latest" else "relevance")["results"]
        if mode == "first":
            found = sorted(found, key=lambda r: r["created_at"])[:1]
            return {"item_krefs": [r["item_kref"] for r in found], "revision_krefs": [r["kref"] for r in found],
                    "spaces_used": sorted({r["space"] for r in found}), "mode": mode}
        found = found[:limit]
        if len(found) < limit and args.get("bundle_names"):
            found += self._bundle_fallback(project, args, kind, limit - len(found), {r["item_kref"] for r in found})
        result = {"item_krefs": [r["item_kref"] for r in found], "revision_krefs": [r["kref"] for r in found],
                  "scores": [r["score"] for r in found], "spaces_used": sorted({r["space"] for r in found}),
                  "mode": mode, "project": project}
        if mode == "latest":
            result["created_at"] = [r["created_at"] for r in found]
        if args.get("include_revision_metadata", True):
            result["results"] = found
        return result

    def _bundle_fallback(self, project: str, args: dict[str, Any], kind: str, room: int,
                         seen: set[str]) -> list[dict[str, Any]]:
        """Members of the named bundles (score 0.5), within the requested spaces (reference §4.6)."""
        wanted_spaces = scopes(project, args.get("space_paths")) or ("/" + project,)
        wanted = {s for name in args["bundle_names"] for s in (name, name.casefold())}
        added: list[dict[str, Any]] = []
        for space in wanted_spaces:
            page = self.graph.search_items(context_filter=space.strip("/"), kind_filter="bundle")
            for bundle in page.items:
                if bundle.item_name not in wanted:
                    continue
                members, _ = self.graph.bundle_members(bundle.kref)
                current = self.graph.current_revisions([m.item_kref for m in members])
                for item, revision in current.items():
                    if item in seen or revision.deprecated or len(added) >= room or not item.endswith("." + kind):
                        continue
                    seen.add(item)
                    space_name = item.split("//", 1)[1].rsplit("/", 1)[0]
                    added.append(records.memory(revision, 0.5, None, space_name, "summarized"))
        return added

    # -- writes ----------------------------------------------------------------------------------------
    def store(self, args: dict[str, Any], client: Client, *, operator: bool = False) -> dict[str, Any]:
        user_text = str(args.get("user_text") or "")
        assistant_text = str(args.get("assistant_text") or "")
        if not (user_text.strip() or assistant_text.strip() or (operator and args.get("title"))):
            raise InvalidArgument("user_text: give the text to remember (user_text or assistant_text)",
                                  field="user_text")
        skipped = redaction.skip_reason(user_text or assistant_text or str(args.get("title", "")))
        if skipped:
            return {"stored": False, "skipped": skipped}
        project = project_of(args, client)
        draft = self._draft(args, project, user_text, assistant_text)
        result = self.writer.write([self.writer.plan(draft)])[0]
        return {"stored": True, **result}

    def _draft(self, args: dict[str, Any], project: str, user_text: str, assistant_text: str) -> Draft:
        summary = clip_summary(str(args.get("summary") or assistant_text or user_text or args.get("title") or ""))
        title = str(args.get("title") or summary[:120])
        memory_type = str(args.get("memory_type") or "summary").lower()
        return Draft(
            project=project, space=storage_space(project, args.get("space_path"), args.get("space_hint")),
            kind=str(args.get("memory_item_kind") or "conversation"), memory_type=memory_type,
            title=title, summary=summary, user_text=user_text, assistant_text=assistant_text,
            tags=list(args["tags"]) if args.get("tags") else None,
            metadata=_caller_metadata(args.get("metadata")),
            bundle_name=str(args.get("bundle_name") or ""), source_krefs=_krefs(args.get("source_revision_krefs")),
            edge_type=str(args.get("edge_type") or "DERIVED_FROM"),
            artifact_name=str(args.get("artifact_name") or "chat_io"),
            artifact_location=str(args.get("artifact_location") or ""),
            stack=bool(args.get("stack_revisions", True)))

    def reflect(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        """Buffer the response, then store every capture in one transaction (all or none)."""
        project = project_of(args, client)
        captures = args.get("captures") or []
        sources = _krefs(args.get("source_krefs"))
        drafts, dropped = [], []
        for index, capture in enumerate(captures):  # validate everything before writing anything
            draft, bad_date = self._capture_draft(index, capture, args, project, sources)
            drafts.append(draft)
            if bad_date:
                dropped.append({"title": draft.title, "event_date": bad_date})
        check_drafts(drafts, [f"captures[{i}]." for i in range(len(drafts))])
        response = str(args["response"])
        buffer = bool(response.strip()) and not redaction.skip_reason(response)
        if buffer:
            self.working.check_content(response, "response")
        plans = [self.writer.plan(d) for d in drafts]  # a capture's `revises` that does not exist fails here
        # only now, with nothing left to refuse, may the call touch the working memory
        session_id, source = resolve_session(self.working, session_id=args.get("session_id"),
                                             user_id=args.get("user_id"), context=args.get("context"),
                                             host_session_id=client.host_session_id, project=project)
        appended = self.working.append(project, session_id, "assistant", response) if buffer else None
        stored = self.writer.write(plans) if plans else []
        result: dict[str, Any] = {
            "buffered": appended is not None, "captures_stored": len(stored), "edges_discovered": 0,
            "stored_krefs": [s["revision_kref"] for s in stored],
            "created_bucket": bool(appended and appended.created_bucket), "capture_results": stored,
            "session_id": session_id, "session_id_source": source,
        }
        if stored and args.get("discover_edges", True):
            result.update(self._queue_edge_discovery([s["revision_kref"] for s in stored]))
        if sources:
            self._remember_recalled(project, session_id, sources)
        if dropped:
            result["dropped_event_dates"] = dropped
        return result

    def _capture_draft(self, index: int, capture: dict[str, Any], args: dict[str, Any], project: str,
                       sources: list[str]) -> tuple[Draft, str | None]:
        where = f"captures[{index}]"
        kind = capture.get("type")
        if not isinstance(kind, str) or not _CAPTURE_TYPE.match(kind):
            raise InvalidArgument(
                f"{where}.type: {kind!r} is not a capture type; use one of {', '.join(CAPTURE_TYPES)} "
                "(or another lowercase word such as 'lesson')", field=f"{where}.type")
        for key in ("title", "content"):
            if not isinstance(capture.get(key), str) or not capture[key].strip():
                raise InvalidArgument(f"{where}.{key}: give a non-empty {key}", field=f"{where}.{key}")
        metadata: dict[str, str] = {}
        bad_date = None
        event_date = capture.get("event_date")
        if event_date:
            if _EVENT_DATE.match(str(event_date)):
                metadata["event_date"] = str(event_date)
            else:
                bad_date = str(event_date)
        for key in ("origin", "decision_state"):
            if capture.get(key) and capture[key] != "unknown":
                metadata[key] = str(capture[key])
        space_hint = capture.get("space_hint") or args.get("space_path")
        revises = str(capture.get("revises") or "")
        if revises:
            krefs.parse(revises, f"{where}.revises")
        content = clip_summary(capture["content"])
        draft = Draft(
            project=project, space=storage_space(project, None, space_hint), kind="conversation",
            memory_type=kind, title=capture["title"].strip()[:200], summary=content,
            assistant_text=content, tags=list(capture["tags"]) if capture.get("tags") else None,
            metadata=metadata, source_krefs=sources, stack=bool(space_hint), revises=revises)
        return draft, bad_date

    # -- working memory --------------------------------------------------------------------------------
    def ingest(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        project = project_of(args, client)
        message = str(args["message"])
        skipped = redaction.skip_reason(message)
        if not skipped:
            self.working.check_content(message, "message")  # before the session is resolved (or minted)
        session_id, source = resolve_session(
            self.working, session_id=args.get("session_id") or None, user_id=args["user_id"],
            context=args.get("context") or "personal", host_session_id=client.host_session_id, project=project)
        if not skipped:
            appended = self.working.append(project, session_id, "user", message)
            if appended.created_bucket:
                level = args.get("evidence_level")
                meta = {"user_id": args["user_id"], "context": args.get("context") or "personal"}
                if level in EVIDENCE_LEVELS:
                    meta["evidence_level"] = level
                if args.get("source"):
                    meta["source"] = str(args["source"])
                self.working.set_metadata(project, session_id, meta)
        buffered = self.working.messages(project, session_id, limit=_positive(
            args.get("working_memory_limit", 10), "working_memory_limit"))
        query = {"query": message, "limit": args.get("recall_limit", 5), "project": project}
        recalled = self.run_recall(query, client, with_context=False)["results"] if message.strip() else []
        if recalled:
            self._remember_recalled(project, session_id, [r["kref"] for r in recalled])
        result = {"session_id": session_id, "session_id_source": source,
                  "working_memory": [dataclasses.asdict(m) for m in buffered], "long_term_memory": recalled,
                  "should_consolidate": self.working.count(project, session_id) >= CONSOLIDATE_AFTER}
        if skipped:
            result["skipped"] = skipped
        return result

    def add_response(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        project = project_of(args, client)
        response = str(args["response"])
        skipped = redaction.skip_reason(response)
        if not skipped:
            self.working.check_content(response, "response")
        session_id, source = resolve_session(self.working, session_id=args.get("session_id"),
                                             user_id=args.get("user_id"), context=args.get("context"),
                                             host_session_id=client.host_session_id, project=project)
        if skipped:
            return {"success": False, "skipped": skipped, "session_id": session_id, "session_id_source": source}
        appended = self.working.append(project, session_id, "assistant", response)
        return {"success": True, "message_count": appended.message_count,
                "created_bucket": appended.created_bucket, "session_id": session_id, "session_id_source": source}

    def consolidate(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        """Summarise the session's buffer with the model (or store an agent-written ``summary``), write the
        transcript artifact, store the summary, clear the buffer (reference §4.10). The model's work runs on
        the interactive job lane; after ``tool_wait_seconds`` the answer says it goes on in the background."""
        project = project_of(args, client)
        provided = args.get("summary")
        if provided:
            _summary_shape(provided)  # refused before a session is resolved (or minted)
        # without a summary there must be messages: a user's session is looked up, never minted empty
        session_id, source = resolve_session(self.working, session_id=args.get("session_id"),
                                             user_id=args.get("user_id"), context=args.get("context"),
                                             host_session_id=client.host_session_id, project=project,
                                             mint=bool(provided))
        if not provided:
            if not self.working.count(project, session_id):
                raise Conflict(f"No messages to consolidate in session {session_id}: nothing was buffered "
                               "(or it was consolidated already)", field="session_id")
            unready = self.model_ready()
            if unready:
                raise InvalidArgument(f"summary: {unready} to summarise the session; pass an agent-written "
                                      "summary (text or {title, summary, …}), or install the model "
                                      "(`kumiho-ce models install`)", field="summary")
        level = args.get("evidence_level")

        def work(job: Job | None) -> dict[str, Any]:
            return self.consolidate_session(project, session_id, summary=provided, job=job,
                                            host_session_id=client.host_session_id,
                                            evidence_level=level if level in EVIDENCE_LEVELS else None)

        if provided:
            result = work(None)
        else:
            result = self._wait_for(self._jobs().submit(
                "consolidate", work, lane="interactive", key=f"consolidate:{project}:{session_id}",
                description=f"consolidate session {session_id}"))
        return {**result, "session_id": session_id, "session_id_source": source}

    def consolidate_session(self, project: str, session_id: str, *, summary: Any = None,
                            host_session_id: str | None = None, evidence_level: str | None = None,
                            job: Job | None = None) -> dict[str, Any]:
        """The whole consolidation of one session; the idle-session sweep calls it too."""
        # every buffered message: the transcript artifact must hold all that the buffer lets go of
        messages = self.working.all_messages(project, session_id)
        if summary is None and not messages:
            return {"success": False, "error": "No messages to consolidate", "buffer_was_empty": True}
        # D5: credentials were replaced before the messages were buffered (the write boundary: every tool
        # call's arguments, mcp_api.server). The transcript artifact is
        # PII-redacted with names (spaCy) unless the operator keeps raw transcripts; the model reads, and the
        # summary keeps, names (they are what a memory is about) but no structured PII (emails, phones, …).
        contents = [m.content for m in messages]
        if summary is None:
            if job is not None:
                job.progress(0, 1, f"summarising {len(messages)} messages")
            shaped = _summary_shape(consolidation.summarize(
                self.model, [(m.role, text) for m, text in zip(messages, patterns_only(contents), strict=True)],
                timeout=self.options.call_timeout, cancel=job.cancel if job else None,
                progress=(lambda n, total: job.progress(n, total, "generating")) if job else None))
        else:
            shaped = _summary_shape(summary)
        shaped["summary"], shaped["title"] = patterns_only([consolidation.summary_text(shaped["raw"]),
                                                            shaped["title"]])
        kept = contents if self.options.keep_raw_transcripts or not contents else self.redact_pii(contents)
        meta = self.working.metadata(project, session_id)
        space = "/".join(p for p in (meta.get("context"), meta.get("user_id")) if p) or \
            "/".join(shaped["topics"][:2]) or "sessions"
        transcript = "\n\n".join(f"### {m.role.capitalize()}\n<sub>{m.timestamp}</sub>\n\n{text}"
                                 for m, text in zip(messages, kept, strict=True))
        level = evidence_level or meta.get("evidence_level")
        tags = ["summarized", *([f"evidence:{level}"] if level in EVIDENCE_LEVELS else []), "published"]
        metadata = {**shaped["metadata"], **records.metadata_values({
            "session_id": session_id, "message_count": len(messages), "evidence_level": level,
            "user_id": meta.get("user_id"), "source": meta.get("source")})}
        draft = Draft(project=check_project(project), space=storage_space(project, None, space),
                      kind="conversation", memory_type=shaped["type"], title=shaped["title"],
                      summary=clip_summary(shaped["summary"]), assistant_text=transcript,
                      tags=tags, metadata=metadata, bundle_name=(shaped["topics"] or [""])[0],
                      source_krefs=_json_list(meta.get("recalled")), edge_type="REFERENCED",
                      artifact_name="conversation", stack=False)
        log.debug("consolidation: writing session %s (%d messages)", session_id, len(messages))
        stored = self.writer.write([self.writer.plan(draft)])[0]
        # after the write: a crash between keeps the buffer (consolidated again, never lost)
        cleared = self.working.clear(project, session_id,
                                     through=message_number(messages[-1].message_id) if messages else 0)
        after_consolidation(self.working, session_id, host_session_id)
        log.debug("consolidation: finished session %s", session_id)
        return {"success": True, "buffer_was_empty": not messages, "cleared_messages": cleared,
                "summary": draft.summary, "summarized_by": "agent" if summary is not None else self.model.model_id,
                "store_result": stored}

    def store_execution(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        task, status = str(args["task"]), str(args.get("status") or "done")
        exit_code = args.get("exit_code")
        failed = status in ("failed", "error", "blocked") or (exit_code is not None and exit_code != 0)
        stderr, stdout = str(args.get("stderr") or ""), str(args.get("stdout") or "")
        if failed:
            summary = (f"Attempted '{task}' but failed: {stderr[:200]}" if stderr
                       else f"Attempted '{task}' but failed with status '{status}'")
        else:
            summary = f"Executed '{task}' successfully"
        memory_type = "error" if failed else "action"
        topics = [str(t) for t in args.get("topics") or []]
        execution_log = "\n".join([f"# Tool Execution: {task}", "", f"- status: {status}", f"- exit code: {exit_code}",
                         f"- duration: {args.get('duration_ms')} ms", "", "## stdout", "```", stdout, "```",
                         "", "## stderr", "```", stderr, "```"])
        project = project_of(args, client)
        draft = Draft(project=project, space=storage_space(project, None, args.get("space_hint")),
                      kind="conversation", memory_type=memory_type,
                      title=(f"Failed: {task[:60]}" if failed else f"Successfully executed: {task[:60]}"),
                      summary=summary, user_text=task, assistant_text=execution_log,
                      tags=[memory_type, status, "published"], bundle_name=topics[0] if topics else "",
                      metadata=records.metadata_values({"exit_code": exit_code, "duration_ms": args.get("duration_ms"),
                                                        "topics": topics or None, "tools": args.get("tools")}),
                      artifact_name="execution_log", stack=False)
        stored = self.writer.write([self.writer.plan(draft)])[0]
        return {"success": True, "memory_type": memory_type, "store_result": stored}

    def _remember_recalled(self, project: str, session_id: str, found: list[str]) -> None:
        """What a session recalled or cited, so its summary can link to it (newest first, bounded)."""
        known = _json_list(self.working.metadata(project, session_id).get("recalled"))
        merged = list(dict.fromkeys([*found, *known]))[:RECALLED_KEPT]
        self.working.set_metadata(project, session_id, {"recalled": json.dumps(merged)})

    # -- maintenance -----------------------------------------------------------------------------------
    def resolve_kref(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        found = self.graph.resolve(args["kref"])
        location = None
        if found.artifact is not None:
            location = found.artifact.location
        elif found.revision is not None and found.revision.default_artifact:
            location = self.graph.get_artifact(f"{found.revision.kref}&a={found.revision.default_artifact}").location
        return {"kref": found.kref, "target": found.target, "location": location, "resolved": location is not None}

    def get_revision_by_tag(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        return views.revision_view(self.graph.revision_by_tag(args["item_kref"], args.get("tag") or "published"))

    def deprecate_item(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        parsed = krefs.parse(args["item_kref"], "item_kref")
        if not parsed.is_item or parsed.revision is not None:
            raise InvalidArgument("item_kref: name an item (kref://project/space/name.kind)", field="item_kref")
        deprecated = bool(args.get("deprecated", True))
        found = self.graph.set_deprecated(args["item_kref"], deprecated)
        return {"updated": True, "item_kref": found.kref, "deprecated": deprecated}

    def fulltext(self, args: dict[str, Any], client: Client) -> dict[str, Any]:
        """Typo-tolerant item search; ``context`` is a project/space path prefix (by segments)."""
        query = str(args["query"])
        context = str(args.get("context") or "").strip().strip("/")
        project = context.split("/", 1)[0] if context else None
        where = SearchFilter(project=project, spaces=("/" + context,) if context else (),
                             kinds=(args["kind"],) if args.get("kind") else (),
                             include_deprecated=bool(args.get("include_deprecated")))
        limit = _positive(args.get("limit", 20), "limit")
        self.recaller.wait_for_index()
        hits = self.recaller.search.search(SearchRequest(query, where, "text", limit=limit * 3))
        best: dict[str, float] = {}
        for hit in hits:
            item = str(krefs.parse(hit.revision_kref).item())
            best.setdefault(item, hit.score)
        results = []
        for item_kref, score in list(best.items())[:limit]:
            try:
                item = self.graph.get_item(item_kref)
            except NotFound:
                continue
            entry: dict[str, Any] = {"item": views.item_view(item, bool(args.get("include_metadata"))),
                                     "score": round(score, 4), "matched_in": "revision"}
            if args.get("include_revision_metadata"):
                current = self.graph.current_revisions([item_kref]).get(item_kref)
                entry["revision"] = views.revision_view(current) if current else None
            results.append(entry)
        return {"results": results, "count": len(results), "total": len(best), "query": query,
                "search_mode": "fuzzy", "filters": {"context": args.get("context", ""), "kind": args.get("kind", "")}}


def _query_text(args: dict[str, Any]) -> str:
    parts = [str(args.get("query") or "")] + [str(k) for k in args.get("keywords") or []] + \
        [str(t) for t in args.get("topics") or []]
    return " ".join(p for p in parts if p.strip())


def _positive(value: Any, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidArgument(f"{field}: must be a positive whole number (got {value!r})", field=field)
    return min(value, 100)


def _caller_metadata(values: dict[str, Any] | None) -> dict[str, str]:
    encoded = records.metadata_values(values)
    for key, value in encoded.items():
        if len(value) > MAX_METADATA_VALUE:
            raise InvalidArgument(f"metadata.{key[:64]}: at most {MAX_METADATA_VALUE} characters (JSON-encoded "
                                  f"when not a string; got {len(value)}); keep long text in the memory itself",
                                  field=f"metadata.{key[:64]}")
    return encoded


def _krefs(values: Any) -> list[str]:
    found = []
    for index, value in enumerate(values or []):
        found.append(str(krefs.parse(value, f"source_krefs[{index}]")))
    return list(dict.fromkeys(found))


def _json_list(text: str | None) -> list[str]:
    try:
        value = json.loads(text) if text else []
    except ValueError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []


def _retrieve_mode(mode: str, query: str) -> str:
    normal = re.sub(r"[\s-]+", "_", (mode or "").strip().lower())
    if normal in ("latest", "newest", "recent", "most_recent"):
        return "latest"
    if normal in ("first", "earliest", "oldest", "initial"):
        return "first"
    if normal == "" and re.search(r"\b(first|earliest|oldest|initial)\b", query.lower()):
        return "first"
    if normal in ("search", ""):
        return "search"
    raise InvalidArgument(f"mode: {mode!r} is not a retrieve mode; use search, latest or first", field="mode")


def _summary_shape(summary: Any) -> dict[str, Any]:
    """An agent-written summary (text or object) in the summariser's shape (reference §4.10)."""
    if isinstance(summary, dict) and len(json.dumps(summary, default=str)) > MAX_SUMMARY_OBJECT:
        raise InvalidArgument(f"summary: at most {MAX_SUMMARY_OBJECT} characters as JSON; shorten its texts",
                              field="summary")
    if isinstance(summary, str):
        summary = {"summary": summary}
    if not isinstance(summary, dict) or not str(summary.get("summary") or "").strip():
        raise InvalidArgument("summary: give the summary text, or an object with at least a 'summary' field",
                              field="summary")
    kind = str(summary.get("type") or "summary")
    if kind not in ("summary", "fact", "decision", "action", "reflection", "error"):
        kind = "summary"
    classification = summary.get("classification") or {}
    topics = [str(t) for t in classification.get("topics") or []] if isinstance(classification, dict) else []
    metadata = records.metadata_values({
        "topics": topics or None,
        "entities": (classification.get("entities") if isinstance(classification, dict) else None) or None,
        "events": summary.get("events") or None, "facts": (summary.get("knowledge") or {}).get("facts") or None
        if isinstance(summary.get("knowledge"), dict) else None,
        "decisions": (summary.get("knowledge") or {}).get("decisions") or None
        if isinstance(summary.get("knowledge"), dict) else None,
        "implications": summary.get("implications") or None})
    return {"type": kind, "title": str(summary.get("title") or "Conversation")[:200],
            "summary": str(summary["summary"]), "topics": topics, "metadata": metadata, "raw": summary}

