"""Writes: storing memories (store, reflect's captures, an execution's outcome)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from appliance.operations.definition import Input, Operation
from appliance.operations.fields import (
    Context,
    DecisionState,
    EdgeType,
    Krefs,
    MemoryType,
    Metadata,
    Name,
    Origin,
    Project,
    SessionId,
    SpacePath,
    Tags,
    Topic,
    UserId,
)

Text = Annotated[str, Field(max_length=65536)]
CAPTURE_TYPE_HINT = ("decision, preference, fact, correction, architecture, implementation, synthesis, reflection, "
                     "summary, skill; other lowercase words (discovery, lesson, …) are accepted as long-lived types")


class StoreInput(Input):
    project: Project = None
    space_path: SpacePath | None = None
    space_hint: SpacePath | None = None
    policy_kref: str | None = Field(None, max_length=1024)
    memory_item_kind: Name = "conversation"
    bundle_name: Name | None = None
    memory_type: MemoryType = "summary"
    title: str | None = Field(None, max_length=200)
    summary: str | None = Field(None, max_length=16384)
    user_text: Text
    assistant_text: Text | None = None
    artifact_location: str | None = Field(None, max_length=4096)
    artifact_name: Name = "chat_io"
    tags: Tags | None = None
    source_revision_krefs: Krefs | None = None
    metadata: Metadata | None = None
    edge_type: EdgeType = "DERIVED_FROM"
    stack_revisions: bool = True


class CaptureInput(Input):
    type: str = Field(max_length=32, pattern=r"^[a-z][a-z0-9_]{0,31}$", description=CAPTURE_TYPE_HINT)
    title: str = Field(max_length=200)
    content: str = Field(max_length=8192)
    tags: Tags | None = None
    space_hint: SpacePath | None = None
    revises: str | None = Field(None, max_length=1024)
    event_date: str | None = Field(None, max_length=32)
    origin: Origin | None = None
    decision_state: DecisionState | None = None


class ReflectInput(Input):
    session_id: SessionId
    response: Text
    captures: Annotated[list[CaptureInput], Field(max_length=10)] | None = None
    source_krefs: Krefs | None = None
    space_path: SpacePath | None = None
    discover_edges: bool = True
    idempotency_prefix: str | None = Field(None, max_length=256)
    user_id: UserId | None = None
    context: Context | None = None


class StoreExecutionInput(Input):
    task: str = Field(max_length=4000)
    status: Literal["done", "failed", "error", "blocked"] = "done"
    exit_code: int | None = Field(None, ge=-2147483648, le=4294967295)
    duration_ms: int | None = Field(None, ge=0, le=1000000000000)
    stdout: Text | None = None
    stderr: Text | None = None
    tools: Annotated[list[Topic], Field(max_length=32)] | None = None
    topics: Annotated[list[Topic], Field(max_length=32)] | None = None
    space_hint: SpacePath | None = None


OPERATIONS = (
    Operation("kumiho_memory_reflect", "Reflect and capture memories",
              "After answering: buffer the response in the session's working memory and store each capture "
              "(decision, preference, fact, …) as a memory linked DERIVED_FROM its source_krefs. All captures are "
              "written or none.",
              ReflectInput),
    Operation("kumiho_memory_store", "Store a memory",
              "Store one memory: ensures the space, stacks onto a similar existing item as a new revision "
              "(stack_revisions) or creates one, writes metadata, a local artifact, tags (published by default), "
              "bundle membership and provenance edges.",
              StoreInput),
    Operation("kumiho_memory_store_execution", "Store an execution outcome",
              "Store a command/tool execution as a memory (type action on success, error on failure); stdout and "
              "stderr become a local artifact.",
              StoreExecutionInput),
)
