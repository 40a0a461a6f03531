"""What ``/api/_live`` and ``/api/_ready`` answer, typed so that the OpenAPI document describes them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field


class Live(BaseModel):
    status: Literal["ok"]
    deployment_mode: str = Field(description="self_hosted_ce: what Kumiho's SDK looks for in a local appliance")
    version: str


class SearchReadiness(BaseModel):
    embedder: str = Field(description="the embedding model's id")
    rows: int | None = Field(description="rows in the search index; null while a damaged table is repaired")
    pending: int = Field(description="revisions in the graph not indexed yet")
    sync_error: str | None = Field(description="when the last index sync round failed (a fixed phrase and its time; "
                                               "the appliance log has the error); null when it succeeded")
    state: Literal["ok", "rebuilding"]
    damaged: str | None = Field(None, description="rebuilding: what was wrong with the index")
    damaged_copy: str | None = Field(None, description="rebuilding: where the damaged index was set aside")
    detail: str | None = Field(None, description="rebuilding: what it means for search meanwhile")


class Ready(BaseModel):
    status: Literal["ready"]
    deployment_mode: str
    version: str
    schema_version: int = Field(description="the graph's schema version")
    search: SearchReadiness
