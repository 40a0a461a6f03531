"""Prompt templates: files of their own, loaded by name, values checked."""

from __future__ import annotations

import pytest

from appliance.inference import prompts


def test_every_template_parses_into_chat_messages() -> None:
    assert "json_smoke" in prompts.names()
    for name in prompts.names():
        roles = [role for role, _ in prompts.template(name)]
        assert roles and set(roles) <= {"system", "user", "assistant"}


def test_a_template_renders_with_its_values_and_keeps_json_braces() -> None:
    messages = prompts.render("json_smoke", text='Alice said {"a": 1} costs $5')
    assert [m["role"] for m in messages] == ["system", "user"]
    assert 'Note: Alice said {"a": 1} costs $5' in messages[1]["content"]
    assert "## " not in messages[0]["content"] and "smoke test" not in messages[0]["content"]


def test_missing_unused_or_unknown_names_are_errors() -> None:
    with pytest.raises(prompts.PromptError, match="needs values for: text"):
        prompts.render("json_smoke")
    with pytest.raises(prompts.PromptError, match="no placeholder for: extra"):
        prompts.render("json_smoke", text="x", extra="y")
    with pytest.raises(prompts.PromptError, match="no prompt template named 'nope'"):
        prompts.render("nope")
    with pytest.raises(prompts.PromptError, match="no prompt template"):
        prompts.render("../README")
