"""An operation's arguments checked against its input schema, turned into its typed input: one error naming
the field and the fix for anything the input does not accept, before anything walks the arguments further.

The schema validator gives the messages (``_message``: what to change, in words); the input model then fills
in the defaults and runs the checks a schema cannot express."""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError as SchemaError
from pydantic import ValidationError

from appliance.errors import InvalidArgument
from appliance.operations.catalogue import operation
from appliance.operations.definition import Input, Operation

# Arguments nest at most this deep (an agent's deepest: consolidate's summary.knowledge.facts[i]); a deeper
# document is refused before the schema validator, whose recursion a 100,000-level document would exhaust.
MAX_DEPTH = 10
_PREVIEW = 60  # characters of an offending value quoted back in an error message
_NAMED = re.compile(r"^([a-z_][a-z0-9_]*(?:\[\d+\])?(?:\.[a-z_][a-z0-9_]*)*): ")


@cache
def _validator(name: str) -> Draft202012Validator:
    found = operation(name)
    assert found is not None
    return Draft202012Validator(found.input_schema)


def parse(op: Operation, arguments: dict[str, Any] | None) -> Input:
    """The call's arguments as the operation's typed input, defaults filled in. Anything the input does not
    accept → ``InvalidArgument`` naming the field and the fix, before anything is read or written."""
    args = dict(arguments or {})
    check_shape(args)
    errors = sorted(_validator(op.name).iter_errors(args), key=lambda e: (len(e.path), list(e.path)))
    if errors:
        raise InvalidArgument(_message(errors[0]), field=_field(errors[0]))
    try:
        return op.input.model_validate(args)
    except ValidationError as exc:  # a check the schema cannot express (a model validator)
        first = exc.errors()[0]
        text = str(first["msg"]).removeprefix("Value error, ")
        named = _NAMED.match(text)  # a model validator names its field: "question: give a question or …"
        field = _path(first["loc"]) or (named.group(1) if named else "arguments")
        raise InvalidArgument(text if text.startswith(field) else f"{field}: {text}", field=field) from None


def largest_request(schema: dict[str, Any]) -> int:
    """Characters of the longest arguments object the schema accepts (declared arguments only): every string
    at its maxLength, every list at its maxItems. Bounds the memory and time one call can cost."""
    if "enum" in schema:
        return max(len(json.dumps(v)) for v in schema["enum"])
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    sizes = [24]  # a number, a boolean or null
    if "string" in kinds:
        sizes.append(schema["maxLength"] + 2)
    if "array" in kinds:
        sizes.append(2 + schema["maxItems"] * (largest_request(schema["items"]) + 1))
    if "object" in kinds and "properties" in schema:
        sizes.append(2 + sum(len(k) + 4 + largest_request(v) for k, v in schema["properties"].items()))
    elif "object" in kinds and "additionalProperties" in schema:
        key, value = schema["propertyNames"]["maxLength"], schema["additionalProperties"]["maxLength"]
        sizes.append(2 + schema["maxProperties"] * (key + value + 6))
    return max(sizes)


def check_shape(args: dict[str, Any]) -> None:
    """What the schema validator cannot take: depth (checked iteratively, so that no depth exhausts the
    stack) and integers beyond 64 bits (its messages quote them, and a 5,000-digit int cannot be printed)."""
    stack: list[tuple[Any, int, list[str | int]]] = [(args, 0, [])]
    while stack:
        value, depth, path = stack.pop()
        if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
            field = _path(path) or "arguments"
            raise InvalidArgument(f"{field}: a number of more than 19 digits; give one within the field's "
                                  "range (tools/list shows it in the tool's input schema)", field=field)
        if not isinstance(value, dict | list):
            continue
        if depth >= MAX_DEPTH:
            field = _path(path) or "arguments"
            raise InvalidArgument(f"{field}: nested deeper than {MAX_DEPTH} levels; flatten it (metadata values "
                                  "may be JSON-encoded strings)", field=field)
        children = value.items() if isinstance(value, dict) else enumerate(value)
        stack.extend((child, depth + 1, [*path, key]) for key, child in children)


def _path(parts: Any) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts).lstrip(".")[:200]


def _unexpected(error: SchemaError) -> str:
    """The first key a closed object (``additionalProperties: false``) does not accept."""
    known = error.schema.get("properties", {}) if isinstance(error.schema, dict) else {}
    return next((str(k) for k in sorted(error.instance, key=str) if k not in known), "") \
        if isinstance(error.instance, dict) else ""


def _field(error: SchemaError) -> str:
    path = _path(error.absolute_path)
    if error.validator == "additionalProperties" and error.validator_value is False and _unexpected(error):
        return f"{path}.{_unexpected(error)}".lstrip(".")[:200]
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else ""
        return f"{path}.{missing}".lstrip(".") if missing else path or "arguments"
    return path or "arguments"


def _message(error: SchemaError) -> str:
    """What to change, in words; an offending value is quoted only in part (it may be megabytes)."""
    field, bound, value = _field(error), error.validator_value, error.instance
    schema = error.schema if isinstance(error.schema, dict) else {}
    if error.validator == "required":
        return f"{field}: this field is required"
    if error.validator == "additionalProperties" and bound is False:
        accepted = ", ".join(schema.get("properties", {}))
        return f"{field}: not accepted here; leave it out (accepted: {accepted})"
    if error.validator == "type":
        expected = " or ".join(bound) if isinstance(bound, list) else bound
        return f"{field}: expected {expected}, got {type(value).__name__} {_preview(value)}"
    if error.validator == "enum":
        return f"{field}: {_preview(value)} is not one of {', '.join(map(str, bound))}"
    if error.validator == "pattern":
        hint = schema.get("description") or f"a value matching {bound}"
        return f"{field}: {_preview(value)} is not valid; use {hint}"
    if error.validator == "maxLength" and "propertyNames" in error.schema_path:
        return f"{field}: key {_preview(value)} is longer than {bound} characters; use a shorter key"
    if error.validator == "maxLength":
        return f"{field}: at most {bound} characters (got {len(value)}); shorten it"
    if error.validator == "minItems":
        return f"{field}: give {schema.get('description') or f'at least {bound} item(s)'}"
    if error.validator == "maxItems":
        return f"{field}: at most {bound} items (got {len(value)}); send fewer, or split the call in several"
    if error.validator == "maxProperties":
        return f"{field}: at most {bound} keys (got {len(value)}); send fewer"
    if error.validator in ("minimum", "maximum"):
        low, high = schema.get("minimum"), schema.get("maximum")
        span = f"from {low} to {high}" if low is not None and high is not None else \
            f"≥ {low}" if low is not None else f"≤ {high}"
        return f"{field}: give a number {span} (got {_preview(value)})"
    return f"{field}: {_preview(error.message, 240)}"


def _preview(value: Any, limit: int = _PREVIEW) -> str:
    if isinstance(value, str):
        text = repr(value[:limit])
        return text if len(value) <= limit else f"{text[:-1]}…{text[-1]} ({len(value)} characters)"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return "a number of more than 19 digits"  # repr() of a 5,000-digit int raises ValueError
    if isinstance(value, dict | list):
        return f"{type(value).__name__} of {len(value)}"
    return repr(value)[:limit]
