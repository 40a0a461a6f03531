"""Revka's two ways of starting a Kumiho MCP server, each run the way Revka runs it.

* ``[kumiho] mcp_path``: Revka starts that file as ``python3 <mcp_path>``. ``kumiho-ce revka-launcher`` writes a
  Python launcher there; started with ``python3`` it becomes this installation's ``kumiho-ce mcp``.
* The Operator's sub-agents ignore ``mcp_path``: they start the stock Kumiho sidecar from
  ``~/.revka/kumiho/run_kumiho_mcp.py``, which execs ``~/.revka/kumiho/venv``'s python with ``-m
  kumiho.mcp_server``. With a temporary HOME holding such a launcher (our own, minimal) and a venv with the public
  Kumiho SDK next to it, the stock sidecar answers against the appliance over gRPC.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from tests.appliance_process import cli_env, free_port, kumiho_ce, serve
from tests.mcp_api.clients import call, stop_background_appliance

PYTHON3 = shutil.which("python3") or "python3"  # what Revka starts mcp_path and the sidecar launcher with

# Our own stand-in for the launcher Revka installs at ~/.revka/kumiho/run_kumiho_mcp.py, doing what it does:
# find the venv's interpreter next to it, keep endpoint discovery out of the start, exec the stock sidecar.
RUN_KUMIHO_MCP = '''\
import os
import sys
from pathlib import Path

venv = Path.home() / ".revka" / "kumiho" / "venv"
found = [p for p in (venv / "bin" / "python3", venv / "bin" / "python") if p.exists()]
if not found:
    sys.exit("no python in %s" % venv)
os.environ.pop("KUMIHO_AUTO_CONFIGURE", None)
os.execv(str(found[0]), [str(found[0]), "-m", "kumiho.mcp_server"])
'''


def sdk_python() -> Path:
    try:
        from tests.kumiho_sdk_env import sdk_python as located  # the public SDK's own venv (make kumiho-sdk)
    except ImportError:
        override = os.environ.get("KUMIHO_SDK_PYTHON", "")
        if not override:
            pytest.fail("the Kumiho SDK environment is missing: run `make kumiho-sdk`", pytrace=False)
        return Path(override)
    return located()


@asynccontextmanager
async def revka_session(script: Path, env: dict[str, str], errlog: Path) -> AsyncIterator[ClientSession]:
    """An MCP session with ``python3 <script>``, as Revka starts a stdio Kumiho server."""
    params = StdioServerParameters(command=PYTHON3, args=[str(script)], env=env, cwd=str(script.parent))
    with open(errlog, "a") as log:
        async with stdio_client(params, errlog=log) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


def launcher(tmp_path: Path, output: Path, *options: str) -> Any:
    return kumiho_ce(*options, "revka-launcher", "--output", str(output), env=cli_env(tmp_path / "unused"))


def test_revka_starts_the_written_launcher_with_python3_and_gets_kumiho_ce(tmp_path: Path) -> None:
    data, port = tmp_path / "data", free_port()
    script = tmp_path / "revka" / "kumiho_ce_mcp.py"
    written = launcher(tmp_path, script, "--data-dir", str(data))
    assert written.returncode == 0, written.stderr
    assert f'mcp_path = "{script}"' in written.stdout
    assert stat.S_IMODE(script.stat().st_mode) == 0o755
    assert script.read_text().startswith("#!/usr/bin/env python3\n")

    # Revka's environment in local_ce mode: cloud credentials shadowed empty, its project and limit
    env = cli_env(tmp_path / "elsewhere", KUMIHO_CE_PORT=str(port), KUMIHO_MEMORY_PROJECT="RevkaLauncher",
                  KUMIHO_MEMORY_RETRIEVAL_LIMIT="3", KUMIHO_AUTH_TOKEN="", KUMIHO_SERVICE_TOKEN="")

    async def steps() -> dict[str, Any]:
        async with revka_session(script, env, tmp_path / "launcher.log") as session:
            tools = {tool.name for tool in (await session.list_tools()).tools}
            stored = await call(session, "kumiho_memory_store", title="Launcher note",
                                user_text="Revka reached kumiho-ce through the Python launcher.")
            projects = await call(session, "kumiho_list_projects")
            return {"tools": tools, "stored": stored, "projects": projects}

    try:
        seen = anyio.run(steps)
    finally:
        if (data / "server.json").exists():
            stop_background_appliance(data)
    assert {"kumiho_memory_store", "kumiho_memory_engage", "kumiho_list_projects"} <= seen["tools"]
    assert seen["stored"]["revision_kref"].startswith("kref://RevkaLauncher/")  # Revka's env passed through
    assert "RevkaLauncher" in {p["name"] for p in seen["projects"]["projects"]}
    assert (data / "graph").is_dir() and not (tmp_path / "elsewhere").exists()  # the recorded --data-dir won


def test_the_launcher_is_written_whole_once_and_never_over_another_file(tmp_path: Path) -> None:
    script = tmp_path / "kumiho_ce_mcp.py"
    assert launcher(tmp_path, script).returncode == 0
    first = script.read_text()
    again = launcher(tmp_path, script)
    assert again.returncode == 0 and again.stdout.startswith("unchanged ")

    other = launcher(tmp_path, script, "--data-dir", str(tmp_path / "data"))  # a different launcher
    assert other.returncode == 2 and "already exists and is not this launcher; pass --force" in other.stderr
    assert script.read_text() == first
    forced = kumiho_ce("--data-dir", str(tmp_path / "data"), "revka-launcher", "--output", str(script), "--force",
                       env=cli_env(tmp_path / "unused"))
    assert forced.returncode == 0 and forced.stdout.startswith("replaced ")
    assert str(tmp_path / "data") in script.read_text()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []

    for options, message in [
        ((), "is a directory; name the launcher file itself"),
        (("--config", str(tmp_path / "missing.toml")), "--config: "),
    ]:
        target = tmp_path if not options else tmp_path / "new.py"
        refused = launcher(tmp_path, target, *options)
        assert refused.returncode == 2 and message in refused.stderr, refused.stderr
        assert "Traceback" not in refused.stderr
    too_long = launcher(tmp_path, tmp_path / ("x" * 5000))
    assert too_long.returncode == 2 and "--output: give a path of 1 to 4096 characters" in too_long.stderr
    assert not (tmp_path / "new.py").exists()


def test_the_operators_stock_sidecar_from_the_hard_coded_path_works_against_kumiho_ce(tmp_path: Path) -> None:
    """~/.revka/kumiho/run_kumiho_mcp.py with the venv next to it, started as the Operator starts it for a
    sub-agent (``python3 <script>``, Revka's local_ce environment): its tools answer from the appliance."""
    home = tmp_path / "home"
    sidecar = home / ".revka" / "kumiho"
    sidecar.mkdir(parents=True)
    (sidecar / "venv").symlink_to(sdk_python().parent.parent, target_is_directory=True)
    script = sidecar / "run_kumiho_mcp.py"
    script.write_text(RUN_KUMIHO_MCP)
    redis_port = free_port()

    with serve(tmp_path / "data", KUMIHO_CE_KUMIHO__REDIS_PORT=str(redis_port)) as app:
        created = httpx.post(app.base_url + "/api/v1/projects", json={"name": "RevkaStock"})
        assert created.status_code == 201, created.text
        port = app.base_url.rsplit(":", 1)[1]
        env = {"HOME": str(home), "PATH": os.environ["PATH"], "KUMIHO_LOCAL_SERVER_ENDPOINT": f"127.0.0.1:{port}",
               "KUMIHO_AUTH_TOKEN": "", "KUMIHO_SERVICE_TOKEN": "", "KUMIHO_CONTROL_PLANE_URL": "",
               "KUMIHO_UPSTASH_REDIS_URL": f"redis://127.0.0.1:{redis_port}",
               "KUMIHO_MEMORY_PROJECT": "CognitiveMemory", "KUMIHO_HARNESS_PROJECT": "Revka"}

        async def steps() -> dict[str, Any]:
            async with revka_session(script, env, tmp_path / "sidecar.log") as session:
                tools = {tool.name for tool in (await session.list_tools()).tools}
                listed = await session.call_tool("kumiho_list_projects", {})
                return {"tools": tools, "listed": listed}

        seen = anyio.run(steps)
    assert {"kumiho_list_projects", "kumiho_memory_engage", "kumiho_memory_reflect"} <= seen["tools"]
    listed = seen["listed"]
    assert not listed.is_error, listed.content
    projects = json.loads(listed.content[0].text)["projects"]  # type: ignore[union-attr]
    assert "RevkaStock" in {p["name"] for p in projects}


def test_the_launcher_names_this_installation_by_absolute_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from appliance import cli_revka

    bin_dir = tmp_path / "venv" / "bin"
    bin_dir.mkdir(parents=True)
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    assert cli_revka.this_installation() == [str(bin_dir / "python"), "-P", "-m", "appliance"]  # no console script
    (bin_dir / "kumiho-ce").write_text("#!/bin/sh\n")
    (bin_dir / "kumiho-ce").chmod(0o755)
    assert cli_revka.this_installation() == [str(bin_dir / "kumiho-ce")]
    command = cli_revka.mcp_command(None, "relative/data")
    assert command == [str(bin_dir / "kumiho-ce"), "--data-dir", str(Path.cwd() / "relative" / "data"), "mcp"]
    compile(cli_revka.launcher_text([*command[:-1], "it's \"quoted\"\n", "mcp"]), "launcher", "exec")


def test_a_launcher_whose_kumiho_ce_is_gone_says_how_to_write_it_again(tmp_path: Path) -> None:
    from appliance import cli_revka

    script = tmp_path / "kumiho_ce_mcp.py"
    script.write_text(cli_revka.launcher_text([str(tmp_path / "moved" / "kumiho-ce"), "mcp"]))
    result = subprocess.run([PYTHON3, str(script)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 127 and result.stdout == ""  # stdout belongs to the MCP protocol
    assert "cannot start" in result.stderr and "kumiho-ce revka-launcher --force" in result.stderr
