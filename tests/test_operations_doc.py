"""docs/operations.md, run: every ```sh block is executed, in the order of the page, with ``bash -e`` against a
scratch data directory holding a few memories, with ``kumiho-ce`` (this checkout) on the PATH. A block passes when
it exits 0 and prints something. Blocks in other languages (```toml, ```text) are shown, not run. A block whose
first line is ``# not run`` is skipped (for commands that need a service manager or another machine).

The page runs twice, each time on its own scratch data directory: with no appliance running (the commands open
the data directory themselves), and with a real ``kumiho-ce serve`` running on it (the commands go through it).
A block whose first line is ``# with the appliance stopped`` runs only in the first (restore, which refuses to
replace what a running appliance serves); one whose first line is ``# with the appliance running`` only in the
second (curl); there ``127.0.0.1:9190`` means the running appliance's address."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.appliance_process import cli_env, serve
from tests.inprocess import serve_in_process

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "operations.md"
_BLOCK = re.compile(r"^```sh\n(.*?)^```", re.S | re.M)


STOPPED, RUNNING = "# with the appliance stopped", "# with the appliance running"
DOCUMENTED_ADDRESS = "127.0.0.1:9190"


@dataclass(frozen=True)
class Block:
    line: int
    command: str

    def runs_when(self, mode: str) -> bool:
        first = self.command.lstrip().splitlines()[0].strip()
        only = {STOPPED: "stopped", RUNNING: "running"}.get(first)
        return only in (None, mode)


def blocks(text: str) -> list[Block]:
    found = []
    for match in _BLOCK.finditer(text):
        command = match.group(1)
        if command.lstrip().startswith("# not run"):
            continue
        found.append(Block(text.count("\n", 0, match.start()) + 1, command))
    return found


BLOCKS = blocks(DOC.read_text())
CASES = [pytest.param(mode, block, id=f"{mode}-line{block.line}")
         for mode in ("stopped", "running") for block in BLOCKS if block.runs_when(mode)]


def _scratch(home: Path) -> dict[str, str]:
    """The environment the blocks run in: HOME, a data directory with memories, ``kumiho-ce`` on the PATH."""
    data = home / "data"
    with serve_in_process(data, None) as app:
        for n, text in enumerate(("The boiler is serviced every October", "Alice prefers tea")):
            answer = app.services.perform("kumiho_memory_store", {"project": "Home", "space_path": "notes",
                                                                  "title": f"note {n}", "user_text": text})
            assert answer.get("stored"), answer
    bin_dir = home / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "kumiho-ce"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}" exec "{sys.executable}" -m appliance "$@"\n')
    wrapper.chmod(0o755)
    env = cli_env(data)
    env.update({"HOME": str(home), "PATH": f"{bin_dir}{os.pathsep}/usr/bin:/bin", "PYTHONPATH": str(ROOT)})
    return env


@pytest.fixture(scope="module")
def stopped(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _scratch(tmp_path_factory.mktemp("operations-stopped"))


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], str]]:
    """A scratch environment whose data directory a real ``kumiho-ce serve`` owns, and its address."""
    env = _scratch(tmp_path_factory.mktemp("operations-running"))
    with serve(Path(env["KUMIHO_CE_DATA_DIR"])) as app:
        yield env, app.base_url.removeprefix("http://")
        assert app.stop() == 0


def test_the_page_has_commands() -> None:
    assert len(BLOCKS) >= 5, "docs/operations.md lost its shell examples"
    assert {b.command.lstrip().splitlines()[0].strip() for b in BLOCKS} & {STOPPED, RUNNING}


@pytest.mark.parametrize(("mode", "block"), CASES)
def test_the_command_runs(mode: str, block: Block, request: pytest.FixtureRequest) -> None:
    if mode == "stopped":
        env, command = request.getfixturevalue("stopped"), block.command
    else:
        env, address = request.getfixturevalue("running")
        command = block.command.replace(DOCUMENTED_ADDRESS, address)
    done = subprocess.run(["bash", "-e", "-c", command], env=env, cwd=env["HOME"],
                          capture_output=True, text=True, timeout=240)
    where = f"docs/operations.md line {block.line} ({mode} appliance):\n{command}\n" \
            f"stdout: {done.stdout[-2000:]}\nstderr: {done.stderr[-2000:]}"
    assert done.returncode == 0, where
    assert done.stdout.strip(), where
