"""The built image, run as a container (tests/container/running.py says how): it answers /api/_live and its
HEALTHCHECK, serves an MCP engage to a client holding the token from /data/token, runs as its own user, and
supervisord restarts the appliance after ``kill -9`` with the data kept; the runtime image has no compiler and
carries the model and every data file of the package. Prints its figures as JSON.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from appliance.inference.install import chat_models
from tests.container.containerfile import ROOT
from tests.container.running import (
    BASE_URL,
    UID,
    VENV,
    Container,
    data_volume,
    image_config,
    live,
    owner_uid,
    start,
)
from tests.mcp_api.clients import call

pytestmark = pytest.mark.long

FIGURES: dict[str, Any] = {}


@pytest.fixture(scope="module")
def image() -> dict[str, Any]:
    return image_config()


@pytest.fixture(scope="module")
def container(image: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Container]:
    running = start(image, "kumiho-ce-test", data_volume(tmp_path_factory.mktemp("container")))
    try:
        FIGURES["start_to_live_seconds"] = round(running.wait_until(live, "/api/_live", timeout=300), 1)
        yield running
    finally:
        running.remove()
        print(json.dumps({"container": FIGURES}))


def mcp(token: str | None, steps: Any) -> Any:
    async def main() -> Any:
        headers = {"authorization": f"Bearer {token}"} if token else {}
        async with httpx.AsyncClient(headers=headers, timeout=120) as http, \
                streamable_http_client(BASE_URL + "/mcp", http_client=http) as (read, write, *_), \
                ClientSession(read, write) as session:
            await session.initialize()
            return await steps(session)

    return anyio.run(main)


def engage_finds(token: str, kref: str) -> bool:
    async def steps(session: ClientSession) -> bool:
        engaged = await call(session, "kumiho_memory_engage", query="which harbour does the ferry leave from?")
        return kref in {result["kref"] for result in engaged["results"]}

    return bool(mcp(token, steps))


def test_it_answers_live_and_its_healthcheck(container: Container, image: dict[str, Any]) -> None:
    assert httpx.get(BASE_URL + "/api/_live", timeout=5).json()
    check = image["Docker"]["config"]["Healthcheck"]
    assert check["Test"][0] == "CMD"
    done = container.run(*check["Test"][1:])
    assert done.returncode == 0, done.stderr
    assert check["Interval"] and check["Timeout"] and check["StartPeriod"]


def test_it_runs_as_its_own_user(container: Container) -> None:
    assert owner_uid(container.supervisord()) == UID
    assert owner_uid(container.appliance()) == UID
    token = container.data / "token"
    assert token.stat().st_uid == UID and token.stat().st_mode & 0o777 == 0o600
    assert (container.data / "server.json").is_file()


def test_an_mcp_engage_with_the_token_from_the_volume(container: Container) -> None:
    token = (container.data / "token").read_text().strip()
    assert httpx.post(BASE_URL + "/mcp", json={}, timeout=10).status_code == 401  # beyond loopback in the container

    async def store(session: ClientSession) -> str:
        stored = await call(session, "kumiho_memory_store", title="Ferry timetable",
                            user_text="The morning ferry leaves from the north harbour at seven.", memory_type="fact")
        assert stored["stored"] is True, stored
        return str(stored["revision_kref"])

    kref = mcp(token, store)
    container.wait_until(lambda: engage_finds(token, kref), "the stored memory in an engage", timeout=120)
    FIGURES["stored_kref"] = kref


def test_supervisord_restarts_the_appliance_after_kill_9(container: Container) -> None:
    before, supervisor = container.appliance(), container.supervisord()
    os.kill(before, signal.SIGKILL)
    begin = time.monotonic()
    container.wait_until(lambda: container.running("kumiho-ce") not in ([], [before]) and live(),
                         "a restarted appliance", timeout=300)
    FIGURES["restart_after_kill_9_seconds"] = round(time.monotonic() - begin, 1)
    assert container.supervisord() == supervisor and container.appliance() != before
    token = (container.data / "token").read_text().strip()
    assert engage_finds(token, FIGURES["stored_kref"])  # the volume kept the memory stored before the kill


def _data_files(root: Path) -> dict[str, str]:
    return {path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(root.rglob("*"))
            if path.is_file() and path.suffix not in (".py", ".pyc", ".pyo") and "__pycache__" not in path.parts}


def test_the_runtime_image_has_no_compiler_and_carries_the_model_and_the_package_data(container: Container) -> None:
    root = container.root
    assert [tool for tool in ("gcc", "cc", "c++", "cmake", "make", "ld") if (root / "usr/bin" / tool).exists()] \
        == []
    packages = [line.split(": ", 1)[1] for line in (root / "var/lib/dpkg/status").read_text().splitlines()
                if line.startswith("Package: ")]
    assert [p for p in packages if p.endswith("-dev") or p in ("build-essential", "cmake")] == []
    assert not (root / "root/.cache/pip").exists() and not list((root / "tmp").glob("model-parts*"))
    (site,) = (root / VENV.lstrip("/") / "lib").glob("python3*/site-packages")
    assert _data_files(site / "appliance") == _data_files(ROOT / "appliance")  # every data file, as in the repo
    default = next(iter(chat_models().values()))
    model = root / VENV.lstrip("/") / "share/kumiho-ce/models" / default["file"]
    assert model.stat().st_size == default["size"]
    assert not (container.data / "models").exists()  # the model is the image's, not the volume's
    FIGURES["python_environment_mb"] = round(sum(p.stat().st_size for p in (root / VENV.lstrip("/")).rglob("*")
                                                 if p.is_file() and not p.is_symlink()) / 2**20)
    loads = container.run(f"{VENV}/bin/python", "-c", "import llama_cpp; print(llama_cpp.__version__)")
    assert loads.returncode == 0, loads.stderr  # llama.cpp's libraries resolve in the runtime image


def test_an_upgrade_backs_up_stops_gracefully_and_starts_a_new_container_on_the_volume(
        container: Container, image: dict[str, Any]) -> None:
    backup = container.run(f"{VENV}/bin/kumiho-ce", "backup", "/data/before-upgrade.tar.gz", timeout=300)
    assert backup.returncode == 0, backup.stderr
    assert (container.data / "before-upgrade.tar.gz").stat().st_size > 0
    container.stop()  # as `podman stop`: SIGTERM to supervisord, which stops the appliance gracefully
    assert container.process.returncode == 0, container.output()
    assert "stopped: kumiho-ce (exit status 0)" in container.output()
    upgraded = start(image, "kumiho-ce-test-upgraded", container.data)
    try:
        upgraded.wait_until(live, "/api/_live of the new container", timeout=300)
        token = (container.data / "token").read_text().strip()
        assert engage_finds(token, FIGURES["stored_kref"])
    finally:
        upgraded.remove()
