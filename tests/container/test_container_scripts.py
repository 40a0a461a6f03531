"""The image's two helper scripts, run here without the image: the HEALTHCHECK (container/healthcheck.py) against a
real appliance, and supervisord's FATAL listener (container/exit_on_fatal.py) spoken to as supervisord speaks to
it. make test-container runs both inside the built image."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.appliance_process import cli_env, serve
from tests.container.containerfile import ROOT

HEALTHCHECK = ROOT / "container" / "healthcheck.py"
LISTENER = ROOT / "container" / "exit_on_fatal.py"


def healthcheck(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(HEALTHCHECK)], env={**env, "PYTHONPATH": str(ROOT)}, cwd=ROOT,
                          capture_output=True, text=True, timeout=60, check=False)


def test_the_healthcheck_passes_while_the_appliance_is_live_and_fails_once_it_stops(tmp_path: Path) -> None:
    with serve(tmp_path / "data") as app:
        env = cli_env(app.data_dir, KUMIHO_CE_PORT=app.base_url.rsplit(":", 1)[1])
        live = healthcheck(env)
        assert live.returncode == 0, live.stderr
        assert app.stop() == 0
    stopped = healthcheck(env)
    assert stopped.returncode == 1
    assert "/api/_live" in stopped.stderr and "Traceback" not in stopped.stderr


def test_the_healthcheck_fails_with_the_reason_on_a_broken_configuration(tmp_path: Path) -> None:
    broken = healthcheck(cli_env(tmp_path / "data", KUMIHO_CE_PORT="0"))
    assert broken.returncode == 1
    assert "KUMIHO_CE_PORT" in broken.stderr and "Traceback" not in broken.stderr


def _healthcheck_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("container_healthcheck", HEALTHCHECK)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize(("host", "url"), [("0.0.0.0", "http://127.0.0.1:9191/api/_live"),
                                           ("::", "http://127.0.0.1:9191/api/_live"),
                                           ("::1", "http://[::1]:9191/api/_live"),
                                           ("127.0.0.2", "http://127.0.0.2:9191/api/_live")])
def test_the_healthcheck_asks_where_the_appliance_listens(host: str, url: str, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in cli_env(tmp_path / "data", KUMIHO_CE_HOST=host, KUMIHO_CE_PORT="9191").items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("KUMIHO_CE_CONFIG", raising=False)
    assert _healthcheck_module().live_url() == url


# Stands in for supervisord: starts the listener as its child, sends it one PROCESS_STATE_FATAL event as
# supervisord's event-listener protocol does, and reports what came back and whether it was sent SIGTERM.
SUPERVISORD = r"""
import json, signal, subprocess, sys
signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
listener = subprocess.Popen([sys.executable, sys.argv[1]], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
ready = listener.stdout.readline()
payload = "processname:kumiho-ce groupname:kumiho-ce from_state:BACKOFF"
listener.stdin.write("ver:3.0 server:supervisor serial:7 pool:exit-on-fatal poolserial:1 "
                     f"eventname:PROCESS_STATE_FATAL len:{len(payload)}\n{payload}")
listener.stdin.flush()
result = listener.stdout.read(len("RESULT 2\nOK"))
terminated = signal.sigtimedwait({signal.SIGTERM}, 30) is not None
listener.kill()
print(json.dumps({"ready": ready, "result": result, "terminated": terminated, "stderr": listener.stderr.read()}))
"""


def test_the_fatal_listener_answers_supervisord_and_stops_it() -> None:
    done = subprocess.run([sys.executable, "-c", SUPERVISORD, str(LISTENER)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["ready"] == "READY\n" and seen["result"] == "RESULT 2\nOK"
    assert seen["terminated"] is True
    assert "kumiho-ce could not be started" in seen["stderr"]
