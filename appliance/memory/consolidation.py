"""Summarising a session with the local model (reference §4.10 step 4): the redacted transcript in, the
summariser's JSON shape out, and the stored summary text with its appended sections (step 5). Pure apart
from the model call."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from appliance.core.ports import ChatModel, Progress, answer_budget
from appliance.inference import prompts

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
    ``service._summary_shape`` reads: {type, title, summary, classification, knowledge, events, implications}."""
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

