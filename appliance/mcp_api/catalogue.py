"""The MCP tool catalogue: names, titles, descriptions, annotations and input schemas (tools.json), and
argument validation against them.

tools.json started from the reference schemas (``spec/tool-schemas.json``) with the seed's decisions
applied (MISSION §2: reflect needs ``session_id``; ``get_revision_by_tag`` defaults ``tag`` to
"published"; D7 capture types as a pattern) and the operator tools of MISSION §6 added.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from appliance.errors import InvalidArgument

_FILE = Path(__file__).with_name("tools.json")


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    annotations: dict[str, Any]
    input_schema: dict[str, Any]

    @property
    def read_only(self) -> bool:
        return bool(self.annotations.get("readOnlyHint"))


@cache
def tools() -> dict[str, ToolSpec]:
    specs = json.loads(_FILE.read_text(encoding="utf-8"))
    return {s["name"]: ToolSpec(s["name"], s["title"], s["description"], s["annotations"], s["inputSchema"])
            for s in specs}


@cache
def _validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(tools()[name].input_schema)


def validated(name: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
    """The arguments with schema defaults filled in; a violation → InvalidArgument naming the field."""
    args = dict(arguments or {})
    errors = sorted(_validator(name).iter_errors(args), key=lambda e: (len(e.path), list(e.path)))
    if errors:
        raise InvalidArgument(_message(errors[0]), field=_field(errors[0]))
    for key, schema in tools()[name].input_schema.get("properties", {}).items():
        # an absent project means the client's default project (D10), not the schema's documented default
        if key not in args and "default" in schema and key != "project":
            args[key] = schema["default"]
    return args


def _field(error: ValidationError) -> str:
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path).lstrip(".")
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else ""
        return f"{path}.{missing}".lstrip(".") if missing else path or "arguments"
    return path or "arguments"


def _message(error: ValidationError) -> str:
    field = _field(error)
    schema = error.schema if isinstance(error.schema, dict) else {}
    if error.validator == "required":
        return f"{field}: this field is required"
    if error.validator == "type":
        got = f"{type(error.instance).__name__} {error.instance!r}"[:120]
        return f"{field}: expected {error.validator_value}, got {got}"
    if error.validator == "enum":
        return f"{field}: {error.instance!r} is not one of {', '.join(map(str, error.validator_value))}"
    if error.validator == "pattern" and schema.get("description"):
        return f"{field}: {error.instance!r} is not valid; use {schema['description']}"
    return f"{field}: {error.message}"[:300]
