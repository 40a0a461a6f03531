"""Experiences, outcomes and patterns: the keyless memory tools a host's own model drives."""

from __future__ import annotations

from appliance.operations.definition import Operation

OPERATIONS: tuple[Operation, ...] = ()
