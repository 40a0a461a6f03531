"""Every operation, in the order tools/list shows them: the graph tools, then the memory tools (as Kumiho's
reference server orders its catalogue), then the operator tools."""

from __future__ import annotations

from functools import cache

from appliance.operations import (
    code,
    graph,
    maintenance,
    operator,
    patterns,
    provenance,
    recall,
    revisions,
    sessions,
    writes,
)
from appliance.operations.definition import Operation

FAMILIES = (graph, revisions, provenance, recall, writes, sessions, maintenance, code, patterns, operator)


@cache
def operations() -> dict[str, Operation]:
    found: dict[str, Operation] = {}
    for family in FAMILIES:
        for op in family.OPERATIONS:
            if op.name in found:
                raise ValueError(f"operation {op.name} is defined twice")
            found[op.name] = op
    return found


def operation(name: str) -> Operation | None:
    return operations().get(name)
