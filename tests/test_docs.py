"""Docs generated from code stay fresh; the README keeps its two commands."""

from __future__ import annotations

from pathlib import Path

from appliance.config import reference_markdown

ROOT = Path(__file__).resolve().parents[1]


def test_the_configuration_reference_matches_the_code() -> None:
    written = (ROOT / "docs" / "configuration.md").read_text()
    assert written == reference_markdown(), (
        "docs/configuration.md is stale: run `.venv/bin/python -m appliance.config_reference > "
        "docs/configuration.md`")


def test_the_readme_shows_the_two_commands() -> None:
    readme = (ROOT / "README.md").read_text()
    assert "make run" in readme and "make test" in readme


def test_ci_runs_exactly_make_test() -> None:
    assert "exec make test" in (ROOT / ".ci" / "run").read_text()
