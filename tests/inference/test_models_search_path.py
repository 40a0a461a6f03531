"""Models apart from the data: one installed model serves every data directory, the service layout (a read-only
models_dir, the data elsewhere), and `kumiho-ce models list | path | verify` say where each model was found."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from appliance.cli import main
from appliance.config import load_settings
from appliance.inference import install
from appliance.inference.gguf_fixture import write_tiny_llama
from tests.appliance_process import cli_env, free_port, kumiho_ce, serve
from tests.inprocess import serve_in_process

DEFAULT_NAME, DEFAULT = next(iter(install.chat_models().items()))  # the real manifest's default model


def _entry(path: Path, **extra: Any) -> dict[str, Any]:
    data = path.read_bytes()
    return {"role": "chat", "default": True, "file": path.name, "size": len(data),
            "sha256": hashlib.sha256(data).hexdigest(), "licence": "Apache-2.0 (test)", "origin": "test",
            "parts": [], **extra}


@pytest.fixture
def tiny_manifest(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """A manifest of one chat model: the tiny random-weight GGUF (llama.cpp loads it in milliseconds)."""
    source = write_tiny_llama(tmp_path_factory.mktemp("source") / "tiny.gguf")
    entry = {**_entry(source), "source": source}
    monkeypatch.setattr(install, "manifest", lambda: {"chat": {"tiny": entry}})
    return entry


def _place(directory: Path, entry: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / entry["file"]
    target.write_bytes(entry["source"].read_bytes())
    return target


def _sparse_default(directory: Path) -> Path:
    """The real default model's file name and size (sparse: found by size; its sha256 is checked at load)."""
    directory.mkdir(parents=True, exist_ok=True)
    placed = directory / DEFAULT["file"]
    with placed.open("wb") as handle:
        handle.truncate(DEFAULT["size"])
    return placed


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_a_model_installed_once_serves_two_data_directories(tmp_path: Path, tiny_manifest: dict[str, Any],
                                                            installation_models: Path) -> None:
    installed = _place(installation_models, tiny_manifest)
    for name in ("alice", "bob"):
        data_dir = tmp_path / name
        with serve_in_process(data_dir, None, inference={"chat_model": "default"}) as app:
            chat = app.get("/api/v1/model")["chat"]
            assert (chat["model_id"], chat["path"], chat["available"]) == ("tiny", str(installed), True)
        assert not (data_dir / "models").exists()  # nothing copied into the data directory


