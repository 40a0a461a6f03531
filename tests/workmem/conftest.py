"""Working memory for Kumiho's stock sidecar: a real ``kumiho-ce serve`` with its Redis-protocol listener on a free
port, and the sidecar's own ``RedisMemoryBuffer`` run by the Kumiho SDK's Python (a separate virtual
environment) against either door."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.appliance_process import Running, free_port, serve

HERE = Path(__file__).resolve().parent
PROJECT = "CognitiveMemory"  # the sidecar's default KUMIHO_MEMORY_PROJECT and the appliance's default project
TOKEN = "workmem-test-token-0123456789abcdefghijklmnop"

try:
    from tests.kumiho_sdk_env import sdk_python
except ImportError:  # until the SDK environment's module lands: the same rule, inline
    def sdk_python() -> str:
        path = os.environ.get("KUMIHO_SDK_PYTHON") or "/work/kvenv/bin/python"
        if not Path(path).exists():
            pytest.fail("the Kumiho SDK environment is missing: run `make kumiho-sdk`")
        return path


@dataclass
class Appliance:
    running: Running
    redis_port: int

    @property
    def base_url(self) -> str:
        return self.running.base_url

    @property
    def redis_url(self) -> str:
        return f"redis://127.0.0.1:{self.redis_port}"

    @property
    def proxy_url(self) -> str:
        return self.base_url + "/api/memory/redis"

    @property
    def log(self) -> str:
        return (self.running.data_dir.parent / f"{self.running.data_dir.name}.log").read_text()


@pytest.fixture(scope="module")
def appliance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Appliance]:
    port = free_port()
    with serve(tmp_path_factory.mktemp("workmem") / "data", KUMIHO_CE_KUMIHO__REDIS_PORT=str(port)) as running:
        yield Appliance(running, port)


def sidecar_env(home: Path, **door: str) -> dict[str, str]:
    """The sidecar's environment: an empty HOME (no cached cloud credentials or tenant) and one door."""
    home.mkdir(parents=True, exist_ok=True)
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), **door}


def run_sidecar_buffer(env: dict[str, str], *args: str) -> dict[str, Any]:
    """``sidecar_buffer.py`` (the stock ``RedisMemoryBuffer`` through every operation) in the SDK's Python."""
    done = subprocess.run([sdk_python(), str(HERE / "sidecar_buffer.py"), *args], env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-4000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result
