"""``kumiho-ce revka-launcher [--output PATH] [--force]``: write the file Revka's ``[kumiho] mcp_path`` names.

Revka starts that path as ``python3 <mcp_path>`` (its own launcher there is a Python file), so a shell script
fails: the launcher has to be Python. The one written here replaces itself with this installation's
``kumiho-ce mcp`` (absolute path, plus the ``--config`` / ``--data-dir`` given to this command), so it works
whatever ``PATH`` Revka runs with. The environment Revka gives it (``KUMIHO_MEMORY_PROJECT`` …) passes through
unchanged: ``exec`` keeps it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Literal

from appliance.errors import InvalidArgument, KumihoError
from appliance.fsutil import write_durably

DEFAULT_OUTPUT = "~/.revka/kumiho_ce_mcp.py"
MAX_PATH_CHARS = 4096  # PATH_MAX on Linux: longer cannot be opened anyway
MODE = 0o755

Outcome = Literal["written", "replaced", "unchanged"]


def add_parser(commands: Any) -> None:
    launcher = commands.add_parser(
        "revka-launcher", help="write the Python launcher for Revka's [kumiho] mcp_path (Revka runs it with python3)")
    launcher.add_argument("--output", default=DEFAULT_OUTPUT, metavar="PATH",
                          help=f"where to write it (default {DEFAULT_OUTPUT}; at most {MAX_PATH_CHARS} characters)")
    launcher.add_argument("--force", action="store_true", help="replace a different file already at PATH")


def this_installation() -> list[str]:
    """The command that runs *this* kumiho-ce: the console script next to the interpreter (a venv's
    ``bin/kumiho-ce``), else the interpreter with ``-m appliance`` (``-P``: not from whatever directory Revka
    starts it in). Absolute, so Revka's ``PATH`` is irrelevant."""
    interpreter = Path(sys.executable)
    script = interpreter.with_name("kumiho-ce")
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [str(interpreter), "-P", "-m", "appliance"]


def mcp_command(config: str | None, data_dir: str | None) -> list[str]:
    """``kumiho-ce [--config …] [--data-dir …] mcp`` with absolute paths (Revka starts it from any directory)."""
    command = this_installation()
    if config:
        path = Path(_bounded(config, "--config")).expanduser()
        if not path.is_file():
            raise InvalidArgument(f"--config: {path} is not a file; give the configuration file the appliance "
                                  "uses, or leave --config out", field="--config")
        command += ["--config", os.path.abspath(path)]
    if data_dir:
        command += ["--data-dir", os.path.abspath(Path(_bounded(data_dir, "--data-dir")).expanduser())]
    return [*command, "mcp"]


def launcher_text(command: list[str]) -> str:
    # repr() writes each argument as a Python string literal, whatever characters a path holds
    listed = ", ".join(repr(part) for part in command)
    return f'''#!/usr/bin/env python3
"""kumiho-ce's stdio MCP server for Revka's [kumiho] mcp_path, written by `kumiho-ce revka-launcher`.

Revka runs this file as `python3 <this file>`. It becomes `kumiho-ce mcp` of the installation that wrote it;
Revka's environment (KUMIHO_MEMORY_PROJECT, KUMIHO_MEMORY_RETRIEVAL_LIMIT, ...) passes through unchanged.
After moving or reinstalling kumiho-ce, write it again: `kumiho-ce revka-launcher --force`.
"""
import os
import sys

COMMAND = [{listed}]

try:
    os.execv(COMMAND[0], COMMAND)
except OSError as exc:
    sys.stderr.write("kumiho-ce launcher: cannot start %s (%s); run `kumiho-ce revka-launcher --force` "
                     "with the kumiho-ce you use now\\n" % (COMMAND[0], exc.strerror))
    sys.exit(127)
'''


def write_launcher(path: Path, text: str, *, force: bool) -> Outcome:
    """Write ``text`` to ``path`` whole (a temporary file renamed into place), mode 0755. The same file again
    changes nothing; a different file there is replaced only with ``force``."""
    if path.is_dir():
        raise InvalidArgument(f"--output: {path} is a directory; name the launcher file itself, e.g. "
                              f"{path / 'kumiho_ce_mcp.py'}", field="--output")
    try:
        existing = path.read_bytes() if path.exists() else None
    except OSError as exc:
        raise KumihoError(f"--output: cannot read {path} ({exc.strerror}); choose another path") from None
    payload = text.encode("utf-8")
    if existing == payload:
        path.chmod(MODE)
        return "unchanged"
    if existing is not None and not force:
        raise InvalidArgument(f"--output: {path} already exists and is not this launcher; pass --force to replace "
                              "it, or --output another path", field="--output")
    try:
        write_durably(path, payload, mode=MODE)  # MODE exactly, not left to the umask: Revka must run it
    except OSError as exc:
        raise KumihoError(f"--output: cannot write {path} ({exc.strerror}); choose a folder you can write to") \
            from None
    return "written" if existing is None else "replaced"


def run(args: argparse.Namespace, show: Any = print) -> int:
    path = Path(os.path.abspath(Path(_bounded(args.output, "--output")).expanduser()))
    command = mcp_command(args.config, args.data_dir)
    outcome = write_launcher(path, launcher_text(command), force=args.force)
    show(f"{outcome} {path}: runs {' '.join(command)}")
    show("In Revka's config.toml:\n\n[kumiho]\nmcp_path = " + json.dumps(str(path)))
    return 0


def _bounded(value: str, option: str) -> str:
    if not value or len(value) > MAX_PATH_CHARS or "\x00" in value:
        raise InvalidArgument(f"{option}: give a path of 1 to {MAX_PATH_CHARS} characters", field=option)
    return value
