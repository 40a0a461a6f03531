"""Sessions and working memory (reference §4.1–§4.3): buffering a conversation in the persisted working memory
(``appliance.memory.working``), and the raw buffer operations ``kumiho_chat_*``.

Every call resolves its session the same way (``appliance.memory.sessions.resolve_session``) and echoes
``session_id`` and ``session_id_source``. Unlike the reference's Redis buffers, these never expire: they
survive restarts and are kept until consolidated or cleared, so ``ttl_remaining`` is null.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from appliance.core import redaction
from appliance.errors import Conflict, NotFound
from appliance.memory.client import Client
from appliance.memory.sessions import remember_recalled, resolve_session
from appliance.memory.spaces import project_for
from appliance.memory.working import WorkingMemory
from appliance.operations.sessions import (
    AddResponseInput,
    ChatAddInput,
    ChatClearInput,
    ChatGetInput,
    IngestInput,
)
from appliance.services.recall import MAX_RESULTS, RecallRequest, RecallService

if TYPE_CHECKING:
    from appliance.services import Handler

CONSOLIDATE_AFTER = 50  # buffered messages before ingest says should_consolidate
INGEST_SHOWN = 100  # at most this many buffered messages in ingest's answer (as recall's 100 results)

class SessionService:
    def __init__(self, working: WorkingMemory, recall: RecallService) -> None:
        self.working, self.recall = working, recall

    def handlers(self) -> dict[str, Handler]:
        return {"kumiho_memory_ingest": self.ingest, "kumiho_memory_add_response": self.add_response,
                "kumiho_chat_add": self.chat_add, "kumiho_chat_get": self.chat_get,
                "kumiho_chat_clear": self.chat_clear}

    def ingest(self, args: IngestInput, client: Client) -> dict[str, Any]:
        """Buffer the user's message, then recall what long-term memory holds about it (§4.3)."""
        project = project_for(None, client)
        message = args.message
        skipped = redaction.skip_reason(message)
        if not skipped:
            self.working.check_content(message, "message")  # before the session is resolved (or minted)
        session_id, source = resolve_session(
            self.working, session_id=args.session_id or None, user_id=args.user_id, context=args.context,
            host_session_id=client.host_session_id, project=project)
        if not skipped:
            appended = self.working.append(project, session_id, "user", message)
            if appended.created_bucket:
                meta = {"user_id": args.user_id, "context": args.context}
                if args.evidence_level:
                    meta["evidence_level"] = args.evidence_level
                if args.source:
                    meta["source"] = args.source
                self.working.set_metadata(project, session_id, meta)
        buffered = self.working.messages(project, session_id, limit=min(args.working_memory_limit, INGEST_SHOWN))
        request = RecallRequest(query=message, project=project, limit=min(args.recall_limit, MAX_RESULTS))
        recalled = self.recall.run(request).results if message.strip() else []
        if recalled:
            remember_recalled(self.working, project, session_id, [r["kref"] for r in recalled])
        result = {"session_id": session_id, "session_id_source": source,
                  "working_memory": [dataclasses.asdict(m) for m in buffered], "long_term_memory": recalled,
                  "should_consolidate": self.working.count(project, session_id) >= CONSOLIDATE_AFTER}
        if skipped:
            result["skipped"] = skipped
        return result

    def add_response(self, args: AddResponseInput, client: Client) -> dict[str, Any]:
        project = project_for(None, client)
        added = self._append(project, args.session_id, args.user_id, args.context, "assistant", args.response,
                             "response", client)
        added.pop("message_id", None)
        return added

    def chat_add(self, args: ChatAddInput, client: Client) -> dict[str, Any]:
        project = project_for(args.project, client)
        return self._append(project, args.session_id, args.user_id, args.context, args.role, args.message,
                            "message", client)

    def chat_get(self, args: ChatGetInput, client: Client) -> dict[str, Any]:
        project = project_for(args.project, client)
        session_id, source = self._existing(project, args.session_id, args.user_id, args.context, client)
        messages = self.working.messages(project, session_id, limit=args.limit)
        return {"messages": [dataclasses.asdict(m) for m in messages], "session_id": session_id,
                "message_count": self.working.count(project, session_id), "ttl_remaining": None,
                "session_id_source": source}

    def chat_clear(self, args: ChatClearInput, client: Client) -> dict[str, Any]:
        project = project_for(args.project, client)
        session_id, source = self._existing(project, args.session_id, args.user_id, args.context, client)
        cleared = self.working.clear(project, session_id)
        return {"success": True, "cleared_count": cleared, "session_id": session_id, "session_id_source": source}

    def _append(self, project: str, session_id: str | None, user_id: str | None, context: str | None, role: str,
                text: str, field: str, client: Client) -> dict[str, Any]:
        skipped = redaction.skip_reason(text)
        if not skipped:
            self.working.check_content(text, field)  # before the session is resolved (or minted)
        session_id, source = resolve_session(self.working, session_id=session_id, user_id=user_id,
                                             context=context, host_session_id=client.host_session_id,
                                             project=project)
        if skipped:
            return {"success": False, "skipped": skipped, "session_id": session_id, "session_id_source": source}
        appended = self.working.append(project, session_id, role, text)
        return {"success": True, "message_id": appended.message_id, "message_count": appended.message_count,
                "created_bucket": appended.created_bucket, "session_id": session_id, "session_id_source": source}

    def _existing(self, project: str, session_id: str | None, user_id: str | None, context: str | None,
                  client: Client) -> tuple[str, str]:
        """The session a read or a clear is about: resolved like any other, but a user without an active
        session gets a clear error instead of a new, empty session."""
        try:
            return resolve_session(self.working, session_id=session_id, user_id=user_id, context=context,
                                   host_session_id=client.host_session_id, project=project, mint=False)
        except Conflict:
            where = (context or "personal")[:64]
            raise NotFound(f"user_id: {str(user_id)[:64]!r} has no active session in context {where!r} (nothing was "
                           "buffered in the last 24 hours, or it was consolidated); pass the session_id an "
                           "earlier call reported", field="user_id") from None
