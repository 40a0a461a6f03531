"""The memory's entities as every HTTP route answers them: the views the MCP tools answer with
(``appliance.memory.views``), typed, so that the OpenAPI document describes them. Kumiho's REST routes answer
them as they are; the console's own routes use them too, refusing any field they do not declare."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ItemShape(BaseModel):
    kref: str
    name: str = Field(description="item_name.kind")
    item_name: str
    kind: str
    space: str = Field(description="the space's path without the leading slash")
    created_at: str
    author: str
    username: str
    deprecated: bool
    metadata: dict[str, str] = Field(default_factory=dict)


class RevisionShape(BaseModel):
    kref: str
    item_kref: str
    number: int
    latest: bool
    published: bool
    tags: list[str]
    created_at: str
    author: str
    username: str
    deprecated: bool
    default_artifact: str | None
    metadata: dict[str, str] = Field(default_factory=dict)


class EdgeShape(BaseModel):
    source_kref: str
    target_kref: str
    edge_type: str
    created_at: str
    metadata: dict[str, str]
