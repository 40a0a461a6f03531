"""Kumiho's memory-proxy protocol at ``POST /api/memory/redis``: the working-memory buffer of its stock sidecar
(``KUMIHO_MEMORY_PROXY_URL``) on the appliance's own working memory (``appliance.workmem.buffer``).

One JSON body per call, ``{action, …payload, tenant_hint?}``, one action per buffer operation; the answer
mirrors what the sidecar's direct-Redis path returns. The sidecar sends ``Authorization: Bearer <token>`` (its
``KUMIHO_FIREBASE_ID_TOKEN``): the appliance checks it like every request's when it requires its token, and
ignores it when it does not. ``tenant_hint`` is accepted and not used (the appliance is single-tenant); the TTLs
the sidecar sends are accepted and not applied: buffers stay until consolidated or cleared.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from litestar import Controller, Request, post
from litestar.datastructures import State
from litestar.exceptions import SerializationException
from litestar.params import JSONBody
from pydantic import BaseModel, ConfigDict, Field, RootModel

from appliance.admin_api.errors import field_as_sent
from appliance.errors import InvalidArgument
from appliance.memory.working import MAX_MESSAGE_BYTES, MAX_NAME, WorkingMemory
from appliance.workmem.buffer import KumihoBuffer

MAX_READ = 1000  # messages one get_messages returns (the sidecar's consolidation reads 1000)
MAX_LISTED = 1000  # sessions one list_sessions names
MAX_OFFSET = 100_000
MAX_TTL = 10 * 365 * 86400
MAX_METADATA_FIELDS = 64

Name = Annotated[str, Field(min_length=1, max_length=MAX_NAME, pattern=r"\S",
                            description=f"1..{MAX_NAME} characters, not only white space")]
Ttl = Annotated[int | None, Field(None, ge=0, le=MAX_TTL, description="seconds; accepted and not applied: buffers "
                                  "stay until consolidated or cleared, active-session pointers live 24 hours")]
TenantHint = Annotated[str | None, Field(None, max_length=MAX_NAME, description="accepted and not used: the "
                                         "appliance is single-tenant")]


class _Action(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tenant_hint: TenantHint = None


class _Session(_Action):
    project: Name = Field(description="the memory project (the sidecar's KUMIHO_MEMORY_PROJECT)")
    session_id: Name


class _User(_Action):
    context: Name = Field(description="the user's context (personal, work, …)")
    user_canonical_id: Name


class AddMessage(_Session):
    """Buffer one message; credentials in it become [secret]."""

    action: Literal["add_message"]
    role: str = Field(min_length=1, max_length=32, description="user | assistant | system | tool")
    content: str = Field(min_length=1, max_length=MAX_MESSAGE_BYTES,
                         description=f"the message text (at most {MAX_MESSAGE_BYTES} bytes of UTF-8)")
    metadata: dict[str, Any] = Field(default_factory=dict, description="kept with the message (channel, "
                                     "timestamp, attachments, …)")
    default_ttl: Ttl = None


class GetMessages(_Session):
    action: Literal["get_messages"]
    limit: int = Field(10, ge=1, le=MAX_READ, description="the last this many messages")
    offset: int = Field(0, ge=0, le=MAX_OFFSET, description="skipping this many from the end")


class SetSessionMetadata(_Session):
    action: Literal["set_session_metadata"]
    metadata: dict[Annotated[str, Field(max_length=MAX_NAME)], Annotated[str, Field(max_length=MAX_MESSAGE_BYTES)]] = \
        Field(max_length=MAX_METADATA_FIELDS, description=f"strings merged into the session's metadata (at most "
              f"{MAX_METADATA_FIELDS} fields)")


class GetSessionMetadata(_Session):
    action: Literal["get_session_metadata"]


class ClearSession(_Session):
    action: Literal["clear_session"]


class ListSessions(_Action):
    action: Literal["list_sessions"]
    project: Name
    limit: int = Field(20, ge=1, le=MAX_LISTED, description="at most this many session ids, most recent first")


class NextSequence(_Action):
    action: Literal["next_sequence"]
    user_canonical_id: Name
    date_str: str = Field(min_length=1, max_length=32, description="the day, YYYYMMDD")
    ttl_seconds: Ttl = None


class GetActiveSession(_User):
    action: Literal["get_active_session"]


class SetActiveSession(_User):
    action: Literal["set_active_session"]
    session_id: Name
    ttl_seconds: Ttl = None
    nx: bool = Field(False, description="true: set only when no live pointer exists, and say whether this call won")


class ClearActiveSession(_User):
    action: Literal["clear_active_session"]
    only_if: Name | None = Field(None, description="clear only when the pointer names this session")


class GetSessionGeneration(_Action):
    action: Literal["get_session_generation"]
    base_session_id: Name


class BumpSessionGeneration(_Action):
    action: Literal["bump_session_generation"]
    base_session_id: Name
    ttl_seconds: Ttl = None


Action = Annotated[
    AddMessage | GetMessages | SetSessionMetadata | GetSessionMetadata | ClearSession | ListSessions | NextSequence
    | GetActiveSession | SetActiveSession | ClearActiveSession | GetSessionGeneration | BumpSessionGeneration,
    Field(discriminator="action")]


class ProxyRequest(RootModel[Action]):
    """``{action, …payload, tenant_hint?}``: the action names the payload's shape."""


