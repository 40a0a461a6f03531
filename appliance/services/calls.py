"""Any front door's way into the operations: by name, with JSON arguments, as the MCP tools run them.

The HTTP routes (and later the wire protocol) call ``Operations.perform`` so that every door shares one
validation (the operation's generated schema), one write boundary (credentials redacted before anything is
stored) and one service per operation.
"""

from __future__ import annotations

from typing import Any

from appliance.core import redaction
from appliance.core.caller import calling, current_caller
from appliance.errors import NotFound
from appliance.memory.client import Client
from appliance.operations.catalogue import operation
from appliance.operations.validation import check_shape, parse
from appliance.services import Handler


class Operations:
    def __init__(self, table: dict[str, Handler], default_project: str) -> None:
        self._table = table
        self._client = Client(project=default_project)

    def perform(self, name: str, arguments: dict[str, Any] | None = None, client: Client | None = None
                ) -> dict[str, Any]:
        """Run operation ``name``: arguments checked against its schema (``InvalidArgument`` naming the field),
        credentials redacted, then its service; domain errors propagate for the door to translate."""
        return run(self._table, name, arguments, client or self._client)[0]


def run(table: dict[str, Handler], name: str, arguments: dict[str, Any] | None, client: Client
        ) -> tuple[dict[str, Any], list[str]]:
    """One operation, as every door runs it (the MCP tools and ``Operations.perform``): the arguments' shape
    checked before anything walks them, credentials redacted (the write boundary, D5), the typed input parsed,
    then its service, as the caller's operation ``name`` (the audit trail names it). Returns the result and the
    kinds of credentials redacted."""
    op, handler = operation(name), table.get(name)
    if op is None or handler is None:
        raise NotFound(f"no operation {name!r}")
    args = dict(arguments or {})
    check_shape(args)  # before anything walks the arguments: no depth exhausts the stack
    args, kinds = redaction.redact_arguments(args)
    with calling(current_caller().doing(name)):
        return handler(parse(op, args), client), kinds
