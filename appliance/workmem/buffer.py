"""Kumiho's working-memory buffer operations (what its sidecar's ``RedisMemoryBuffer`` does) on the appliance's
own persisted working memory (``appliance.memory.working``), so that what the sidecar buffers is what the
appliance's tools read and what its idle-session consolidation archives.

Both doors of the sidecar use it: the memory-proxy route (``POST /api/memory/redis``) calls these operations;
the Redis-protocol listener maps single commands onto the same working memory and encodes messages with
``message_json`` / ``incoming_message``.

What differs from Redis, on purpose: buffers do not expire (they survive restarts and stay until consolidated
or cleared: the TTLs the sidecar asks for are accepted and not applied), active-session pointers live 24 hours
as the appliance's own do, and credentials in message text become ``[secret]`` before anything is buffered,
as on every other door (consolidation relies on it).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from appliance.core.redaction import redact_value
from appliance.errors import InvalidArgument
from appliance.memory.working import Message, WorkingMemory, check_message_metadata, check_metadata_write


@dataclass(frozen=True, slots=True)
class Incoming:
    role: str
    content: str
    metadata: dict[str, Any]


def incoming_message(role: object, content: object, metadata: object) -> Incoming:
    """A message as the sidecar sends it, checked, with credentials replaced."""
    if not isinstance(role, str):
        raise InvalidArgument("role: give a string (user, assistant, system or tool)", field="role")
    if not isinstance(content, str):
        raise InvalidArgument("content: give the message text as a string", field="content")
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise InvalidArgument("metadata: give a JSON object or omit it", field="metadata")
    check_message_metadata(metadata)  # the bound first: redaction scans every string it is given
    cleaned, _ = redact_value({"content": content, "metadata": metadata})
    return Incoming(role, cleaned["content"], cleaned["metadata"])


def parse_pushed(value: str) -> Incoming:
    """An RPUSH value: the JSON message ``{role, content, timestamp, metadata}`` the sidecar writes (its
    timestamp is replaced by the appliance's own clock, as every buffered message's)."""
    try:
        message = json.loads(value)
    except ValueError:
        message = None
    if not isinstance(message, dict):
        raise InvalidArgument("value: give one JSON message {role, content, timestamp, metadata} as Kumiho's "
                              "buffer writes it", field="value")
    return incoming_message(message.get("role"), message.get("content"), message.get("metadata"))


def message_dict(message: Message) -> dict[str, Any]:
    """A buffered message as the sidecar reads it back."""
    return {"role": message.role, "content": message.content, "timestamp": message.timestamp,
            "metadata": message.metadata}


def message_json(message: Message) -> str:
    return json.dumps(message_dict(message), ensure_ascii=False)


def redacted_strings(values: dict[str, str]) -> dict[str, str]:
    """Session metadata to merge, within its bounds, with credentials replaced."""
    check_metadata_write(values)  # the bound first: redaction scans every string it is given
    cleaned, _ = redact_value(values)
    return dict(cleaned)


class KumihoBuffer:
    """The sidecar's buffer operations, one method per memory-proxy action."""

    def __init__(self, working: WorkingMemory) -> None:
        self.working = working

    def add_message(self, project: str, session_id: str, role: str, content: str,
                    metadata: dict[str, Any] | None) -> dict[str, Any]:
        message = incoming_message(role, content, metadata)
        appended = self.working.append(project, session_id, message.role, message.content, message.metadata)
        return {"success": True, "message_id": appended.message_id, "message_count": appended.message_count,
                "created_bucket": appended.created_bucket}

    def get_messages(self, project: str, session_id: str, limit: int, offset: int) -> dict[str, Any]:
        found = self.working.messages(project, session_id, limit=limit, offset=offset)
        return {"messages": [message_dict(m) for m in found], "session_id": session_id,
                "message_count": self.working.count(project, session_id), "ttl_remaining": None}

    def set_session_metadata(self, project: str, session_id: str, metadata: dict[str, str]) -> dict[str, Any]:
        self.working.set_metadata(project, session_id, redacted_strings(metadata))
        return {"success": True}

    def get_session_metadata(self, project: str, session_id: str) -> dict[str, Any]:
        return {"metadata": self.working.metadata(project, session_id)}

    def clear_session(self, project: str, session_id: str) -> dict[str, Any]:
        cleared = self.working.clear(project, session_id)  # the metadata goes with the last message
        self.working.clear_metadata(project, session_id)  # and when there was none
        return {"success": True, "cleared_count": cleared}

    def list_sessions(self, project: str, limit: int) -> dict[str, Any]:
        sessions = self.working.sessions(project)  # most recently active first
        return {"sessions": [s.session_id for s in sessions[:limit]], "total_sessions": len(sessions)}

    def next_sequence(self, user_canonical_id: str, date_str: str) -> dict[str, Any]:
        return {"sequence": self.working.next_sequence(user_canonical_id, date_str)}

    def get_active_session(self, context: str, user_canonical_id: str) -> dict[str, Any]:
        return {"session_id": self.working.active_session(context, user_canonical_id)}

    def set_active_session(self, context: str, user_canonical_id: str, session_id: str, nx: bool
                           ) -> dict[str, Any]:
        if nx:
            winner = self.working.claim_active_session(context, user_canonical_id, session_id)
            return {"success": True, "claimed": winner == session_id}
        self.working.point_active_session(context, user_canonical_id, session_id)
        return {"success": True, "claimed": True}

    def clear_active_session(self, context: str, user_canonical_id: str, only_if: str | None) -> dict[str, Any]:
        self.working.clear_active_session(context, user_canonical_id, only_if)
        return {"success": True}

    def get_session_generation(self, base_session_id: str) -> dict[str, Any]:
        return {"generation": self.working.generation(base_session_id)}

    def bump_session_generation(self, base_session_id: str) -> dict[str, Any]:
        return {"generation": self.working.bump_generation(base_session_id)}
