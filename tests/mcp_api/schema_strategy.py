"""Hypothesis strategies drawn from a tool's JSON Schema: the subset the generated input schemas
use (type, enum, pattern, maxLength, minimum/maximum, items/maxItems, properties/required, maxProperties, propertyNames,
additionalProperties). hypothesis-jsonschema would do this, but its last release (0.23.1) fails on the
hypothesis the project uses ('many' object has no attribute 'more')."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

SHORT = 40  # most generated strings and lists stay small; each bound itself is drawn too
_JSON_TYPES = ["string", "integer", "number", "boolean", "null", "array", "object"]


def from_schema(schema: dict[str, Any], named: dict[str, st.SearchStrategy[Any]] | None = None
                ) -> st.SearchStrategy[Any]:
    """``named``: extra values for properties of these names (krefs that exist, say), drawn besides the
    schema's own."""
    return _from(schema, named or {})


def _from(schema: dict[str, Any], named: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kinds = schema.get("type", _JSON_TYPES)
    kinds = kinds if isinstance(kinds, list) else [kinds]
    return st.one_of(*(_typed(kind, schema, named) for kind in kinds))


def _typed(kind: str, schema: dict[str, Any], named: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[Any]:
    if kind == "string":
        return _string(schema)
    if kind == "integer":
        return st.integers(schema.get("minimum"), schema.get("maximum"))
    if kind == "number":
        return st.floats(schema.get("minimum"), schema.get("maximum"), allow_nan=False, allow_infinity=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "null":
        return st.none()
    if kind == "array":
        most = schema.get("maxItems", SHORT)
        items = _from(schema.get("items", {"type": "string", "maxLength": SHORT}), named)
        return st.lists(items, max_size=min(most, 6)) | st.lists(items, min_size=most, max_size=most)
    return _object(schema, named)


def _string(schema: dict[str, Any]) -> st.SearchStrategy[str]:
    most = schema.get("maxLength", SHORT)
    if "pattern" in schema:
        return st.from_regex(schema["pattern"], fullmatch=True).filter(lambda s: len(s) <= most)
    # any characters (control characters and NUL included; lone surrogates cannot travel as UTF-8 JSON),
    # and now and then a string at the bound exactly
    return st.text(max_size=min(most, SHORT)) | st.just(most).map(lambda n: "é" * n)


def _object(schema: dict[str, Any], named: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    properties = schema.get("properties")
    if properties is not None:
        def value(key: str, child: dict[str, Any]) -> st.SearchStrategy[Any]:
            own = _from(child, named)
            extra = named.get(key)
            if extra is not None and child.get("type") == "array":
                return st.lists(extra, max_size=min(child.get("maxItems", 6), 6)) | own
            return extra | own if extra is not None else own

        required = set(schema.get("required", []))
        return st.fixed_dictionaries({k: value(k, v) for k, v in properties.items() if k in required},
                                     optional={k: value(k, v) for k, v in properties.items() if k not in required})
    keys = st.text(min_size=1, max_size=min(schema.get("propertyNames", {}).get("maxLength", SHORT), SHORT))
    values = schema.get("additionalProperties")
    if isinstance(values, dict):
        leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                           st.text(max_size=min(values.get("maxLength", SHORT), SHORT)))
        value = st.recursive(leaves, lambda inner: st.lists(inner, max_size=4)
                             | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
    else:
        value = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=SHORT)),
                             lambda inner: st.lists(inner, max_size=4)
                             | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
    return st.dictionaries(keys, value, max_size=min(schema.get("maxProperties", 8), 8))
