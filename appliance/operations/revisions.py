"""Revisions, tags, artifacts and bundles."""

from __future__ import annotations

from appliance.operations.definition import Operation

OPERATIONS: tuple[Operation, ...] = ()
