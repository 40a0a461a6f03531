"""Every tool of Kumiho's reference catalogue is an operation whose generated input schema matches the
reference's (property names, types, defaults, enums, required, annotations), except the differences listed
with their reasons in appliance/operations/differences.py."""

from __future__ import annotations

from typing import Any

from appliance.operations.catalogue import operations
from appliance.operations.differences import DIFFERENCES
from tests.fixtures import REFERENCE_TOOLS as REFERENCE

HINTS = ("readOnlyHint", "destructiveHint", "idempotentHint")


def _types(schema: dict[str, Any]) -> set[str]:
    kind = schema.get("type")
    return set(kind) if isinstance(kind, list) else {kind} if kind else set()


def _compare(tool: str, ours: dict[str, Any], theirs: dict[str, Any], path: str, found: set[tuple[str, str]]) -> None:
    mine, reference = ours.get("properties", {}), theirs.get("properties", {})
    for name in reference.keys() - mine.keys():
        found.add((tool, f"{path}{name}:missing"))
    for name in mine.keys() - reference.keys():
        found.add((tool, f"{path}{name}:extra"))
    required_mine, required_theirs = set(ours.get("required", [])), set(theirs.get("required", []))
    for name in (required_mine ^ required_theirs) & mine.keys() & reference.keys():
        found.add((tool, f"{path}{name}:required"))
    for name in mine.keys() & reference.keys():
        a, b = mine[name], reference[name]
        if _types(a) != _types(b):
            found.add((tool, f"{path}{name}:type"))
        if a.get("default") != b.get("default"):
            found.add((tool, f"{path}{name}:default"))
        if a.get("enum") != b.get("enum"):
            found.add((tool, f"{path}{name}:enum"))
        if "properties" in a.get("items", {}) or "properties" in b.get("items", {}):
            _compare(tool, a.get("items", {}), b.get("items", {}), f"{path}{name}[].", found)
        if "properties" in a or "properties" in b:
            _compare(tool, a, b, f"{path}{name}.", found)


def test_every_reference_tool_is_an_operation() -> None:
    missing = sorted({t["name"] for t in REFERENCE} - operations().keys())
    assert not missing, f"reference tools without an operation: {missing}"
    assert len(REFERENCE) == 69


def test_generated_schemas_match_the_reference_except_the_listed_differences() -> None:
    found: set[tuple[str, str]] = set()
    ops = operations()
    for tool in REFERENCE:
        op = ops.get(tool["name"])
        if op is None:
            continue
        _compare(op.name, op.input_schema, tool["inputSchema"], "", found)
        for hint in HINTS:
            if op.annotations[hint] != tool["annotations"][hint]:
                found.add((op.name, f":{hint}"))
    unlisted = sorted(found - DIFFERENCES.keys())
    stale = sorted(DIFFERENCES.keys() - found)
    assert not unlisted, f"differences from the reference not listed in differences.py: {unlisted}"
    assert not stale, f"differences.py lists differences that no longer exist: {stale}"


def test_every_listed_difference_says_why() -> None:
    assert all(len(reason) > 20 for reason in DIFFERENCES.values())
