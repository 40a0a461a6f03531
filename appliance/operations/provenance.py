"""Provenance: edges between revisions and the analyses that walk them."""

from __future__ import annotations

from appliance.operations.definition import Operation

OPERATIONS: tuple[Operation, ...] = ()
