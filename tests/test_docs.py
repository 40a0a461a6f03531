"""Docs generated from code stay fresh; the README keeps its two commands."""

from __future__ import annotations

import re
from pathlib import Path

from appliance.config import reference_markdown
from appliance.mcp_api import docs as mcp_docs
from appliance.mcp_api import tool_notes
from appliance.operations.catalogue import operations

ROOT = Path(__file__).resolve().parents[1]


def test_the_configuration_reference_matches_the_code() -> None:
    written = (ROOT / "docs" / "configuration.md").read_text()
    assert written == reference_markdown(), (
        "docs/configuration.md is stale: run `.venv/bin/python -m appliance.config_reference > "
        "docs/configuration.md`")


def test_the_mcp_tool_reference_matches_the_catalogue() -> None:
    written = (ROOT / "docs" / "mcp-tools.md").read_text()
    assert written == mcp_docs.reference_markdown(), (
        "docs/mcp-tools.md is stale: run `.venv/bin/python -m appliance.mcp_api.docs > docs/mcp-tools.md`")


def test_the_mcp_tool_reference_documents_every_tool_once() -> None:
    text = mcp_docs.reference_markdown()
    for name, spec in operations().items():
        assert text.count(f"\n### {name}\n") == 1, name
        assert spec.description in text, name
        for parameter in spec.input_schema.get("properties", {}):
            assert f"| `{parameter}` |" in text, (name, parameter)
    grouped = [name for _, names, _ in tool_notes.GROUPS for name in names]
    assert sorted(grouped) == sorted(operations()), "every tool belongs to exactly one group of tool_notes.py"


def test_the_mcp_tool_reference_takes_its_numbers_from_the_code() -> None:
    from appliance.memory.cache import WINDOW_SECONDS
    from appliance.memory.writer import STACK_MIDDLE, STACK_MIN_OVERLAP, STACK_STRONG

    text = mcp_docs.reference_markdown()
    assert f"≥ {STACK_STRONG}" in text and f"≥ {STACK_MIDDLE}" in text and f"≥ {STACK_MIN_OVERLAP}" in text
    assert f"{WINDOW_SECONDS:g}-second cache" in text
    assert "skipped: no local model" in text and "redacted: [...]" in text
    assert text == mcp_docs.reference_markdown()  # deterministic


def test_the_agent_host_guide_has_the_configurations() -> None:
    guide = (ROOT / "docs" / "agent-hosts.md").read_text()
    for needle in ('"command": "kumiho-ce"', '"args": ["mcp"]', "http://127.0.0.1:9190/mcp", "[[mcp.servers]]",
                   'name = "kumiho-memory"', 'mode = "local_ce"', 'api_url = "http://127.0.0.1:9190"',
                   "mcp_path", 'backend = "kumiho"', "kumiho-ce revka-launcher", "KUMIHO_MEMORY_RETRIEVAL_LIMIT"):
        assert needle in guide, needle
    assert "#!/bin/sh" not in guide  # Revka runs mcp_path with python3: the launcher must be Python
    revka = (ROOT / "docs" / "revka-local-ce.md").read_text()
    for needle in ("KUMIHO_LOCAL_SERVER_ENDPOINT", "~/.revka/kumiho/run_kumiho_mcp.py", "KUMIHO_UPSTASH_REDIS_URL",
                   "/api/v1", "python3 <mcp_path>", "kumiho-ce revka-launcher", "kumiho-ce doctor"):
        assert needle in revka, needle
    readme = (ROOT / "README.md").read_text()
    assert "docs/agent-hosts.md" in readme and "docs/mcp-tools.md" in readme and "kumiho-ce mcp" in readme


def test_the_readme_shows_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "make run" in readme and "make test" in readme


def test_ci_runs_exactly_make_test() -> None:
    assert "exec make test" in (ROOT / ".ci" / "run").read_text()


def _anchors(markdown: str) -> set[str]:
    """The anchors a Markdown renderer gives the page's headings (lower case, punctuation dropped, '-' for spaces)."""
    headings = re.findall(r"^#+ (.*)$", re.sub(r"```.*?```", "", markdown, flags=re.S), re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_every_link_between_the_docs_reaches_a_page_and_a_heading() -> None:
    """A page moved or merged into another (and deleted) leaves no link to nowhere."""
    broken = []
    for page in (*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"):
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            linked = (page.parent / path) if path else page
            if not linked.exists():
                broken.append(f"{page.name}: {target} (no such file)")
            elif anchor and linked.suffix == ".md" and anchor not in _anchors(linked.read_text()):
                broken.append(f"{page.name}: {target} (no such heading)")
    assert not broken, broken


def test_the_grpc_page_lists_every_method_and_what_is_served() -> None:
    """docs/grpc.md's table names each of the service's methods once, in order, and says which are served."""
    from appliance.grpc_api.descriptor import METHODS
    from appliance.grpc_api.rpcs import RPCS

    rows = re.findall(r"^\| (\d+) \| (\w+) \| (served|UNIMPLEMENTED) \|", (ROOT / "docs" / "grpc.md").read_text(), re.M)
    assert [name for _, name, _ in rows] == list(METHODS)
    assert [int(n) for n, _, _ in rows] == list(range(1, len(METHODS) + 1))
    status = {name: served for _, name, served in rows}
    assert {name for name, served in status.items() if served == "served"} == set(RPCS)
