"""Run ``kumiho-ce`` as a real process for the CLI and HTTP tests (bounded waits, no fixed sleeps)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests import appliance_fork

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cli_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUMIHO_CE_")}
    env.update({"KUMIHO_CE_DATA_DIR": str(data_dir), "XDG_CONFIG_HOME": str(data_dir.parent / "no-config"),
                # the tiny deterministic embedder keeps process start fast; tests/search covers the real model
                "KUMIHO_CE_SEARCH__EMBEDDER": "hashing",
                # no chat model unless a test asks for one (tests/memory/test_model_tools.py does)
                "KUMIHO_CE_INFERENCE__CHAT_MODEL": "none",
                # no working-memory Redis listener on the shared default 6379 unless a test asks (tests/workmem)
                "KUMIHO_CE_KUMIHO__REDIS_PORT": "0"})
    env.update(extra)
    return env


def kumiho_ce(*args: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """One ``kumiho-ce`` command, its output captured (forked from a process that has imported the appliance
    when only its settings differ from this process's environment: tests/appliance_fork.py)."""
    if appliance_fork.can_fork(env):
        return appliance_fork.run(list(args), env, timeout)
    return subprocess.run([sys.executable, "-m", "appliance", *args], cwd=ROOT, env=env, text=True,
                          capture_output=True, timeout=timeout)


@dataclass
class Running:
    process: subprocess.Popen[str] | appliance_fork.Forked
    base_url: str
    data_dir: Path

    def stop(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=30)


def wait_until_live(url: str, process: subprocess.Popen[str] | appliance_fork.Forked, timeout: float = 90,
                    log: Path | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = log.read_text() if log else process.stderr.read()  # type: ignore[union-attr]
            raise AssertionError(f"kumiho-ce serve exited with {process.returncode}: {output}")
        try:
            if httpx.get(url + "/api/_live", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.05)
    raise AssertionError(f"{url} did not come up within {timeout}s")


def url_host(host: str) -> str:
    """How a client on this machine names an appliance bound to ``host``."""
    if host in ("0.0.0.0", "::", ""):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


@contextmanager
def serve(data_dir: Path, host: str = "127.0.0.1", port: int | None = None, **env: str) -> Iterator[Running]:
    """The appliance as a real process; its output goes to ``<data_dir>.log`` (a pipe nobody reads
    would block a chatty server). It is forked from a process that has imported the appliance already
    (tests/appliance_fork.py) when nothing but its settings differ from this process's environment."""
    port = port or free_port()
    log = data_dir.parent / f"{data_dir.name}.log"
    args = ["serve", "--host", host, "--port", str(port)]
    environment = cli_env(data_dir, **env)
    process: subprocess.Popen[str] | appliance_fork.Forked
    if appliance_fork.can_fork(environment):
        process = appliance_fork.start(args, environment, log)
    else:
        with open(log, "a") as output:
            process = subprocess.Popen([sys.executable, "-m", "appliance", *args], cwd=ROOT, env=environment,
                                       text=True, stdout=output, stderr=output)
    with process:
        running = Running(process, f"http://{url_host(host)}:{port}", data_dir)
        try:
            wait_until_live(running.base_url, process, log=log)
            yield running
        finally:
            if process.poll() is None:
                process.kill()
