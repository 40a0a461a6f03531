"""What ``GET /api/v1/search`` answers, typed so that the OpenAPI document describes it."""

from __future__ import annotations

from pydantic import BaseModel, Field


class SearchHit(BaseModel):
    revision_kref: str
    score: float = Field(ge=0.0, le=1.0, description="the fused score, on one 0..1 scale for every mode")
    vector_score: float | None = Field(description="the vector leg's score; null when it did not find this hit")
    text_score: float | None = Field(description="the full-text leg's score; null when it did not find this hit")


class SearchAnswer(BaseModel):
    query: str
    mode: str
    count: int
    results: list[SearchHit]
