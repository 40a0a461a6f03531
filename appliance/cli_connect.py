"""How commands such as ``kumiho-ce memory``, ``backup`` and ``export`` reach the memory.

Only one process may open the data directory (ARCHITECTURE "Processes"). When an appliance owns it, a
command talks to it over HTTP, with the token read from the data directory, exactly as any client would. When
none runs, the command takes the data directory itself for its lifetime: it opens the stores in this process
and serves the same app on a private Unix socket, so that both cases run the same routes, checks and errors.

``connect`` yields an ``ApplianceHttp``; ``ApplianceHttp.call`` returns the decoded JSON answer or raises a
``KumihoError`` carrying the problem answer's detail, which the CLI prints as one line.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from appliance.config import Settings
from appliance.datadir import DataDir
from appliance.errors import KumihoError, Unavailable

log = logging.getLogger(__name__)

REQUEST_TIMEOUT = 300.0
LOCAL_BASE_URL = "http://127.0.0.1"  # a loopback Host: the front door accepts it on the private socket


class ApplianceError(KumihoError):
    """A problem answer of the appliance, for the command line: its ``code`` and ``detail``."""

    def __init__(self, status: int, code: str, detail: str, field: str | None = None) -> None:
        super().__init__(detail, field=field)
        self.status, self.code = status, code


@dataclass
class ApplianceHttp:
    http: httpx.Client
    local: bool  # True: this process opened the data directory (no appliance was running)
    data_dir: DataDir

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        """One request; the decoded JSON answer (None for an empty one), or ApplianceError."""
        response = self.http.request(method, path, **kwargs)
        raise_for_problem(response)
        return response.json() if response.content else None

    def download(self, path: str, target: Path, *, label: str, params: dict[str, str] | None = None,
                 check_end: Callable[[bytes], None] | None = None) -> tuple[int, int]:
        """Stream ``path`` into ``target``, with a progress bar on stderr: written beside it (0600: memories are
        private), fsynced and renamed over it once whole, so ``target`` is never half a file. ``check_end`` sees
        the last 4 KiB and raises when the answer stopped early. Returns (bytes, lines) written."""
        from tqdm import tqdm

        partial = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.part")
        size = lines = 0
        tail = b""
        try:
            with self.http.stream("GET", path, params=params) as response:
                raise_for_problem(response, streamed=True)
                total = int(response.headers.get("content-length") or 0) or None
                fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(fd, "wb") as out, tqdm(total=total, unit="B", unit_scale=True, desc=label,
                                                      file=sys.stderr, leave=False) as bar:
                    for chunk in response.iter_bytes(1024 * 1024):
                        out.write(chunk)
                        size, lines, tail = size + len(chunk), lines + chunk.count(b"\n"), (tail + chunk)[-4096:]
                        bar.update(len(chunk))
                    out.flush()
                    os.fsync(out.fileno())
            if check_end is not None:
                check_end(tail)
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
        return size, lines

    def follow_job(self, job_id: str, label: str, *, poll: float = 0.2, show: bool = True) -> dict[str, Any]:
        """Wait for a job of the appliance, with a progress bar on stderr; its final view. A failed job
        raises ApplianceError with its error."""
        from tqdm import tqdm

        with tqdm(desc=label, unit="", file=sys.stderr, disable=not show, leave=False) as bar:
            while True:
                job = self.call("GET", f"/api/v1/jobs/{job_id}")
                progress = job.get("progress") or {}
                if progress.get("total"):
                    bar.total = progress["total"]
                bar.update(max(0, int(progress.get("done", 0)) - bar.n))
                if job["state"] not in ("queued", "running"):
                    break
                time.sleep(poll)
        if job["state"] != "done":
            error = job.get("error") or {}
            raise ApplianceError(500, str(error.get("code", job["state"])),
                                 f"{label} {job['state']}: {error.get('message', 'see the appliance log')}")
        return job  # type: ignore[no-any-return]  # the jobs API's JSON object


def raise_for_problem(response: httpx.Response, *, streamed: bool = False) -> None:
    if response.status_code < 400:
        return
    if streamed:
        response.read()  # a streamed answer's problem body is not read yet
    try:
        body = response.json()
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    raise ApplianceError(response.status_code, str(body.get("code", "error")),
                         str(body.get("detail") or f"the appliance answered {response.status_code}"),
                         field=body.get("field"))


def running_base_url(data_dir: DataDir, settings: Settings) -> str | None:
    """The running owner's address from ``server.json`` when it answers ``/api/_live``, else None."""
    runtime = data_dir.read_runtime()
    if runtime is None or data_dir.stale_reason(runtime) is not None:
        return None
    host = str(runtime.get("host") or settings.host)
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    url = f"http://{'[' + host + ']' if ':' in host else host}:{runtime.get('port') or settings.port}"
    try:
        alive = httpx.get(url + "/api/_live", timeout=2.0, trust_env=False).status_code == 200
    except httpx.HTTPError:
        return None
    return url if alive else None


def token_for(data_dir: DataDir, settings: Settings) -> str | None:
    """The appliance's token (needed beyond loopback and with require_token), when this user may read it."""
    if settings.api_token:
        return settings.api_token.get_secret_value()
    try:
        return data_dir.token_path.read_text().strip() or None
    except OSError:
        return None


@contextmanager
def connect(settings: Settings, *, local_only: bool = False) -> Iterator[ApplianceHttp]:
    """The running appliance over HTTP, or (none running, or ``local_only``) this process as the owner."""
    data_dir = DataDir(settings.data_dir)
    url = None if local_only else running_base_url(data_dir, settings)
    if url is not None:
        headers = {"accept": "application/json"}
        token = token_for(data_dir, settings)
        if token:
            headers["authorization"] = f"Bearer {token}"
        with httpx.Client(base_url=url, headers=headers, trust_env=False,
                          timeout=httpx.Timeout(REQUEST_TIMEOUT, connect=5.0)) as http:
            yield ApplianceHttp(http, local=False, data_dir=data_dir)
        return
    with _local_appliance(settings) as http:
        yield ApplianceHttp(http, local=True, data_dir=data_dir)


@contextmanager
def _local_appliance(settings: Settings) -> Iterator[httpx.Client]:
    """Open the stores here (the data-directory lock: DataDirInUse when an appliance is just starting) and
    serve the app on a Unix socket only this process knows."""
    import uvicorn

    from appliance.app import build_app, open_services
    from appliance.server.runner import make_config

    with open_services(settings) as services, tempfile.TemporaryDirectory(prefix="kumiho-ce-cli-") as tmp:
        path = Path(tmp) / "app.sock"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.bind(str(path))
        server = uvicorn.Server(make_config(build_app(services).asgi, "warning", settings.http))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, name="cli-app", daemon=True)
        thread.start()
        try:
            deadline = time.monotonic() + 60
            while not server.started:
                if not thread.is_alive() or time.monotonic() > deadline:
                    raise Unavailable("the appliance could not start in this process; see the log above")
                time.sleep(0.02)
            token = token_for(DataDir(settings.data_dir), settings)
            headers = {"accept": "application/json"}
            if token:
                headers["authorization"] = f"Bearer {token}"
            transport = httpx.HTTPTransport(uds=str(path))
            with httpx.Client(transport=transport, base_url=LOCAL_BASE_URL, headers=headers, trust_env=False,
                              timeout=httpx.Timeout(REQUEST_TIMEOUT, connect=5.0)) as http:
                yield http
        finally:
            server.should_exit = True
            thread.join(30)
            sock.close()
