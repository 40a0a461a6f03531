"""``GET /api/v1/audit``: who changed what (``[memory] audit_enabled``): one row per committed write transaction,
with the front door, the client and the operation that made it, and the changes (events) it recorded."""

from __future__ import annotations

from typing import Annotated

from litestar import Controller, get
from litestar.datastructures import State
from litestar.params import QueryParameter
from pydantic import BaseModel, Field

from appliance.admin_api.params import moment
from appliance.core import kref as krefs
from appliance.core.caller import Door
from appliance.graph.audit import MAX_AUDIT_PAGE, AuditEntry
from appliance.graph.write_policy import MAX_CHANGES


class AuditChangeView(BaseModel):
    routing_key: str = Field(description="the event's kind, as in GET /api/v1/events (e.g. revision.created)")
    kref: str = Field(description="what changed (empty for a bulk edge write, whose event counts the edges)")


class AuditEntryView(BaseModel):
    seq: int = Field(description="the row's number, increasing; page with ?after=<the last seq you read>")
    at: str = Field(description="when the transaction recorded its first change (UTC, RFC 3339)")
    door: Door = Field(description="the front door: mcp, memory_api, kumiho_rest, console, maintenance, "
                                       "grpc, or internal (the appliance's own start-up work)")
    client: str = Field(description="X-Kumiho-Client, else the User-Agent, of the request (at most 200 characters)")
    operation: str = Field(description="the tool or operation name, the route (e.g. POST /api/v1/memories), or "
                                       "the job kind (e.g. dream_state)")
    first_event: int = Field(description="the transaction's first event seq (GET /api/v1/events?after=…)")
    last_event: int = Field(description="the transaction's last event seq")
    events: int = Field(description="how many changes (events) the transaction recorded")
    changes: list[AuditChangeView] = Field(description=f"the first {MAX_CHANGES} changes; the event range names all")
    changes_truncated: bool = Field(description=f"true when the transaction made more than {MAX_CHANGES} changes")


class AuditResponse(BaseModel):
    enabled: bool = Field(description="whether [memory] audit_enabled is on (rows are recorded only then)")
    retention_days: int = Field(description="[memory] audit_retention_days: older rows are deleted (0 = kept)")
    entries: list[AuditEntryView]
    count: int
    next_after: int | None = Field(description="pass as ?after= for the next page; null when this page was the last")


def _view(entry: AuditEntry) -> AuditEntryView:
    return AuditEntryView(
        seq=entry.seq, at=entry.at, door=entry.door, client=entry.client,  # type: ignore[arg-type]
        operation=entry.operation, first_event=entry.first_event, last_event=entry.last_event, events=entry.events,
        changes=[AuditChangeView(routing_key=c.routing_key, kref=c.kref) for c in entry.changes],
        changes_truncated=entry.changes_truncated)


class AuditController(Controller):
    path = "/api/v1"
    tags = ("audit",)

    @get("/audit", summary="The audit trail: who changed the memory, oldest first", sync_to_thread=True)
    def audit(
        self, state: State,
        after: Annotated[int, QueryParameter(description="rows after this seq (-1 = from the first row)",
                                             ge=-1, le=2**62)] = -1,
        limit: Annotated[int, QueryParameter(description=f"rows per page, 1 to {MAX_AUDIT_PAGE}", ge=1,
                                             le=MAX_AUDIT_PAGE)] = 100,
        door: Annotated[Door | None, QueryParameter(description="only changes through this front door")] = None,
        kref: Annotated[str | None, QueryParameter(
            description="only transactions that changed this entity (an item kref: its revisions and artifacts "
                        "too)", min_length=1, max_length=krefs.MAX_KREF)] = None,
        since: Annotated[str | None, QueryParameter(
            description="only rows recorded at or after this RFC 3339 time", min_length=1, max_length=64,
            schema_extra={"format": "date-time"})] = None,
    ) -> AuditResponse:
        services = state.services
        if kref is not None:
            krefs.parse(kref, "kref")  # a malformed kref is refused naming the parameter, not silently unmatched
        rows = services.graph.audit_entries(after=after, limit=limit, door=door, kref=kref,
                                            since=moment(since, "since") or None)
        memory = services.settings.memory
        return AuditResponse(enabled=memory.audit_enabled, retention_days=memory.audit_retention_days,
                             entries=[_view(row) for row in rows], count=len(rows),
                             next_after=rows[-1].seq if len(rows) == limit else None)
