"""The public Kumiho SDK (``kumiho`` 0.14.3, ``kumiho-memory`` 1.6.4, the stock ``kumiho-mcp`` sidecar) in its own
virtual environment, ``.venv-kumiho`` (``make kumiho-sdk``), and how tests run it against a real appliance.

The SDK never runs in our own venv: it pins its own grpcio/protobuf/mcp, and a test of "the unmodified SDK" means
its code in its process. So tests start that venv's python as a subprocess with a script; the script prints one
JSON line (its observations) and the test asserts on them.

The environment is the one a fresh machine gives the SDK: no token (a token sends the SDK to cloud discovery and
the control plane), an empty HOME (nothing cached in ``~/.kumiho`` is read or written outside the test), and the
appliance's port named the way Kumiho's local-CE probe reads it (``KUMIHO_LOCAL_SERVER_PORT``: it probes
``GET http://127.0.0.1:<port>/api/_live`` for ``deployment_mode: self_hosted_ce`` and then speaks plaintext gRPC
there). Tokenless, the SDK never calls the control plane, so ``KUMIHO_DISABLE_AUTO_DISCOVERY`` is not needed.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.appliance_process import ROOT

SDK_VENV = ROOT / ".venv-kumiho"
SCRIPTS = Path(__file__).resolve().parent / "kumiho_sdk"

# what a test may pass through from the caller's environment; every KUMIHO_* variable is left out on purpose
_PASS_THROUGH = ("PATH", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")


def sdk_python() -> Path:
    """The python of ``.venv-kumiho`` (``KUMIHO_SDK_PYTHON`` overrides). A missing one fails the test: the SDK
    suite is part of ``make test``, and a skipped one would pass without having run."""
    override = os.environ.get("KUMIHO_SDK_PYTHON", "").strip()
    python = Path(override) if override else SDK_VENV / "bin" / "python"
    if not python.is_file():
        pytest.fail(f"the Kumiho SDK environment is missing ({python}): run `make kumiho-sdk`", pytrace=False)
    return python


def sdk_env(home: Path, port: int | None = None, *, endpoint: bool = False, **extra: str) -> dict[str, str]:
    """The SDK's environment: no token, HOME in ``home``, the appliance's ``port`` for the local-CE probe
    (``endpoint=True`` names it as ``KUMIHO_LOCAL_SERVER_ENDPOINT=127.0.0.1:<port>`` instead), plus ``extra``."""
    home.mkdir(parents=True, exist_ok=True)
    env = {key: os.environ[key] for key in _PASS_THROUGH if key in os.environ}
    env.update({"HOME": str(home), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"})
    if port is not None:
        if endpoint:
            env["KUMIHO_LOCAL_SERVER_ENDPOINT"] = f"127.0.0.1:{port}"
        else:
            env["KUMIHO_LOCAL_SERVER_PORT"] = str(port)
    env.update(extra)
    return env


def run_sdk(script: str | Path, *args: str, env: dict[str, str], timeout: float = 240) -> Any:
    """Run ``script`` (a file under tests/kumiho_sdk, or a path) with the SDK's python and ``args``; return the
    JSON of the last line it printed. A non-zero exit fails with what the script wrote to stderr."""
    path = Path(script) if Path(script).is_absolute() else SCRIPTS / script
    done = subprocess.run([str(sdk_python()), str(path), *args], env=env, cwd=env["HOME"], text=True,
                          capture_output=True, timeout=timeout)
    if done.returncode != 0:
        raise AssertionError(f"{path.name} {' '.join(args)} exited with {done.returncode}:\n"
                             f"{done.stderr[-6000:]}\n{done.stdout[-2000:]}")
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if not lines:
        raise AssertionError(f"{path.name} printed nothing; stderr:\n{done.stderr[-6000:]}")
    return json.loads(lines[-1])


def run_snippet(code: str, *, env: dict[str, str], timeout: float = 120) -> Any:
    """Run a Python snippet with the SDK's python (``python -c``); return the JSON of the last line it printed."""
    done = subprocess.run([str(sdk_python()), "-c", code], env=env, cwd=env["HOME"], text=True,
                          capture_output=True, timeout=timeout)
    if done.returncode != 0:
        raise AssertionError(f"the snippet exited with {done.returncode}:\n{done.stderr[-6000:]}")
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    if not lines:
        raise AssertionError(f"the snippet printed nothing; stderr:\n{done.stderr[-6000:]}")
    return json.loads(lines[-1])
