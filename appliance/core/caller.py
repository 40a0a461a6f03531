"""Who is changing the memory, for the audit trail and the operator's policy: the front door a request came
through, the client behind it, and the operation it runs.

Each front door sets it around the work it starts (``calling``); the graph's writer thread runs every write
job in the submitter's context (``KuzuEngine.write`` copies it), so code deep in a transaction can read
``current_caller()`` without the caller being passed down every function.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Literal

# mcp: the MCP tools (HTTP or the stdio shim); memory_api: /api/v1/memories and `kumiho-ce memory`;
# kumiho_rest: Kumiho's REST subset (Revka); console: the rest of the admin API and the web UI (commands such as
# `kumiho-ce import` go through these routes too, with or without a running appliance); maintenance: the
# appliance's own scheduled work (consolidation, Dream State, hygiene, snapshots); grpc: Kumiho's wire protocol.
Door = Literal["mcp", "memory_api", "kumiho_rest", "console", "maintenance", "grpc", "internal"]
MAX_CLIENT = 200  # characters of a client label kept (it comes from request headers)


@dataclass(frozen=True)
class Caller:
    door: Door = "internal"
    client: str = ""  # e.g. the MCP client's name and version, or "revka"; never a credential
    operation: str = ""  # the operation or route, e.g. "kumiho_memory_store" or "POST /api/v1/memories"

    def doing(self, operation: str) -> Caller:
        return replace(self, operation=operation)


_NOBODY = Caller()
_CURRENT: ContextVar[Caller | None] = ContextVar("kumiho_ce_caller", default=None)


def current_caller() -> Caller:
    return _CURRENT.get() or _NOBODY


@contextmanager
def calling(caller: Caller) -> Iterator[Caller]:
    """Run the block as ``caller`` (nested blocks may narrow it, e.g. with the operation's name)."""
    token = _CURRENT.set(Caller(caller.door, caller.client[:MAX_CLIENT], caller.operation[:MAX_CLIENT]))
    try:
        yield current_caller()
    finally:
        _CURRENT.reset(token)
