"""What a recalled memory looks like to an agent (reference §4.4 step 4, §4.5 step 4). Pure."""

from __future__ import annotations

import json
from typing import Any

from appliance.core.model import Revision

SCHEMA = "kumiho.agent_memory.v1"
# metadata keys copied into a recalled memory when present (reference §4.4)
_OPTIONAL = ("evidence_level", "source", "origin", "decision_state", "event_date", "event_date_confidence",
             "valid_from", "valid_to", "status", "grounding_stale", "superseded_by", "topics", "facts")
_BADGES = {"official": "[official] ", "corroborated": "[corroborated] ", "unverified": "[unverified] "}
CONTEXT_BUDGET = 8000  # characters of one memory's content in full mode


def memory_type(metadata: dict[str, str]) -> str:
    return (metadata.get("memory_type") or metadata.get("type") or "").lower()


def summary_of(metadata: dict[str, str]) -> str:
    return metadata.get("summary") or metadata.get("content") or metadata.get("text") or ""


def memory(revision: Revision, score: float, base_score: float | None, space: str, mode: str) -> dict[str, Any]:
    """A recall result. Every result carries ``content`` (agent hosts show it): the summary in summarized
    mode, the stored text in full mode."""
    meta = revision.metadata
    summary = summary_of(meta)
    title = meta.get("title") or summary[:120]
    content = summary if mode == "summarized" else (meta.get("content") or meta.get("assistant_text") or summary)
    found: dict[str, Any] = {
        "kref": revision.kref, "item_kref": revision.item_kref, "score": round(score, 4),
        "title": title, "summary": summary, "content": content[:CONTEXT_BUDGET], "type": memory_type(meta),
        "space": space, "created_at": revision.created_at, "tags": list(revision.tags),
        "revision": revision.number,
    }
    if base_score is not None and abs(base_score - score) > 1e-9:
        found["base_score"] = round(base_score, 4)
    for key in _OPTIONAL:
        if meta.get(key):
            found[key] = meta[key]
    if meta.get("status") == "superseded":
        found["superseded"] = True
    return found


def context_block(found: dict[str, Any], mode: str) -> str | None:
    """One memory as a block of engage's ``context`` (None when it has nothing to say)."""
    badge = _BADGES.get(str(found.get("evidence_level", "")), "")
    if mode == "full" and found.get("content"):
        text = str(found["content"])
        body = text if len(text) <= CONTEXT_BUDGET else text[:CONTEXT_BUDGET] + "…[truncated]"
        block = badge + body
    else:
        if not found.get("summary"):
            return None
        date = f"[{found['event_date']}] " if found.get("event_date") else ""
        title = f"{found['title']}: " if found.get("title") and found["title"] != found["summary"] else ""
        block = f"{badge}{date}{title}{found['summary']}"
    if found.get("facts"):
        block += f"\nFacts: {found['facts']}"
    for note in _notes(found):
        block += "\n" + note
    return block


def _notes(found: dict[str, Any]) -> list[str]:
    notes = []
    if found.get("grounding_stale") == "true":
        notes.append("[grounding stale: a fact this was based on was superseded]")
    if found.get("superseded"):
        notes.append("[superseded: a later memory replaced this]")
    state = found.get("decision_state")
    if state in ("proposal", "proposed"):
        notes.append("[proposal: floated, not an accepted decision]")
    elif state == "rejected":
        notes.append("[rejected: not an accepted decision; historical outcomes may still inform review]")
    elif state == "contested":
        notes.append("[contested: decision acceptance is disputed]")
    if found.get("origin") == "agent":
        notes.append("[origin: agent-asserted, not independently verified]")
    return notes


def context(results: list[dict[str, Any]], mode: str) -> str:
    return "\n\n".join(block for r in results if (block := context_block(r, mode)))


def metadata_values(values: dict[str, Any] | None) -> dict[str, str]:
    """Caller metadata as strings: non-strings JSON-encoded, ``None`` dropped (reference §4.8 step 7)."""
    return {str(k): v if isinstance(v, str) else json.dumps(v, default=str)
            for k, v in (values or {}).items() if v is not None}


def json_strings(text: str | None) -> list[str]:
    """A JSON list kept in a metadata value or a session field, as strings; anything else reads as empty."""
    try:
        value = json.loads(text) if text else []
    except ValueError:
        return []
    return [str(v) for v in value] if isinstance(value, list) else []