class BufferedMessage(BaseModel):
    role: str
    content: str
    timestamp: str = Field(description="when the appliance buffered it (RFC 3339, UTC)")
    metadata: dict[str, Any]


class Added(BaseModel):
    success: bool
    message_id: str = Field(description="<session_id>:<n>; n counts every message the session ever held")
    message_count: int
    created_bucket: bool = Field(description="true when this was the session's first message")


class Messages(BaseModel):
    messages: list[BufferedMessage] = Field(description="oldest first")
    session_id: str
    message_count: int
    ttl_remaining: int | None = Field(description="always null: buffers do not expire")


class Done(BaseModel):
    success: bool


class SessionMetadata(BaseModel):
    metadata: dict[str, str]


class Cleared(BaseModel):
    success: bool
    cleared_count: int


class SessionList(BaseModel):
    sessions: list[str] = Field(description="session ids holding messages, most recently active first")
    total_sessions: int


class SequenceNumber(BaseModel):
    sequence: int


class ActiveSession(BaseModel):
    session_id: str | None


class Claimed(BaseModel):
    success: bool
    claimed: bool = Field(description="whether the pointer now names this call's session")


class GenerationNumber(BaseModel):
    generation: int


ProxyAnswer = (Added | Messages | Done | SessionMetadata | Cleared | SessionList | SequenceNumber | ActiveSession
               | Claimed | GenerationNumber)


def answer(buffer: KumihoBuffer, request: Any) -> ProxyAnswer:
    """Run one action (already validated by its shape) on the buffer."""
    match request:
        case AddMessage():
            return Added(**buffer.add_message(request.project, request.session_id, request.role, request.content,
                                              request.metadata))
        case GetMessages():
            return Messages(**buffer.get_messages(request.project, request.session_id, request.limit,
                                                  request.offset))
        case SetSessionMetadata():
            return Done(**buffer.set_session_metadata(request.project, request.session_id, request.metadata))
        case GetSessionMetadata():
            return SessionMetadata(**buffer.get_session_metadata(request.project, request.session_id))
        case ClearSession():
            return Cleared(**buffer.clear_session(request.project, request.session_id))
        case ListSessions():
            return SessionList(**buffer.list_sessions(request.project, request.limit))
        case NextSequence():
            return SequenceNumber(**buffer.next_sequence(request.user_canonical_id, request.date_str))
        case GetActiveSession():
            return ActiveSession(**buffer.get_active_session(request.context, request.user_canonical_id))
        case SetActiveSession():
            return Claimed(**buffer.set_active_session(request.context, request.user_canonical_id,
                                                       request.session_id, request.nx))
        case ClearActiveSession():
            return Done(**buffer.clear_active_session(request.context, request.user_canonical_id, request.only_if))
        case GetSessionGeneration():
            return GenerationNumber(**buffer.get_session_generation(request.base_session_id))
        case BumpSessionGeneration():
            return GenerationNumber(**buffer.bump_session_generation(request.base_session_id))
    raise TypeError(f"no action handles {type(request).__name__}")


ACTIONS = tuple(kind.model_fields["action"].annotation.__args__[0]  # type: ignore[union-attr]
                for kind in (AddMessage, GetMessages, SetSessionMetadata, GetSessionMetadata, ClearSession,
                             ListSessions, NextSequence, GetActiveSession, SetActiveSession, ClearActiveSession,
                             GetSessionGeneration, BumpSessionGeneration))


async def known_action(request: Request[Any, Any, Any]) -> None:
    """A missing or unknown ``action`` named as such (the shapes' own check would only say the body does not fit
    any of them). The parsed body is kept for the handler."""
    try:
        body = await request.json()
    except (ValueError, SerializationException):  # msgspec's DecodeError is a ValueError
        raise InvalidArgument("body: send one JSON object {action, …payload}", field="body") from None
    action = body.get("action") if isinstance(body, dict) else None
    if action not in ACTIONS:
        shown = repr(action)[:60]
        raise InvalidArgument(f"action: give one of {', '.join(ACTIONS)} (got {shown})", field="action")


class MemoryProxyController(Controller):
    path = "/api/memory/redis"
    tags = ("working memory",)

    @post("", summary="Kumiho's memory-proxy protocol: one working-memory buffer action per call ({action, …}), "
          "for the stock sidecar's KUMIHO_MEMORY_PROXY_URL", sync_to_thread=True, status_code=200,
          before_request=known_action)
    def redis(self, state: State, data: JSONBody[ProxyRequest]) -> ProxyAnswer:
        working: WorkingMemory = state.services.working
        with field_as_sent("user_canonical_id", "user_id"):
            return answer(KumihoBuffer(working), data.root)
