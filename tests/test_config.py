"""Configuration: TOML file + KUMIHO_CE_* variables, seed defaults, clear errors, masked secrets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from appliance.config import load_settings, render_toml, resolve_config_path
from appliance.errors import ConfigError


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import os

    for key in list(os.environ):
        if key.startswith("KUMIHO_CE_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))


def test_embedded_defaults_follow_the_seed(tmp_path: Path) -> None:
    settings = load_settings(None)
    assert (settings.host, settings.port) == ("127.0.0.1", 9190)
    assert settings.data_dir == tmp_path / "xdg-data" / "kumiho-ce"
    assert settings.memory.min_relevance_score == 0.4
    assert settings.memory.hygiene_enabled is False and settings.memory.archive_after_days == 7
    assert settings.memory.policy.max_entries_per_namespace == 0
    assert settings.kumiho.memory_retrieval_limit == 3
    assert settings.kumiho.default_project == "CognitiveMemory"
    assert 16 <= settings.graph.buffer_pool_mb <= 1024


def test_the_file_sets_values_and_the_environment_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "c.toml"
    config.write_text('port = 9300\n[memory]\nmin_relevance_score = 0.5\n[memory.policy]\n'
                      'read_only_namespaces = ["archive"]\n[kumiho]\nmemory_retrieval_limit = 5\n')
    monkeypatch.setenv("KUMIHO_CE_PORT", "9400")
    monkeypatch.setenv("KUMIHO_CE_MEMORY__MIN_RELEVANCE_SCORE", "0.6")
    monkeypatch.setenv("KUMIHO_CE_DATA_DIR", str(tmp_path / "data"))
    settings = load_settings(config)
    assert settings.port == 9400 and settings.memory.min_relevance_score == 0.6
    assert settings.memory.policy.read_only_namespaces == ["archive"]
    assert settings.kumiho.memory_retrieval_limit == 5
    assert settings.data_dir == tmp_path / "data"


def test_the_config_path_comes_from_the_flag_the_variable_or_xdg(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert resolve_config_path(None) is None
    default = tmp_path / "xdg-config" / "kumiho-ce" / "config.toml"
    default.parent.mkdir(parents=True)
    default.write_text("port = 9500\n")
    assert resolve_config_path(None) == default
    monkeypatch.setenv("KUMIHO_CE_CONFIG", str(tmp_path / "env.toml"))
    assert resolve_config_path(None) == tmp_path / "env.toml"
    assert resolve_config_path("flag.toml") == Path("flag.toml")


def test_a_service_reads_its_configuration_directory_only_when_the_file_is_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """systemd names the unit's ConfigurationDirectory= in $CONFIGURATION_DIRECTORY: a first start, before anyone
    wrote config.toml there, runs on the defaults instead of failing; once written, the file is read; an
    explicit $KUMIHO_CE_CONFIG still wins."""
    service_dir = tmp_path / "etc" / "kumiho-ce"
    service_dir.mkdir(parents=True)
    monkeypatch.setenv("CONFIGURATION_DIRECTORY", f"{tmp_path / 'elsewhere'}:{service_dir}")
    assert resolve_config_path(None) is None
    assert load_settings(resolve_config_path(None)).port == 9190
    (service_dir / "config.toml").write_text("port = 9600\n")
    assert resolve_config_path(None) == service_dir / "config.toml"
    assert load_settings(resolve_config_path(None)).port == 9600
    monkeypatch.setenv("KUMIHO_CE_CONFIG", str(tmp_path / "env.toml"))
    assert resolve_config_path(None) == tmp_path / "env.toml"


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("[memory]\nmin_relevance_score = 2.0\n", ["memory.min_relevance_score", "less than or equal to 1",
                                                   "KUMIHO_CE_MEMORY__MIN_RELEVANCE_SCORE"]),
        ("[memory]\nmin_relevence_score = 0.3\n", ["unknown setting 'memory.min_relevence_score'"]),
        ("port = 'high'\n", ["setting 'port'"]),
        ("port = \n", ["not valid TOML"]),
    ],
)
def test_a_bad_file_gets_one_clear_error_naming_the_key(tmp_path: Path, text: str, needles: list[str]) -> None:
    config = tmp_path / "c.toml"
    config.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    for needle in needles:
        assert needle in caught.value.message
    assert "Traceback" not in caught.value.message


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_settings(tmp_path / "nope.toml")


def test_show_masks_secrets_and_round_trips(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUMIHO_CE_API_TOKEN", "s3cret-value")
    text = render_toml(load_settings(None))
    assert "s3cret-value" not in text and 'api_token = "**********"' in text
    monkeypatch.delenv("KUMIHO_CE_API_TOKEN")
    shown = tmp_path / "shown.toml"
    shown.write_text(render_toml(load_settings(None)))
    assert load_settings(shown).model_dump() == load_settings(None).model_dump()


def test_loopback_detection() -> None:
    assert load_settings(None, host="127.0.0.1").is_loopback
    assert load_settings(None, host="::1").is_loopback
    assert not load_settings(None, host="0.0.0.0").is_loopback


def test_the_token_is_required_beyond_loopback_and_on_loopback_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not load_settings(None).token_required  # a local CE is tokenless, as Kumiho's is
    assert load_settings(None, host="0.0.0.0").token_required
    monkeypatch.setenv("KUMIHO_CE_REQUIRE_TOKEN", "true")
    assert load_settings(None).require_token and load_settings(None).token_required
    monkeypatch.setenv("KUMIHO_CE_REQUIRE_TOKEN", "maybe")
    with pytest.raises(ConfigError, match=r"require_token.*KUMIHO_CE_REQUIRE_TOKEN"):
        load_settings(None)


@pytest.mark.parametrize("value", ["a/b", "", "bad name", "x" * 65, "..", "ops\n"])
def test_a_bad_default_namespace_stops_the_start_naming_the_setting(tmp_path: Path, value: str) -> None:
    config = tmp_path / "c.toml"
    config.write_text(f"[memory]\ndefault_namespace = {json.dumps(value)}\n")  # a JSON string is a TOML one
    with pytest.raises(ConfigError) as caught:
        load_settings(config)
    message = caught.value.message
    assert "setting 'memory.default_namespace'" in message and "KUMIHO_CE_MEMORY__DEFAULT_NAMESPACE" in message
    assert "Traceback" not in message


def test_a_good_default_namespace_is_kept(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[memory]\ndefault_namespace = "agent-7_b"\n')
    assert load_settings(config).memory.default_namespace == "agent-7_b"


def test_an_invalid_secret_setting_is_named_without_its_value(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("api_token = 918273645546372819\n[inference]\nendpoint_api_key = 564738291827364554\n")
    with pytest.raises(ConfigError) as refused:
        load_settings(config)
    message = refused.value.message
    assert "'api_token'" in message and "'inference.endpoint_api_key'" in message and "not shown" in message
    assert "918273645546372819" not in message and "564738291827364554" not in message