def test_the_search_path_order_and_where_install_writes(tmp_path: Path, tiny_manifest: dict[str, Any],
                                                        installation_models: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    data_dir, models_dir = tmp_path / "data", tmp_path / "operator-models"
    in_data = _place(data_dir / "models", tiny_manifest)
    assert _cli(capsys, "--data-dir", str(data_dir), "models", "path") == (0, f"{in_data}\n", "")
    in_installation = _place(installation_models, tiny_manifest)  # the installation's copy comes first
    assert _cli(capsys, "--data-dir", str(data_dir), "models", "path") == (0, f"{in_installation}\n", "")
    assert install.install_target(load_settings(data_dir=data_dir)) == installation_models
    monkeypatch.setenv("KUMIHO_CE_MODELS_DIR", str(models_dir))
    code, out, _ = _cli(capsys, "--data-dir", str(data_dir), "models", "install", "--from", str(tmp_path / "none"))
    # models_dir is created, but the model is found (in the installation), so nothing is assembled
    assert code == 0 and out == f"tiny is installed: {in_installation} (found in installation)\n"
    assert models_dir.is_dir() and list(models_dir.iterdir()) == []
    in_models_dir = _place(models_dir, tiny_manifest)  # models_dir comes first
    code, out, _ = _cli(capsys, "--data-dir", str(data_dir), "models", "path", "--json")
    assert code == 0 and json.loads(out) == {"name": "tiny", "path": str(in_models_dir), "found_in": "models_dir"}
    assert install.install_target(load_settings(data_dir=data_dir)) == models_dir


def test_models_list_and_path_json(tmp_path: Path, tiny_manifest: dict[str, Any], installation_models: Path,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    data = ["--data-dir", str(tmp_path / "data")]
    code, out, err = _cli(capsys, *data, "models", "path", "tiny")
    assert code == 1 and out == ""
    assert "tiny is not installed: run `make models` or `kumiho-ce models install tiny`" in err
    code, out, _ = _cli(capsys, *data, "models", "list", "--json")
    listing = json.loads(out)
    assert code == 0 and listing["search_path"] == [
        {"name": "installation", "path": str(installation_models), "exists": False},
        {"name": "data_dir", "path": str(tmp_path / "data" / "models"), "exists": False}]
    assert listing["models"] == [{"name": "tiny", "role": "chat", "default": True, "file": "tiny.gguf",
                                  "size": tiny_manifest["size"], "sha256": tiny_manifest["sha256"],
                                  "licence": "Apache-2.0 (test)", "path": None, "found_in": None}]
    placed = _place(installation_models, tiny_manifest)
    code, out, _ = _cli(capsys, *data, "models", "list", "--json")
    assert [(m["path"], m["found_in"]) for m in json.loads(out)["models"]] == [(str(placed), "installation")]
    code, out, _ = _cli(capsys, *data, "models", "list")
    assert code == 0 and f"found in installation: {placed}" in out and "Apache-2.0 (test)" in out
    assert tiny_manifest["sha256"] in out


def test_models_verify_checks_the_sha256_and_that_llama_cpp_loads_the_file(
        tmp_path: Path, tiny_manifest: dict[str, Any], installation_models: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    data = ["--data-dir", str(tmp_path / "data")]
    code, out, _ = _cli(capsys, *data, "models", "verify", "--json")
    assert code == 1 and json.loads(out) == {"ok": False, "models": [{
        "name": "tiny", "role": "chat", "path": None, "found_in": None, "sha256_ok": None, "loads": None,
        "error": "not installed: run `make models` or `kumiho-ce models install tiny`"}]}
    placed = _place(installation_models, tiny_manifest)
    code, out, _ = _cli(capsys, *data, "models", "verify", "--json")
    assert code == 0 and json.loads(out) == {"ok": True, "models": [{
        "name": "tiny", "role": "chat", "path": str(placed), "found_in": "installation", "sha256_ok": True,
        "loads": True, "error": None}]}
    assert _cli(capsys, *data, "models", "verify")[:2] == (0, f"ok    tiny: {placed} (found in installation), "
                                                              "sha256 verified, loads with llama.cpp\n")
    placed.write_bytes(b"\0" * tiny_manifest["size"])  # the right size, the wrong bytes
    code, out, _ = _cli(capsys, *data, "models", "verify", "tiny", "--json")
    verdict = json.loads(out)["models"][0]
    assert code == 1 and verdict["sha256_ok"] is False and verdict["loads"] is None
    assert "fails its sha256 check" in verdict["error"]
    # a file that is what the manifest pins but that llama.cpp cannot load: the error says so and how to fix it
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF" + b"\1" * 200)
    placed.write_bytes(broken.read_bytes())
    monkeypatch.setattr(install, "manifest", lambda: {"chat": {"tiny": _entry(broken, file="tiny.gguf")}})
    code, out, _ = _cli(capsys, *data, "models", "verify")
    assert code == 1 and out.startswith("FAIL  tiny: llama.cpp cannot load ")
    assert "`kumiho-ce models install --force tiny`" in out


def test_the_service_layout_a_read_only_models_dir_and_the_data_elsewhere(tmp_path: Path) -> None:
    """As a service runs: models in a directory the appliance only reads, the data directory somewhere else."""
    models_dir = tmp_path / "opt" / "models"
    placed = _sparse_default(models_dir)
    models_dir.chmod(0o555)
    before = sorted((p.name, p.stat().st_mtime_ns) for p in models_dir.iterdir())
    try:
        for name in ("var-lib", "elsewhere"):
            data_dir = tmp_path / name / "data"
            data_dir.parent.mkdir()
            env = {"KUMIHO_CE_MODELS_DIR": str(models_dir), "KUMIHO_CE_INFERENCE__CHAT_MODEL": "default"}
            with serve(data_dir, **env) as running:
                chat = httpx.get(running.base_url + "/api/v1/model", timeout=30).json()["chat"]
                assert (chat["model_id"], chat["path"]) == (DEFAULT_NAME, str(placed))
                assert running.stop() == 0
            found = kumiho_ce("models", "path", "--json", env=cli_env(data_dir, **env))
            assert found.returncode == 0, found.stderr
            assert json.loads(found.stdout) == {"name": DEFAULT_NAME, "path": str(placed), "found_in": "models_dir"}
            assert not (data_dir / "models").exists()
        assert sorted((p.name, p.stat().st_mtime_ns) for p in models_dir.iterdir()) == before
    finally:
        models_dir.chmod(0o755)


def test_a_models_dir_that_is_not_there_is_named_with_its_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    nowhere, data_dir = tmp_path / "no-such-models", tmp_path / "data"
    with monkeypatch.context() as env:
        env.setenv("KUMIHO_CE_MODELS_DIR", str(nowhere))
        code, _, err = _cli(capsys, "--data-dir", str(data_dir), "models", "list")
    assert code == 2 and f"models_dir: {nowhere} is not a directory" in err and "KUMIHO_CE_MODELS_DIR" in err
    refused = kumiho_ce("serve", "--port", str(free_port()), env=cli_env(data_dir, KUMIHO_CE_MODELS_DIR=str(nowhere)))
    assert refused.returncode == 2
    assert f"models_dir: {nowhere} is not a directory" in refused.stderr and "Traceback" not in refused.stderr
    assert not (data_dir / "graph").exists()  # refused before any store opened
