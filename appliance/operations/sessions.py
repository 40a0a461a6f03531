"""Sessions and working memory: buffering a conversation and consolidating it into long-term memory."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, WithJsonSchema

from appliance.operations.definition import Input, Operation
from appliance.operations.fields import Context, SessionId, UserId

Message = Annotated[str, Field(max_length=65536)]
# The chat tools' buffer project: absent, the client's (Kumiho's schema gives these no default)
ChatProject = Annotated[str | None, Field(max_length=128)]
EvidenceLevel = Literal["official", "corroborated", "single_source", "unverified"]
MAX_SUMMARY_OBJECT = 65536  # characters of an agent-written summary object, JSON-encoded
# An agent-written summary: its text, or the summariser's object ({title, summary, classification, …}).
Summary = Annotated[str | dict[str, Any], WithJsonSchema(
    {"type": ["object", "string"], "maxLength": MAX_SUMMARY_OBJECT, "maxProperties": 16})]


class IngestInput(Input):
    user_id: UserId
    message: Message
    context: Context = "personal"
    session_id: SessionId | None = None
    working_memory_limit: int = Field(10, ge=1, le=1000)  # more than 100 is treated as 100, as recall's limit
    recall_limit: int = Field(5, ge=1, le=1000)
    evidence_level: EvidenceLevel | None = None
    source: str | None = Field(None, max_length=1024)


class AddResponseInput(Input):
    session_id: SessionId | None = None
    response: Message
    user_id: UserId | None = None
    context: Context | None = None


class ConsolidateInput(Input):
    session_id: SessionId | None = None
    summary: Summary | None = None
    implications: Annotated[list[Annotated[str, Field(max_length=1000)]], Field(max_length=32)] | None = None
    evidence_level: EvidenceLevel | None = None
    source: str | None = Field(None, max_length=1024)
    user_id: UserId | None = None
    context: Context | None = None


class ChatAddInput(Input):
    project: ChatProject = None
    session_id: SessionId | None = None
    message: Message
    role: Literal["user", "assistant"] = "user"
    user_id: UserId | None = None
    context: Context | None = None


class ChatGetInput(Input):
    project: ChatProject = None
    session_id: SessionId | None = None
    limit: int = Field(50, ge=1, le=1000)
    user_id: UserId | None = None
    context: Context | None = None


class ChatClearInput(Input):
    project: ChatProject = None
    session_id: SessionId | None = None
    user_id: UserId | None = None
    context: Context | None = None


OPERATIONS = (
    Operation("kumiho_memory_ingest", "Ingest a user message",
              "Buffer a user message in the session's working memory and recall related long-term memories.",
              IngestInput),
    Operation("kumiho_memory_add_response", "Buffer an assistant response",
              "Append an assistant response to the session's working memory.",
              AddResponseInput),
    Operation("kumiho_memory_consolidate", "Consolidate the session into long-term memory",
              "Consolidate a session's working memory into one long-term memory: with an agent-written `summary` "
              "(no model needed) or summarised by the local model; writes the redacted transcript as an artifact "
              "and clears the buffer.",
              ConsolidateInput),
    Operation("kumiho_chat_add", "Add to the chat buffer",
              "Append a user or assistant message to the session's working memory; answers its message_id "
              "('<session_id>:<n>').",
              ChatAddInput),
    Operation("kumiho_chat_get", "Read the chat buffer",
              "Read the last `limit` messages buffered in the session's working memory, oldest first.",
              ChatGetInput, read_only=True, idempotent=True),
    Operation("kumiho_chat_clear", "Clear the chat buffer",
              "Delete the session's buffered messages and its session metadata, without consolidating them.",
              ChatClearInput, destructive=True, idempotent=True),
)
