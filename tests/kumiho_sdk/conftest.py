"""A real ``kumiho-ce serve`` for the public Kumiho SDK (run from ``.venv-kumiho``, tests/kumiho_sdk_env.py), and
the appliance's own doors (REST, MCP) to look at what the SDK wrote."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.appliance_process import Running, serve
from tests.kumiho_sdk_env import run_sdk, sdk_env, sdk_python


@dataclass
class Appliance:
    running: Running
    port: int
    root: Path
    redis_port: int = 0  # the working-memory listener's port, when the test started one

    def rest(self, path: str, **params: Any) -> Any:
        """GET one of the appliance's REST routes; the JSON of a 200 answer."""
        answer = httpx.get(f"{self.running.base_url}{path}", params=params, timeout=30)
        assert answer.status_code == 200, (path, params, answer.status_code, answer.text)
        return answer.json()

    def sdk(self, flow: str, home: str, **arguments: Any) -> Any:
        """One flow of tests/kumiho_sdk/sdk_flows.py in the SDK's own process, tokenless, with only the
        appliance's port to find it by."""
        return run_sdk("sdk_flows.py", flow, json.dumps(arguments), env=sdk_env(self.root / home, self.port))


_names = itertools.count()


@pytest.fixture
def project_name(request: pytest.FixtureRequest) -> str:
    """A fresh project name per test (Kumiho's project names: lower case, digits and hyphens)."""
    return f"sdk-{request.node.name.removeprefix('test_').replace('_', '-')[:40]}-{next(_names)}"


@pytest.fixture(scope="package")
def appliance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Appliance]:
    sdk_python()  # fail at once, with the fix, when .venv-kumiho is missing
    root = tmp_path_factory.mktemp("sdk")
    with serve(root / "data") as running:
        yield Appliance(running, int(running.base_url.rsplit(":", 1)[1]), root)
        running.stop()
