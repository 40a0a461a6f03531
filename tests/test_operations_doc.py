"""docs/operations.md, run: every ```sh block is executed, in the order of the page, with ``bash -e`` against a
scratch data directory holding a few memories, with ``kumiho-ce`` (this checkout) on the PATH. A block passes when
it exits 0 and prints something. Blocks in other languages (```toml, ```text) are shown, not run. A block whose
first line is ``# not run`` is skipped (for commands that need a service manager or another machine)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.appliance_process import cli_env
from tests.inprocess import serve_in_process

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "operations.md"
_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)


@dataclass(frozen=True)
class Block:
    line: int
    command: str


def blocks(text: str) -> list[Block]:
    found = []
    for match in _BLOCK.finditer(text):
        command = match.group(1)
        if command.lstrip().startswith("# not run"):
            continue
        found.append(Block(text.count("\n", 0, match.start()) + 1, command))
    return found


BLOCKS = blocks(DOC.read_text())


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """The environment the blocks run in: HOME, a data directory with memories, ``kumiho-ce`` on the PATH."""
    home = tmp_path_factory.mktemp("operations")
    data = home / "data"
    with serve_in_process(data, None) as app:
        for n, text in enumerate(("The boiler is serviced every October", "Alice prefers tea")):
            answer = app.services.perform("kumiho_memory_store", {"project": "demo", "space_path": "notes",
                                                                  "title": f"note {n}", "user_text": text})
            assert answer.get("stored"), answer
    bin_dir = home / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "kumiho-ce"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{sys.executable}" -m appliance "$@"\n')
    wrapper.chmod(0o755)
    env = cli_env(data)
    env.update({"HOME": str(home), "PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    yield env


def test_the_page_has_commands() -> None:
    assert len(BLOCKS) >= 5, "docs/operations.md lost its shell examples"


@pytest.mark.parametrize("block", BLOCKS, ids=[f"line{b.line}" for b in BLOCKS])
def test_the_command_runs(block: Block, scratch: dict[str, str]) -> None:
    done = subprocess.run(["bash", "-e", "-c", block.command], env=scratch, cwd=scratch["HOME"],
                          capture_output=True, text=True, timeout=240)
    where = f"docs/operations.md line {block.line}:\n{block.command}\nstdout: {done.stdout[-2000:]}\n" \
            f"stderr: {done.stderr[-2000:]}"
    assert done.returncode == 0, where
    assert done.stdout.strip(), where
