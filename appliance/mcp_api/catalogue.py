"""The tools MCP serves: the operations of the catalogue (``appliance.operations``), each offered when its
switch, if it has one, is on in the appliance's environment."""

from __future__ import annotations

import os

from appliance.operations.catalogue import operations
from appliance.operations.definition import Operation


def tools() -> dict[str, Operation]:
    return {name: op for name, op in operations().items() if op.gate is None or os.environ.get(op.gate) == "1"}
