"""What every graph write passes on its way to the database: the operator's read-only namespaces and the audit
trail. Both hang on the one thing every change does, recording its event (``StoreBase._event`` and the bulk
``_events``), so a new kind of write cannot bypass them without also bypassing the event feed.

* The guard refuses (``PermissionDenied``) a change that touches a read-only namespace before the transaction
  commits: the writer rolls the whole transaction back, so nothing of a refused write stays in the graph.
* The audit trail adds ONE ``Audit`` row to each committed write transaction that recorded events, inside that
  transaction (``Tx.before_commit``): the row commits with the change or not at all. It names who called (door,
  client, operation: ``appliance.core.caller``), the event sequence range, and the first ``MAX_CHANGES``
  changes (routing key and kref); a larger transaction (an import, a bulk write) says how many more there were,
  and the event range names every one of them (``GET /api/v1/events``).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from appliance.core.caller import Caller, current_caller
from appliance.graph.engine import Tx
from appliance.memory.policy import ReadOnlyNamespaces, refusal

log = logging.getLogger(__name__)
MAX_CHANGES = 100  # changes listed in one audit row


@dataclass(frozen=True)
class WritePolicy:
    read_only: ReadOnlyNamespaces | None = None
    audit: bool = False

    def guard(self, routing_key: str, *krefs: str) -> None:
        """Refuse a change touching a read-only namespace (the caller comes from ``current_caller``)."""
        if self.read_only is None or not self.read_only.names:
            return
        caller = current_caller()
        for kref in krefs:
            name = self.read_only.touched(routing_key, kref)
            if name is None:
                continue
            # a refusal is not a change (the audit trail records none); the log says who tried
            log.info("refused %s of %s: namespace %r is read-only (door %s, client %r, operation %r)",
                     routing_key, kref, name, caller.door, caller.client, caller.operation)
            raise refusal(name)

    def record(self, tx: Tx, at: str, changes: list[tuple[int, str, str]]) -> None:
        """Note committed-to-be events ``(seq, routing_key, kref)`` in this transaction's audit row (``seq`` -1
        for a change that is no event: a record an import wrote)."""
        if not self.audit or not changes:
            return
        row = next((action for action in tx.committing if isinstance(action, _AuditRow)), None)
        if row is None:  # the transaction's first event: its row is written just before COMMIT
            row = _AuditRow(at, current_caller())  # read here: the job runs in the caller's context, COMMIT not
            tx.before_commit(row)
        row.add(changes)


class _AuditRow:
    """One write transaction's audit row, collected while it runs and created just before it commits."""

    def __init__(self, at: str, caller: Caller) -> None:
        self.at, self.caller = at, caller
        self.first = self.last = -1
        self.count = 0
        self.changes: list[list[str]] = []

    def add(self, changes: list[tuple[int, str, str]]) -> None:
        for seq, routing_key, kref in changes:
            if seq >= 0:  # an import also lists the records it wrote, which are no events (seq -1)
                self.first = seq if self.first < 0 else min(self.first, seq)
                self.last = max(self.last, seq)
            self.count += 1
            if len(self.changes) < MAX_CHANGES:
                self.changes.append([routing_key, kref])

    def __call__(self, tx: Tx) -> None:
        caller = self.caller
        tx.run("CREATE (:Audit {at: $at, door: $door, client: $client, operation: $op, first_event: $first, "
               "last_event: $last, events: $n, changes: $changes})",
               {"at": self.at, "door": caller.door, "client": caller.client, "op": caller.operation,
                "first": self.first, "last": self.last, "n": self.count,
                "changes": json.dumps(self.changes, ensure_ascii=False)})
