"""The appliance in this test process: real stores, the real ASGI app behind uvicorn on a loopback port, and
a chat model the test chooses (a ``ScriptedModel`` drives each branch). MCP clients reach it over real HTTP."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from appliance.app import Services, build_app, open_services
from appliance.config import load_settings
from appliance.core.ports import ChatModel
from appliance.server.runner import make_config
from tests.appliance_process import free_port


@dataclass
class InProcess:
    services: Services
    base_url: str

    def get(self, path: str) -> Any:
        response = httpx.get(self.base_url + path, timeout=30)
        response.raise_for_status()
        return response.json()


def wait_job(app: InProcess, job_id: str, timeout: float = 120) -> dict[str, Any]:
    """The job's final state, read from the admin API (bounded wait)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = app.get(f"/api/v1/jobs/{job_id}")
        if job["state"] not in ("queued", "running"):
            return job  # type: ignore[no-any-return]
        time.sleep(0.05)
    raise AssertionError(f"job {job_id} did not finish")


@contextmanager
def serve_in_process(data_dir: Path, model: ChatModel | None, **overrides: Any) -> Iterator[InProcess]:
    settings = load_settings(data_dir=data_dir, **{"search": {"embedder": "hashing"}, **overrides})
    with open_services(settings, chat_model=model) as services:
        server = uvicorn.Server(make_config(build_app(services), "warning"))
        port = free_port()
        sock = socket.socket()
        sock.bind(("127.0.0.1", port))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        try:
            for _ in range(600):
                if server.started:
                    break
                threading.Event().wait(0.05)
            assert server.started, "the in-process server did not start"
            yield InProcess(services, f"http://127.0.0.1:{port}")
        finally:
            server.should_exit = True
            thread.join(30)
            sock.close()
