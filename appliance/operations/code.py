"""Code decisions (offered only when KUMIHO_MEMORY_DECISIONS=1, as Kumiho does)."""

from __future__ import annotations

from appliance.operations.definition import Operation

OPERATIONS: tuple[Operation, ...] = ()
