"""Which model a call gets: dream_state's provider/model/base_url/api_key and chat_model = endpoint (D6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.config import load_settings
from appliance.errors import ConfigError, InvalidArgument
from appliance.inference.chat import NoModel, ScriptedModel
from appliance.inference.llm import LlamaModel, chat_model_from_settings
from appliance.inference.remote import EndpointModel
from appliance.inference.selection import model_for_call

DEFAULT = ScriptedModel(model_id="configured")


def test_no_selection_or_the_configured_name_is_the_configured_model() -> None:
    settings = load_settings()
    assert model_for_call(settings, DEFAULT, {}) is DEFAULT
    assert model_for_call(settings, DEFAULT, {"provider": "local", "model": "configured"}) is DEFAULT


def test_a_gguf_path_loads_that_file_for_the_call(tiny_gguf: Path) -> None:
    chosen = model_for_call(load_settings(), DEFAULT, {"model": str(tiny_gguf)})
    assert isinstance(chosen, LlamaModel) and chosen.model_id == "gguf:tiny.gguf"
    chosen.close()


@pytest.mark.parametrize(("args", "field"), [
    ({"provider": "anthropic"}, "provider"),
    ({"model": "/no/such/model.gguf"}, "model"),
    ({"model": "gpt-4o"}, "model"),
    ({"provider": "openai"}, "base_url"),  # no base_url and no configured endpoint
    ({"base_url": "https://api.example.com/v1"}, "base_url"),  # D6: beyond loopback, not allowed
])
def test_what_cannot_be_selected_names_its_field(args: dict[str, str], field: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        model_for_call(load_settings(), DEFAULT, args)
    assert caught.value.field == field


def test_endpoints_on_loopback_or_when_allowed() -> None:
    local = model_for_call(load_settings(), DEFAULT, {"base_url": "http://127.0.0.1:8080/v1", "model": "qwen",
                                                      "api_key": "sk-never-shown-123"})
    assert isinstance(local, EndpointModel) and local.model_id == "endpoint:qwen@127.0.0.1"
    assert "sk-never" not in repr(local.status())
    allowed = load_settings(inference={"allow_remote_endpoints": True})
    remote = model_for_call(allowed, DEFAULT, {"provider": "openai", "base_url": "https://api.example.com/v1"})
    assert isinstance(remote, EndpointModel) and remote.model == "default"


def test_the_configured_endpoint_model() -> None:
    missing = chat_model_from_settings(load_settings(inference={"chat_model": "endpoint"}))
    assert isinstance(missing, NoModel) and "endpoint_url" in missing.reason
    configured = chat_model_from_settings(load_settings(inference={
        "chat_model": "endpoint", "endpoint_url": "http://localhost:11434/v1", "endpoint_model": "qwen2.5"}))
    assert isinstance(configured, EndpointModel) and configured.model_id == "endpoint:qwen2.5@localhost"
    with pytest.raises(ConfigError, match="allow_remote_endpoints"):
        chat_model_from_settings(load_settings(inference={"chat_model": "endpoint",
                                                          "endpoint_url": "http://10.0.0.7:8080/v1"}))
