"""Consolidation (reference §4.10): one session's buffer becomes one long-term memory.

``Consolidator.run`` is the whole pipeline — read every buffered message, summarise them with the local
model (or take an agent-written summary), write the redacted transcript and the summary as one memory,
clear exactly what was archived, retire the session — for ``kumiho_memory_consolidate`` and for the
idle-session sweep alike. The summariser (``summarize``: the redacted transcript in, the summariser's JSON
shape out) and the stored text with its appended sections (``summary_text``) are pure apart from the
model call."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from appliance.core.ports import ChatModel, Progress, answer_budget
from appliance.errors import InvalidArgument
from appliance.inference import prompts
from appliance.jobs import Job
from appliance.memory import records
from appliance.memory.sessions import after_consolidation, recalled
from appliance.memory.spaces import check_project, storage_space
from appliance.memory.working import WorkingMemory, message_number
from appliance.memory.writer import Draft, MemoryWriter, clip_summary
from appliance.operations.sessions import MAX_SUMMARY_OBJECT

log = logging.getLogger(__name__)
Redact = Callable[[list[str]], list[str]]  # PII redaction of many texts at once (spaCy + patterns)
EVIDENCE_LEVELS = ("official", "corroborated", "single_source", "unverified")

SUMMARY_TYPES = ("summary", "fact", "decision", "action", "reflection", "error")
TRANSCRIPT_BUDGET = 9000  # characters sent to the model: ~2.5k tokens, room for the answer in 4k


def _strings(most: int, length: int) -> dict[str, Any]:
    return {"type": "array", "maxItems": most, "items": {"type": "string", "minLength": 1, "maxLength": length}}


# Bounded everywhere: a 0.5B model under a grammar loops to the token limit on open lists or strings. The
# order is the order of importance: a run cut short by its deadline has the summary already.
SUMMARY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "type": {"enum": list(SUMMARY_TYPES)},
        "title": {"type": "string", "minLength": 1, "maxLength": 80},
        "summary": {"type": "string", "minLength": 1, "maxLength": 600},
        "topics": _strings(3, 30),
        "entities": _strings(4, 40),
        "facts": _strings(3, 160),
        "decisions": _strings(2, 160),
        "events": {"type": "array", "maxItems": 2, "items": {
            "type": "object", "properties": {"when": {"type": "string", "maxLength": 20},
                                             "event": {"type": "string", "minLength": 1, "maxLength": 160}},
            "required": ["when", "event"], "additionalProperties": False}},
        "implications": _strings(2, 160),
    },
    "required": ["type", "title", "summary", "topics", "entities", "facts", "decisions", "events",
                 "implications"],
    "additionalProperties": False,
}


def transcript(messages: Sequence[tuple[str, str]], budget: int = TRANSCRIPT_BUDGET) -> str:
    """``role: text`` lines; over the budget, the start and the end of the session with the middle cut
    (a session's opening sets its topic, its end holds the outcome)."""
    lines = [f"{role}: {' '.join(text.split())}" for role, text in messages]
    text = "\n".join(lines)
    if len(text) <= budget:
        return text
    head: list[str] = []
    tail: list[str] = []
    used = 0
    for i in range(len(lines)):
        for side, line in ((head, lines[i]), (tail, lines[-1 - i])):
            if used + len(line) + 1 > budget - 40:
                omitted = len(lines) - len(head) - len(tail)
                return "\n".join([*head, f"[… {omitted} messages omitted …]", *reversed(tail)])
            side.append(line)
            used += len(line) + 1
    return text


def summarize(model: ChatModel, messages: Sequence[tuple[str, str]], *, timeout: float,
              cancel: threading.Event | None = None, progress: Progress | None = None) -> dict[str, Any]:
    """The model's summary of the (already redacted) messages, in the agent-summary shape that
    ``summary_shape`` reads: {type, title, summary, classification, knowledge, events, implications}."""
    answer = model.complete_json(prompts.render("summarize_session", transcript=transcript(messages)),
                                 SUMMARY_SCHEMA, max_tokens=answer_budget(SUMMARY_SCHEMA), timeout=timeout,
                                 cancel=cancel, progress=progress)
    return {
        "type": answer["type"], "title": answer["title"].strip() or "Conversation",
        "summary": answer["summary"].strip(),
        "classification": {"topics": _clean(answer["topics"]), "entities": _clean(answer["entities"])},
        "knowledge": {"facts": _clean(answer["facts"]), "decisions": _clean(answer["decisions"])},
        "events": [{"when": e["when"].strip(), "event": e["event"].strip()} for e in answer["events"]
                   if e["event"].strip()],
        "implications": _clean(answer["implications"]),
    }


def summary_text(shaped: dict[str, Any]) -> str:
    """The stored summary: the text, then its key events, facts, decisions and implications (step 5)."""
    parts = [str(shaped["summary"]).strip()]
    events = [_event_line(e) for e in shaped.get("events") or [] if isinstance(e, dict) and e.get("event")]
    knowledge = shaped.get("knowledge") or {}
    sections = (("Key events", events), ("Key facts", _clean(knowledge.get("facts"))),
                ("Decisions", _clean(knowledge.get("decisions"))),
                ("Future relevance", _clean(shaped.get("implications"))))
    for heading, lines in sections:
        if lines:
            parts.append(f"{heading}:\n" + "\n".join(f"- {line}" for line in lines))
    return "\n\n".join(parts)


def _event_line(event: dict[str, Any]) -> str:
    when = str(event.get("when") or "").strip()
    return f"[{when}] {event['event']}" if when and when.lower() != "unknown" else str(event["event"])


def _clean(values: Any) -> list[str]:
    if not isinstance(values, list):
        return []
    out: list[str] = []
    for value in values:
        text = (value.get("decision") or value.get("claim") or "") if isinstance(value, dict) else value
        text = " ".join(str(text).split())
        if text and text not in out:
            out.append(text)
    return out



def summary_shape(summary: Any) -> dict[str, Any]:
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
    if kind not in SUMMARY_TYPES:
        kind = "summary"
    classification = summary.get("classification") or {}
    topics = [str(t) for t in classification.get("topics") or []] if isinstance(classification, dict) else []
    knowledge: dict[str, Any] = summary["knowledge"] if isinstance(summary.get("knowledge"), dict) else {}
    metadata = records.metadata_values({
        "topics": topics or None,
        "entities": (classification.get("entities") if isinstance(classification, dict) else None) or None,
        "events": summary.get("events") or None, "facts": knowledge.get("facts") or None,
        "decisions": knowledge.get("decisions") or None, "implications": summary.get("implications") or None})
    return {"type": kind, "title": str(summary.get("title") or "Conversation")[:200],
            "summary": str(summary["summary"]), "topics": topics, "metadata": metadata, "raw": summary}


@dataclass(frozen=True)
class Consolidator:
    """Consolidates one session; built once on the appliance's stores and model."""

    working: WorkingMemory
    writer: MemoryWriter
    model: ChatModel
    redact_pii: Redact  # the transcript artifact's name redaction (spaCy + patterns)
    patterns_only: Redact  # what the model reads and the summary keeps: structured PII only
    call_timeout: float  # one summarisation call
    keep_raw_transcripts: bool = False  # D5: transcripts are PII-redacted unless the operator keeps them

    def run(self, project: str, session_id: str, *, summary: str | dict[str, Any] | None = None,
            host_session_id: str | None = None, evidence_level: str | None = None, source: str | None = None,
            implications: list[str] | None = None, job: Job | None = None) -> dict[str, Any]:
        """The whole consolidation of one session; the idle-session sweep calls it too. ``evidence_level``
        and ``source`` override what ingest recorded for the session; ``implications`` (future situations in
        which the memory matters) are used when the summary brings none."""
        # every buffered message: the transcript artifact must hold all that the buffer lets go of
        messages = self.working.all_messages(project, session_id)
        if summary is None and not messages:
            return {"success": False, "error": "No messages to consolidate", "buffer_was_empty": True}
        # D5: credentials were replaced before the messages were buffered (the write boundary: every tool
        # call's arguments, mcp_api.server). The transcript artifact is PII-redacted with names (spaCy) unless
        # the operator keeps raw transcripts; the model reads, and the summary keeps, names (they are what a
        # memory is about) but no structured PII (emails, phones, …).
        contents = [m.content for m in messages]
        if summary is None:
            if job is not None:
                job.progress(0, 1, f"summarising {len(messages)} messages")
            shaped = summary_shape(summarize(
                self.model, [(m.role, text) for m, text in zip(messages, self.patterns_only(contents), strict=True)],
                timeout=self.call_timeout, cancel=job.cancel if job else None,
                progress=(lambda n, total: job.progress(n, total, "generating")) if job else None))
        else:
            shaped = summary_shape(summary)
        if implications and not shaped["raw"].get("implications"):
            shaped = summary_shape({**shaped["raw"], "implications": implications})
        shaped["summary"], shaped["title"] = self.patterns_only([summary_text(shaped["raw"]), shaped["title"]])
        kept = contents if self.keep_raw_transcripts or not contents else self.redact_pii(contents)
        meta = self.working.metadata(project, session_id)
        space = "/".join(p for p in (meta.get("context"), meta.get("user_id")) if p) or \
            "/".join(shaped["topics"][:2]) or "sessions"
        transcript_text = "\n\n".join(f"### {m.role.capitalize()}\n<sub>{m.timestamp}</sub>\n\n{text}"
                                       for m, text in zip(messages, kept, strict=True))
        level = evidence_level if evidence_level in EVIDENCE_LEVELS else meta.get("evidence_level")
        tags = ["summarized", *([f"evidence:{level}"] if level in EVIDENCE_LEVELS else []), "published"]
        metadata = {**shaped["metadata"], **records.metadata_values({
            "session_id": session_id, "message_count": len(messages), "evidence_level": level,
            "user_id": meta.get("user_id"), "source": source or meta.get("source")})}
        draft = Draft(project=check_project(project), space=storage_space(project, None, space),
                      kind="conversation", memory_type=shaped["type"], title=shaped["title"],
                      summary=clip_summary(shaped["summary"]), assistant_text=transcript_text,
                      tags=tags, metadata=metadata, bundle_name=(shaped["topics"] or [""])[0],
                      source_krefs=recalled(self.working, project, session_id), edge_type="REFERENCED",
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
