"""The real air-gapped bundle (``make test-bundle`` builds it and names it in ``KUMIHO_CE_BUNDLE``): extracted and
installed with its install.sh into a fresh virtual environment inside a network namespace that holds only
loopback, then the installed appliance is started there, stores and engages through the official MCP client,
and stops. Prints its figures as JSON (archive size, install and start times)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession

from tests.appliance_process import free_port, wait_until_live
from tests.bundle.toy import install_env
from tests.mcp_api.clients import call, in_http_session
from tests.netns import run_in_private_network

# installing ~100 wheels and joining a 491 MB model takes minutes on a busy machine: past the suite's 300 s
pytestmark = [pytest.mark.long, pytest.mark.timeout(1800)]
DEFAULT_MODEL = "qwen2.5-coder-0.5b-instruct-q4_k_m"


def _target_python() -> str:
    """The machine's own Python when it has the bundle's version (Debian's, without ensurepip: as on a fresh
    server), else the interpreter running the tests."""
    debian = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    return str(debian) if debian.exists() else sys.executable


def _network_interfaces() -> list[str]:
    """This process's network namespace's interfaces (/sys/class/net would show the namespace sysfs was
    mounted in)."""
    return sorted(name for _, name in socket.if_nameindex())


def test_the_bundle_installs_and_serves_with_no_network(tmp_path: Path) -> None:
    archive = os.environ.get("KUMIHO_CE_BUNDLE")
    if not archive:
        pytest.fail("no bundle to test: `make test-bundle` builds one and runs this test with KUMIHO_CE_BUNDLE set")
    figures: dict[str, object] = {"archive": Path(archive).name, "archive_bytes": Path(archive).stat().st_size}

    def body() -> None:
        assert _network_interfaces() == ["lo"], "not in a namespace with only loopback"
        tar = Path(archive).resolve()  # the test runs elsewhere
        # the commands of docs/install.md, "On a machine without internet"
        checked = subprocess.run(["sha256sum", "-c", f"{tar.name}.sha256"], cwd=tar.parent, capture_output=True,
                                 text=True, check=False)
        assert checked.returncode == 0 and checked.stdout.strip() == f"{tar.name}: OK", checked
        carried = tmp_path / "carried"
        carried.mkdir()
        started = time.monotonic()
        subprocess.run(["tar", "-xf", tar], cwd=carried, check=True)
        figures["extract_seconds"] = round(time.monotonic() - started, 1)
        bundle = carried / tar.name.removesuffix(".tar")
        prefix, python = tmp_path / "opt" / "kumiho-ce", _target_python()
        started = time.monotonic()
        done = subprocess.run([bundle / "install.sh", "--prefix", prefix, "--python", python],
                              cwd=carried, env=install_env(), capture_output=True, text=True, timeout=1200,
                              check=False)
        figures["install_seconds"] = round(time.monotonic() - started, 1)
        figures["python"] = python
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
        command = prefix / ".venv" / "bin" / "kumiho-ce"
        assert f"{command} serve" in done.stdout

        data_dir, workdir = tmp_path / "data", tmp_path / "work"
        workdir.mkdir()
        env = install_env(KUMIHO_CE_DATA_DIR=str(data_dir), XDG_CONFIG_HOME=str(tmp_path / "no-config"),
                          KUMIHO_CE_KUMIHO__REDIS_PORT="0")  # not the shared default 6379
        plain = subprocess.run([command, "models", "list"], cwd=workdir, env=env, capture_output=True, text=True,
                               timeout=120, check=False)
        assert plain.returncode == 0 and DEFAULT_MODEL in plain.stdout, plain.stderr
        listed = subprocess.run([command, "models", "list", "--json"], cwd=workdir, env=env, capture_output=True,
                                text=True, timeout=120, check=False)
        assert listed.returncode == 0, listed.stderr
        (model,) = [row for row in json.loads(listed.stdout)["models"] if row["name"] == DEFAULT_MODEL]
        assert model["found_in"] == "installation", model
        assert Path(model["path"]).is_relative_to(prefix / ".venv" / "share" / "kumiho-ce" / "models"), model
        # sha256 checked, and the portable llama.cpp build loads it
        verified = subprocess.run([command, "models", "verify", DEFAULT_MODEL, "--json"], cwd=workdir, env=env,
                                  capture_output=True, text=True, timeout=600, check=False)
        assert verified.returncode == 0, verified.stdout + verified.stderr
        (verdict,) = json.loads(verified.stdout)["models"]
        assert verdict["sha256_ok"] and verdict["loads"], verdict

        port = free_port()
        log = tmp_path / "serve.log"
        started = time.monotonic()
        with open(log, "w") as output:
            server = subprocess.Popen([command, "serve", "--port", str(port)], cwd=workdir, env=env,
                                      stdout=output, stderr=output, text=True)
        try:
            base_url = f"http://127.0.0.1:{port}"
            wait_until_live(base_url, server, timeout=240, log=log)
            figures["live_seconds"] = round(time.monotonic() - started, 1)

            async def store_then_engage(session: ClientSession) -> tuple[dict[str, Any], dict[str, Any]]:
                stored = await call(session, "kumiho_memory_store", title="Bundle check",
                                    user_text="The air-gapped install answers from its own wheels.")
                engaged = await call(session, "kumiho_memory_engage", query="air-gapped install wheels")
                return stored, engaged

            stored, engaged = in_http_session(base_url, store_then_engage)
            found = {r.get("item_kref") or r.get("kref", "").split("?")[0] for r in engaged["results"]}
            assert stored["item_kref"] in found, engaged
        finally:
            server.send_signal(signal.SIGTERM)
            figures["stop_exit_code"] = server.wait(timeout=60)
        assert figures["stop_exit_code"] == 0, log.read_text()[-3000:]
        (tmp_path / "figures.json").write_text(json.dumps(figures))

    try:
        run_in_private_network(body)
    finally:
        for big in ("carried", "opt"):  # a gigabyte each: not kept in pytest's tmp
            shutil.rmtree(tmp_path / big, ignore_errors=True)
    figures = json.loads((tmp_path / "figures.json").read_text())
    print(json.dumps({"bundle_offline_install": figures}, indent=2))
