"""Bad input, generated: every MCP tool called over real HTTP with arguments drawn from its own input schema
(hypothesis, schema_strategy.py), and with the same arguments broken (wrong types, bounds overstepped, strings made
hostile). Every answer: no 5xx, no internal error, no internal text; a refused call leaves every store as it
was. A short, deterministic run is part of ``make test``; ``make test-fuzz`` runs many more examples
(``KUMIHO_FUZZ_EXAMPLES`` per tool, default 200) and prints the figures as JSON."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from appliance.mcp_api.catalogue import tools
from tests.inprocess import InProcess, serve_in_process
from tests.mcp_api.hostile import RawMcp, snapshot
from tests.mcp_api.schema_strategy import from_schema

# a failing example may hold a 64 KiB string: hypothesis warns when it prints it
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")
SHORT_EXAMPLES = 6
LONG_EXAMPLES = int(os.environ.get("KUMIHO_FUZZ_EXAMPLES", "200"))
TOOLS = sorted(tools())

# Values that break a field whatever its schema: other types, hostile text, numbers out of any range.
HOSTILE = st.sampled_from([
    None, True, -1, 0, 2**63, -(2**63) - 1, 10**30, 1.5, float("inf"), float("nan"), [], [None], {}, {"a": {}},
    "", " ", "\x00", "a\x00b", "\u202e\u0000\x1b[31m", "../../etc/passwd", "/etc/passwd", "..", "C:\\Windows",
    "kref://", "kref://../../x", "kref://P/s/x.kind?r=0", "kref://P/s/x.kind?r=99999999999999999999",
    "²", "٣", "１２", "\ud800", "\udfff", "a\ud83d", "🦊" * 3, "*" * 300, "[[[[", "%s%n", "' OR 1=1 --",
    "MATCH (n) DETACH DELETE n",
]) | st.sampled_from([70_000, 1_000_000]).map(lambda n: "x" * n)  # built on draw: a long literal's repr warns


def _krefs(seed: dict[str, Any]) -> dict[str, st.SearchStrategy[Any]]:
    """krefs that exist (the seeded memory's, in their long and short forms), for every kref field: random
    strings alone would almost never reach past the kref parser."""
    item, revision = seed["item_kref"], seed["revision_kref"]
    short = item.rsplit(".", 1)[0]
    known = st.sampled_from([item, revision, f"{revision}&a=chat_io", short, f"{short}?r=1", item + "?r=99"])
    return {name: known for name in ("kref", "item_kref", "revision_kref", "revises", "policy_kref",
                                     "source_krefs", "source_revision_krefs")}


def _broken(schema: dict[str, Any], named: dict[str, st.SearchStrategy[Any]]) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments valid but for one field (or one undeclared key) replaced by a hostile value."""
    keys = sorted(schema.get("properties", {})) or ["unexpected"]
    return st.tuples(from_schema(schema, named), st.sampled_from([*keys, "unexpected"]), HOSTILE).map(
        lambda t: {**t[0], t[1]: t[2]})


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with serve_in_process(tmp_path_factory.mktemp("fuzz") / "data", None) as running:
        yield running


@pytest.fixture(scope="module")
def seed(app: InProcess) -> dict[str, Any]:
    """One memory whose krefs the generated arguments use."""
    client = RawMcp(app.base_url)
    stored = client.call("kumiho_memory_store", {"user_text": "The fuzz suite seeds one memory to find.",
                                                 "title": "Fuzz seed", "space_path": "notes"})
    client.close()
    assert stored.payload and stored.payload.get("stored"), stored.text
    return stored.payload


@pytest.fixture(scope="module")
def figures() -> Iterator[dict[str, Counter[str]]]:
    found: dict[str, Counter[str]] = {}
    yield found
    if found:
        total = sum((c for c in found.values()), Counter())
        print("\n" + json.dumps({"fuzz": {"tools": len(found), **total}, "per_tool": found}, sort_keys=True))


def _fuzz(app: InProcess, seed: dict[str, Any], name: str, examples: int, figures: dict[str, Counter[str]]
          ) -> None:
    schema = tools()[name].input_schema
    client = RawMcp(app.base_url)
    counts = figures.setdefault(name, Counter())

    named = _krefs(seed)

    @settings(max_examples=examples, derandomize=True, deadline=None, database=None, print_blob=True,
              suppress_health_check=list(HealthCheck))
    @given(st.one_of(from_schema(schema, named), _broken(schema, named)))
    def one_call(arguments: dict[str, Any]) -> None:
        before = snapshot(app)
        answer = client.call(name, arguments)
        counts["examples"] += 1
        if answer.refused:
            counts["refused"] += 1
            assert snapshot(app) == before, ("a refused call changed the stores", name, answer.text[:500])
        else:
            counts["accepted"] += 1

    try:
        one_call()
    finally:
        client.close()


@pytest.mark.parametrize("name", TOOLS)
def test_every_tool_survives_generated_arguments(app: InProcess, seed: dict[str, Any], name: str,
                                                 figures: dict[str, Counter[str]]) -> None:
    _fuzz(app, seed, name, SHORT_EXAMPLES, figures)


@pytest.mark.long
@pytest.mark.parametrize("name", TOOLS)
def test_every_tool_survives_many_generated_arguments(app: InProcess, seed: dict[str, Any], name: str,
                                                      figures: dict[str, Counter[str]]) -> None:
    _fuzz(app, seed, name, LONG_EXAMPLES, figures)

