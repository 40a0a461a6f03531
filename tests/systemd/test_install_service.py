"""``make install-service`` for real, into a temporary root: systemd/install.sh builds the virtual environment
(llama-cpp-python from the wheel built for this machine), places the model beside the appliance, the unit and the
commented configuration; then the installed unit's commands run as systemd would run them (tests/systemd/
test_unit_commands.py) and the appliance becomes ready with its model found in the installation. Running the
script again keeps the operator's configuration. A few minutes: `make test-install-service`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from appliance.inference.install import chat_models
from tests.systemd.service import ROOT
from tests.systemd.test_unit import verify
from tests.systemd.test_unit_commands import run_unit

pytestmark = pytest.mark.long


def llama_wheels() -> Path:
    given = os.environ.get("LLAMA_WHEELS")  # the Makefile's (make test-install-service passes it)
    if given:
        return Path(given)
    cached = sorted(Path.home().glob(".cache/kumiho-ce/llama-cpp-python/*/llama_cpp_python-*.whl"))
    if not cached:
        pytest.fail("no llama-cpp-python wheel built: run `make install` first (or pass LLAMA_WHEELS=)")
    return cached[-1].parent


def installed_model_dir() -> list[str]:
    """--models-from a directory that holds the default model already (no 491 MB download), when there is one."""
    name = next(iter(chat_models().values()))["file"]
    for directory in (Path(sys.prefix) / "share" / "kumiho-ce" / "models",
                      Path.home() / ".local" / "share" / "kumiho-ce" / "models"):
        if (directory / name).is_file():
            return ["--models-from", str(directory)]
    return []


def install(root: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the installed code, not a worktree's
    return subprocess.run(["sh", str(ROOT / "systemd" / "install.sh"), "--root", str(root), "--llama-wheels",
                           str(llama_wheels()), *installed_model_dir()], capture_output=True, text=True,
                          timeout=1800, env=env)


def test_the_install_script_and_the_units_commands_give_a_ready_appliance_with_its_model(tmp_path: Path) -> None:
    root = tmp_path / "root"
    first = install(root)
    assert first.returncode == 0, first.stdout + first.stderr
    unit_file = root / "etc" / "systemd" / "system" / "kumiho-ce.service"
    config = root / "etc" / "kumiho-ce" / "config.toml"
    assert unit_file.is_file() and config.read_text() == (ROOT / "systemd" / "config.toml").read_text()
    installation = root / "opt" / "kumiho-ce" / ".venv"
    model = installation / "share" / "kumiho-ce" / "models" / next(iter(chat_models().values()))["file"]
    assert model.is_file()
    checked = verify(unit_file.read_text(), tmp_path, installation / "bin" / "kumiho-ce")
    assert checked.returncode == 0 and checked.stdout + checked.stderr == "", checked.stderr

    config.unlink()  # a first boot with no configuration file at all

    def moved(word: str) -> str:
        return str(root) + word if word.startswith(("/opt/kumiho-ce", "/var/lib/kumiho-ce", "/etc/kumiho-ce")) \
            else word

    found = run_unit(root, moved, tmp_path / "journal.log", unit_file, this_checkout=False)
    doctor = found["doctor"]
    assert isinstance(doctor, dict)
    assert doctor["chat_model"]["status"] == "ok" and str(model) in doctor["chat_model"]["detail"], doctor
    models = found["models"]
    assert isinstance(models, subprocess.CompletedProcess) and models.returncode == 0, models
    assert json.loads(models.stdout) == {"name": next(iter(chat_models())), "path": str(model),
                                         "found_in": "installation"}, models.stderr

    # again: an upgrade in place keeps the operator's configuration
    config.write_text('log_level = "debug"\n')
    second = install(root)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "keeping" in second.stdout and config.read_text() == 'log_level = "debug"\n'
    assert "the default chat model is in place" in second.stdout
