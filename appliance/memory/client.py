"""Who is calling: per-client defaults (D10) that travel with each request."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Client:
    """Per-client defaults (D10): a stdio shim's environment travels with its requests."""

    project: str = "CognitiveMemory"
    retrieval_limit: int | None = None  # operator tools' limit cap; None = the configured one
    host_session_id: str | None = None
