"""The JSON shapes of the Memory API (``/api/v1/memories``): seed 001's entry and the bodies and answers of
its operations. Every field a client sends has its bound here (and again in ``appliance.memory.entries``,
which the command line and any other caller pass too)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from appliance.memory import entries, namespaces
from appliance.services.memory_api import MAX_BATCH, MAX_LIMIT

Key = Annotated[str, Field(min_length=1, max_length=entries.MAX_KEY,
                           description=f"the entry's key (1..{entries.MAX_KEY} characters, no control characters)")]
Namespace = Annotated[str | None, Field(
    max_length=namespaces.MAX_NAMESPACE,
    description="the namespace (letters, digits, '_' and '-'; at most 64 characters); none = [memory] "
                "default_namespace")]
Category = Annotated[str, Field(min_length=1, max_length=entries.MAX_CATEGORY,
                                description="core | daily | conversation | a custom label (lower-cased)")]
SessionId = Annotated[str | None, Field(max_length=entries.MAX_SESSION_ID, description="the session it belongs to")]
Time = Annotated[str | None, Field(max_length=64, description="an RFC 3339 time with its offset",
                                   json_schema_extra={"format": "date-time"})]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class EntryShape(BaseModel):
    """A memory entry (seed 001's MemoryEntry)."""

    id: str = Field(description="the entry's item id (project/space/name.memory)")
    key: str
    content: str
    category: str = Field(description="core | daily | conversation | a custom label")
    timestamp: str = Field(description="RFC 3339 time its current content was stored")
    session_id: str | None
    score: float | None = Field(description="0..1 relevance on recall (time-decayed unless core); null elsewhere")
    namespace: str
    importance: float | None = Field(description="0..1; higher surfaces first on recall")
    superseded_by: str | None = Field(description="the key of the entry that replaces this one")
    kref: str = Field(description="the item's kref (what the MCP tools and Kumiho's REST API name it by)")
    metadata: dict[str, str] = Field(description="what store_with_metadata added")


class StoreBody(_Body):
    """store / store_with_metadata: a new entry, or a new revision of the key's entry."""

    key: Key
    content: str = Field(max_length=entries.MAX_CONTENT,
                         description=f"the text to store (at most {entries.MAX_CONTENT} characters; credentials "
                                     "become [secret])")
    category: Category = "core"
    namespace: Namespace = None
    session_id: SessionId = None
    importance: float | None = Field(None, ge=0.0, le=1.0,
                                     description="0.0..1.0 (a number: not a string or a boolean); raises the "
                                                 "recall rank")
    superseded_by: Key | None = Field(None, description="the key of an existing entry that replaces this one")
    supersedes: Key | None = Field(None, description="the key of an existing entry this one replaces")
    metadata: dict[str, Annotated[str, Field(max_length=entries.MAX_EXTRA_VALUE)]] | None = Field(
        None, max_length=entries.MAX_EXTRA,
        description=f"store_with_metadata: at most {entries.MAX_EXTRA} more names (a letter, then letters, digits, "
                    f"'_', '.', '-'; at most {entries.MAX_EXTRA_NAME} characters) with string values of at most "
                    f"{entries.MAX_EXTRA_VALUE} characters")


    @field_validator("importance", mode="before")
    @classmethod
    def _a_number(cls, value: object) -> object:
        if isinstance(value, bool | str):  # pydantic would read false as 0.0 and "0.5" as 0.5
            raise ValueError("give a number from 0.0 to 1.0")
        return value


class BatchBody(_Body):
    """A batch store: entries written in one transaction (all or none), each as POST /api/v1/memories takes it."""

    entries: list[StoreBody] = Field(min_length=1, max_length=MAX_BATCH,
                                     description=f"1..{MAX_BATCH} entries; a key once per namespace per call")


class BatchResultShape(BaseModel):
    stored: bool = Field(description="false: the seed's write filters refused this entry (nothing written for it)")
    entry: EntryShape | None = Field(None, description="the stored entry")
    created: bool | None = Field(None, description="a new key (false: a new revision of the key's entry)")
    skipped: str | None = Field(None, description="why the write filters refused it")


class BatchShape(BaseModel):
    stored: int = Field(description="entries written")
    skipped: int = Field(description="entries the write filters refused")
    results: list[BatchResultShape] = Field(description="one per entry, in the order sent")


class Message(_Body):
    role: str = Field(min_length=1, max_length=32, description="user, assistant, system or tool")
    content: str = Field(max_length=entries.MAX_CONTENT)


class ProceduralBody(_Body):
    """store_procedural: a procedure learned from a conversation, stored as one entry of category procedural."""

    messages: list[Message] = Field(min_length=1, max_length=entries.MAX_PROCEDURAL_MESSAGES)
    session_id: SessionId = None
    namespace: Namespace = None
    key: Key | None = Field(None, description="default: procedural_<hash of the messages>")


class SkippedShape(BaseModel):
    """A store the seed's write filters refused: nothing was written."""

    stored: Literal[False] = False
    skipped: str = Field(description="why (cron output, heartbeat task, distilled content, empty text, an "
                                     "assistant_resp* key)")


class RecallBody(_Body):
    query: str = Field(max_length=entries.MAX_QUERY, description="what to look for")
    limit: int = Field(5, ge=1, le=MAX_LIMIT, description="at most this many entries")
    namespace: Namespace = None
    since: Time = None
    until: Time = None
    category: Category | None = None
    session_id: SessionId = None


class EntriesShape(BaseModel):
    entries: list[EntryShape]
    namespace: str


class EntryPageShape(EntriesShape):
    total: int = Field(description="entries that match, in all")
    limit: int
    offset: int


class CountShape(BaseModel):
    count: int
    namespace: str


class ForgottenShape(BaseModel):
    forgotten: Literal[True] = True
    entry: EntryShape = Field(description="the entry as it was (it stays in the graph, deprecated)")


class PurgeBody(_Body):
    """purge_namespace (no session_id) or purge_session: delete entries for real."""

    namespace: Namespace = None
    session_id: SessionId = Field(None, description="purge only this session's entries of the namespace")
    confirm: str = Field(max_length=max(namespaces.MAX_NAMESPACE, entries.MAX_SESSION_ID),
                         description="repeat the session id (purge_session) or the namespace's name "
                                     "(purge_namespace; 'default' for the default namespace)")


class PurgedShape(BaseModel):
    deleted: int
    namespace: str
    session_id: str | None


class MemoryHealthShape(BaseModel):
    healthy: bool
    namespace: str
    entries: int | None
    detail: str
