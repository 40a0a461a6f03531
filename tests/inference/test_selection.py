"""Which model a call gets: dream_state's provider/model/base_url/api_key (only what the operator set up) and
chat_model = endpoint (D6)."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.config import InferenceSettings, load_settings
from appliance.core.ports import NoModel
from appliance.errors import ConfigError, InvalidArgument
from appliance.inference.chat import ScriptedModel
from appliance.inference.factory import chat_model
from appliance.inference.install import chat_models, data_models_dir
from appliance.inference.llm import LlamaModel
from appliance.inference.remote import EndpointModel
from appliance.inference.selection import model_for_call

DEFAULT = ScriptedModel(model_id="configured")


def test_no_selection_or_the_configured_name_is_the_configured_model() -> None:
    settings = load_settings()
    assert model_for_call(settings, DEFAULT) is DEFAULT
    assert model_for_call(settings, DEFAULT, **{"provider": "local", "model": "configured"}) is DEFAULT


def test_a_manifest_model_is_chosen_by_name_once_installed(tmp_path: Path, installation_models: Path) -> None:
    settings = load_settings(data_dir=tmp_path, inference={"context_tokens": 2048, "idle_unload_seconds": 7})
    name, entry = next(iter(chat_models().items()))
    with pytest.raises(InvalidArgument, match="not installed") as caught:
        model_for_call(settings, DEFAULT, **{"model": name})
    assert caught.value.field == "model"
    placed = data_models_dir(settings) / entry["file"]
    placed.parent.mkdir(parents=True)
    with placed.open("wb") as handle:  # sparse: installed_path checks the size; the sha256 is checked at load
        handle.truncate(entry["size"])
    chosen = model_for_call(settings, DEFAULT, **{"provider": "local", "model": name})
    assert isinstance(chosen, LlamaModel) and chosen.model_id == name and chosen.path == placed
    # made by the one factory, with the configured options
    assert (chosen.context_tokens, chosen.idle_unload_seconds) == (2048, 7)
    chosen.close()


def test_a_path_is_refused_alike_whether_or_not_it_exists(tiny_gguf: Path, tmp_path: Path) -> None:
    """No oracle: the answer to a file path is the same for an existing GGUF, a missing one and any file."""
    other = tmp_path / "notes.txt"
    other.write_text("x")
    messages = set()
    for path in (tiny_gguf, tmp_path / "missing.gguf", other, "/etc/passwd", "~/model.gguf"):
        with pytest.raises(InvalidArgument) as caught:
            model_for_call(load_settings(), DEFAULT, **{"model": str(path)})
        assert caught.value.field == "model"
        messages.add(caught.value.message)
    assert len(messages) == 1 and str(tiny_gguf) not in messages.pop()


@pytest.mark.parametrize(("args", "field"), [
    ({"provider": "anthropic"}, "provider"),
    ({"model": "gpt-4o"}, "model"),
    ({"provider": "openai"}, "provider"),  # no configured endpoint
    ({"base_url": "http://127.0.0.1:8080/v1"}, "base_url"),  # not the configured endpoint, even on loopback
    ({"base_url": "https://api.example.com/v1"}, "base_url"),
    ({"api_key": "sk-never-shown-123"}, "api_key"),
])
def test_what_cannot_be_selected_names_its_field(args: dict[str, str], field: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        model_for_call(load_settings(), DEFAULT, **args)
    assert caught.value.field == field
    assert "sk-never" not in caught.value.message


CONFIGURED = {"endpoint_url": "http://127.0.0.1:8080/v1", "endpoint_model": "qwen"}


def test_only_the_configured_endpoint_may_be_named() -> None:
    settings = load_settings(inference=CONFIGURED)
    for args in ({"provider": "openai"}, {"base_url": "HTTP://127.0.0.1:8080/v1/"}, {"provider": "ollama",
                                                                                     "model": "qwen"}):
        chosen = model_for_call(settings, DEFAULT, **args)
        assert isinstance(chosen, EndpointModel) and chosen.model_id == "endpoint:qwen@127.0.0.1"
        chosen.close()
    refused = [{"base_url": "http://127.0.0.1:8081/v1"}, {"base_url": "http://localhost:8080/v1"},
               {"base_url": "http://127.0.0.1:8080/other"}, {"provider": "openai", "model": "another"},
               {"provider": "openai", "api_key": "sk-never-shown-123"}]
    for args in refused:
        with pytest.raises(InvalidArgument):
            model_for_call(settings, DEFAULT, **args)
    endpoint = load_settings(inference={**CONFIGURED, "chat_model": "endpoint"})
    assert model_for_call(endpoint, DEFAULT, **{"provider": "openai"}) is DEFAULT


def test_a_call_cannot_reach_a_configured_endpoint_beyond_loopback_unless_allowed() -> None:
    settings = load_settings(inference={"endpoint_url": "http://10.0.0.7:8080/v1", "endpoint_model": "qwen"})
    with pytest.raises(ConfigError, match=r"inference\.endpoint_url: .*allow_remote_endpoints"):
        model_for_call(settings, DEFAULT, **{"provider": "openai"})


def test_the_configured_endpoint_model(tmp_path: Path) -> None:
    models = [tmp_path / "models"]
    missing = chat_model(InferenceSettings(chat_model="endpoint"), models)
    assert isinstance(missing, NoModel) and "endpoint_url" in missing.reason
    configured = chat_model(InferenceSettings(chat_model="endpoint", endpoint_url="http://localhost:11434/v1",
                                              endpoint_model="qwen2.5"), models)
    assert isinstance(configured, EndpointModel) and configured.model_id == "endpoint:qwen2.5@localhost"
    with pytest.raises(ConfigError, match="allow_remote_endpoints"):
        chat_model(InferenceSettings(chat_model="endpoint", endpoint_url="http://10.0.0.7:8080/v1"), models)
