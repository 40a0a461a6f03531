"""Reading and pruning the audit trail (rows are written by ``write_policy``, one per write transaction)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from appliance.core import names
from appliance.graph._support import StoreBase
from appliance.graph.engine import Tx

MAX_AUDIT_PAGE = 1000


@dataclass(frozen=True)
class AuditChange:
    routing_key: str
    kref: str


@dataclass(frozen=True)
class AuditEntry:
    seq: int
    at: str
    door: str
    client: str
    operation: str
    first_event: int  # the transaction's events are first_event..last_event (GET /api/v1/events)
    last_event: int
    events: int
    changes: list[AuditChange]  # the first write_policy.MAX_CHANGES of them

    @property
    def changes_truncated(self) -> bool:
        return self.events > len(self.changes)


class AuditStore(StoreBase):
    def audit_entries(self, *, after: int = -1, limit: int = 100, door: str | None = None, kref: str | None = None,
                      since: str | None = None) -> list[AuditEntry]:
        """Audit rows with ``seq > after`` (the first row's seq is 0), oldest first; ``door``, ``kref`` (an
        entity or, for an item kref, its revisions and artifacts too) and ``since`` (an ISO time in UTC) narrow
        them."""
        names.bounded_int(limit, "limit", 1, MAX_AUDIT_PAGE)
        where: list[str] = ["a.seq > $after"]
        params: dict[str, object] = {"after": after, "n": limit}
        if door:
            where.append("a.door = $door")
            params["door"] = door
        if since:
            where.append("a.at >= $since")
            params["since"] = since
        if kref:
            quoted = json.dumps(kref, ensure_ascii=False)  # as the row's JSON holds it
            where.append("(a.changes CONTAINS $exact OR a.changes CONTAINS $rev OR a.changes CONTAINS $art)")
            params.update(exact=quoted, rev=quoted[:-1] + "?", art=quoted[:-1] + "&")

        def job(tx: Tx) -> list[AuditEntry]:
            rows = tx.rows(f"MATCH (a:Audit) WHERE {' AND '.join(where)} RETURN a ORDER BY a.seq LIMIT $n", params)
            return [_entry(node) for (node,) in rows]

        return self._engine.read(job)

    def prune_audit(self, before: str) -> int:
        """Delete audit rows recorded before the ISO time ``before``; returns how many."""
        def job(tx: Tx) -> int:
            count = int(tx.scalar("MATCH (a:Audit) WHERE a.at < $before RETURN count(a)", {"before": before}))
            if count:
                tx.run("MATCH (a:Audit) WHERE a.at < $before DELETE a", {"before": before})
            return count

        return self._engine.write(job)


def _entry(node: dict[str, object]) -> AuditEntry:
    changes = [AuditChange(str(key), str(kref)) for key, kref in json.loads(str(node["changes"]) or "[]")]
    return AuditEntry(int(str(node["seq"])), str(node["at"]), str(node["door"]), str(node["client"]),
                      str(node["operation"]), int(str(node["first_event"])), int(str(node["last_event"])),
                      int(str(node["events"])), changes)
