"""docs/install.md's workstation and "Where models are found" sections, run: every ```sh block of those two sections
is executed with ``bash -e`` against a scratch data directory, with ``kumiho-ce`` (this checkout) on the PATH and the
default chat model installed where this machine installed it. A block passes when it exits 0 and prints something;
a block whose first line is ``# not run`` is skipped (it installs from the package registries or keeps a server in
the foreground)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from appliance.config import load_settings
from appliance.inference.install import chat_models, installation_models_dir, installed_path
from tests.appliance_process import cli_env

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "install.md"
SECTIONS = ("## On a workstation", "## Where models are found")
_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)

pytestmark = pytest.mark.real_model


def _section(text: str, title: str) -> tuple[int, str]:
    start = text.index(title + "\n")
    end = text.find("\n## ", start + len(title))
    return start, text[start:end if end != -1 else len(text)]


def blocks() -> list[tuple[int, str]]:
    text = DOC.read_text()
    found = []
    for title in SECTIONS:
        offset, section = _section(text, title)
        for match in _BLOCK.finditer(section):
            if not match.group(1).lstrip().startswith("# not run"):
                found.append((text.count("\n", 0, offset + match.start()) + 1, match.group(1)))
    return found


def test_the_sections_show_the_models_commands() -> None:
    commands = "\n".join(command for _, command in blocks())
    for action in ("list", "verify", "path", "list --json", "path --json", "verify --json"):
        assert f"kumiho-ce models {action}" in commands


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """A fresh data directory; the default chat model where this machine installed it (the installation's
    directory after `make models`; on a machine that installed it into its default data directory before models
    lived apart, that directory, named by models_dir)."""
    home = tmp_path_factory.mktemp("install-doc")
    name = next(iter(chat_models()))
    installed = installed_path(load_settings(), name)
    assert installed is not None, f"{name} is not installed: run `make models`"
    bin_dir = home / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "kumiho-ce"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{sys.executable}" -m appliance "$@"\n')
    wrapper.chmod(0o755)
    env = cli_env(home / "data", KUMIHO_CE_INFERENCE__CHAT_MODEL="default")
    if installed.parent != installation_models_dir():
        env["KUMIHO_CE_MODELS_DIR"] = str(installed.parent)
    env.update({"HOME": str(home), "PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    return env


@pytest.mark.parametrize(("line", "command"), [pytest.param(*b, id=f"line{b[0]}") for b in blocks()])
def test_the_command_runs(line: int, command: str, scratch: dict[str, str]) -> None:
    done = subprocess.run(["bash", "-e", "-c", command], env=scratch, cwd=scratch["HOME"], capture_output=True,
                          text=True, timeout=240)
    where = f"docs/install.md line {line}:\n{command}\nstdout: {done.stdout[-2000:]}\nstderr: {done.stderr[-2000:]}"
    assert done.returncode == 0, where
    assert done.stdout.strip(), where
    assert not (Path(scratch["KUMIHO_CE_DATA_DIR"]) / "models").exists(), "a models command wrote to the data dir"
