"""The JSON shapes of Kumiho's REST API (``/api/v1``) as Revka's client reads them: the entity views the MCP
tools answer with (appliance/memory/views.py), typed, so that the OpenAPI document describes them.

Revka decodes these with strict types (its ``kumiho_client.rs``): krefs, names and kinds are strings,
revision numbers integers, metadata a map of string to string, timestamps strings or null. Items, revisions
and edges are the shapes every route shares (``entity_shapes``). Fields Revka does
not read (``space``, ``published``, …) are the views' own and stay, additively."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, Field

from appliance.admin_api.entity_shapes import ItemShape, RevisionShape


class ProjectShape(BaseModel):
    project_id: str
    name: str
    description: str
    created_at: str | None
    updated_at: str | None
    deprecated: bool
    allow_public: bool


class SpaceShape(BaseModel):
    path: str = Field(description="the space's path, /project/space/…")
    name: str
    parent_path: str = Field(description="the path of the space or project that holds it")
    type: str = Field(description='"root" directly under the project, else "sub"')
    created_at: str | None
    author: str | None
    username: str | None
    metadata: dict[str, str]


class ArtifactShape(BaseModel):
    kref: str
    name: str
    location: str
    revision_kref: str
    item_kref: str
    created_at: str | None
    metadata: dict[str, str]


class SearchHitShape(BaseModel):
    item: ItemShape
    score: float = Field(description="relevance, 0..1")


class BundleMemberShape(BaseModel):
    item_kref: str
    added_at: str | None
    added_by: str | None
    added_by_username: str | None
    added_in_revision: int | None


class BundleMembersShape(BaseModel):
    members: list[BundleMemberShape]
    total_count: int


class BatchRevisionsShape(BaseModel):
    revisions: list[RevisionShape]
    not_found: list[str] = Field(description="the requested krefs that name no revision")
    requested_count: int
    found_count: int


class DeletedShape(BaseModel):
    success: bool
    item_kref: str


# -- request bodies -------------------------------------------------------------------------------------------
MAX_BATCH = 1000  # krefs one POST /revisions/batch answers for (item_krefs and revision_krefs together)
Kref = Annotated[str, Field(min_length=1, max_length=1024)]


class CreateProjectBody(BaseModel):
    name: str = Field(min_length=1, max_length=128)
    description: str = Field(default="", max_length=4096)


class CreateSpaceBody(BaseModel):
    parent_path: str = Field(min_length=1, max_length=512, description="/project or /project/space…")
    name: str = Field(min_length=1, max_length=128)


class BatchRevisionsBody(BaseModel):
    item_krefs: list[Kref] = Field(default_factory=list, max_length=MAX_BATCH,
                                  description="items whose revision holding `tag` is wanted")
    revision_krefs: list[Kref] = Field(default_factory=list, max_length=MAX_BATCH)
    tag: str = Field(default="latest", min_length=1, max_length=128)
    allow_partial: bool = Field(default=True, description="false: 404 when any kref names no revision")
