"""``kumiho-ce mcp``: the stdio face of the appliance (ARCHITECTURE "Processes").

Only one process may open the data directory, yet every agent host spawns its own ``kumiho-ce mcp``. So
this process holds no store: it forwards each JSON-RPC message from stdin to the running appliance's
``/mcp`` endpoint and writes the answers to stdout, starting the appliance in the background when none
answers. Many shims share one store that way, with no lost or refused writes. The host's environment
travels with every request (D10): ``KUMIHO_MEMORY_PROJECT``, ``KUMIHO_MEMORY_RETRIEVAL_LIMIT`` and
``KUMIHO_SESSION_ID``. Nothing but protocol goes to stdout; diagnostics go to stderr.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import IO, Any

import httpx

from appliance.cli_connect import token_for
from appliance.config import Settings
from appliance.datadir import DataDir
from appliance.mcp_api.server import CLIENT_HEADER, LIMIT_HEADER, PROJECT_HEADER, SESSION_HEADER

log = logging.getLogger(__name__)

START_TIMEOUT = 120.0  # first start: imports, model load, index repair
REQUEST_TIMEOUT = 300.0  # model-backed tools may take minutes


class Shim:
    def __init__(self, settings: Settings, config_path: str | None = None, out: IO[str] | None = None) -> None:
        self.settings, self.config_path = settings, config_path
        self.data_dir = DataDir(settings.data_dir)
        self.out = out or sys.stdout
        self._write_lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._protocol_version: str | None = None
        self._client = ""  # the agent host, from its initialize clientInfo: X-Kumiho-Client (the audit trail)
        self._stale_said: str | None = None
        self._http = httpx.Client(timeout=httpx.Timeout(REQUEST_TIMEOUT, connect=5.0), trust_env=False)

    # -- the appliance ---------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        """Where the owner of the data directory listens: ``server.json`` unless it is stale (a killed
        appliance's, whose port may now be anyone's), else the configured address."""
        runtime = self.data_dir.read_runtime()
        reason = self.data_dir.stale_reason(runtime) if runtime is not None else None
        if reason is not None:
            if reason != self._stale_said:
                log.warning("ignoring the stale %s: %s", self.data_dir.runtime_path, reason)
                self._stale_said = reason
            runtime = None
        runtime = runtime or {}
        host = str(runtime.get("host") or self.settings.host)
        host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        return f"http://{host}:{runtime.get('port') or self.settings.port}"

    def _alive(self) -> bool:
        try:
            return self._http.get(self.base_url + "/api/_live", timeout=2.0).status_code == 200
        except httpx.HTTPError:
            return False

    def ensure_appliance(self) -> None:
        """Start ``kumiho-ce serve`` in the background unless one answers; several shims starting at once
        are fine: the data-directory lock lets one win and the others' servers exit."""
        with self._start_lock:
            if self._alive():
                return
            self.data_dir.ensure()
            log_path = self.data_dir.root / "serve.log"
            command = [sys.executable, "-m", "appliance"]
            if self.config_path:
                command += ["--config", self.config_path]
            command += ["--data-dir", str(self.settings.data_dir), "serve"]
            if self.settings.idle_exit_minutes:  # nobody else will stop it once the agent hosts are gone
                command += ["--exit-when-idle", str(self.settings.idle_exit_minutes * 60)]
            with open(log_path, "ab") as log_file:
                subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log_file, stderr=log_file,
                                 start_new_session=True, env={**os.environ})
            log.info("started the appliance in the background (log: %s)", log_path)
            deadline = time.monotonic() + START_TIMEOUT
            while time.monotonic() < deadline:
                if self._alive():
                    return
                time.sleep(0.2)
            raise RuntimeError(f"the appliance did not start within {START_TIMEOUT:.0f} s; see {log_path}")

    def _headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
        if self._protocol_version:
            headers["mcp-protocol-version"] = self._protocol_version
        for variable, header in (("KUMIHO_MEMORY_PROJECT", PROJECT_HEADER),
                                 ("KUMIHO_MEMORY_RETRIEVAL_LIMIT", LIMIT_HEADER),
                                 ("KUMIHO_SESSION_ID", SESSION_HEADER)):
            if os.environ.get(variable):
                headers[header] = os.environ[variable]
        if self._client:
            headers[CLIENT_HEADER] = self._client
        token = self._token()
        if token:
            headers["authorization"] = f"Bearer {token}"
        return headers

    def _token(self) -> str | None:
        """The appliance's token (needed beyond loopback), when this user may read it."""
        return token_for(self.data_dir, self.settings)

    # -- forwarding ------------------------------------------------------------------------------------
    def forward(self, line: str) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            self._emit({"jsonrpc": "2.0", "id": None,
                        "error": {"code": -32700, "message": "parse error: each line must be one JSON-RPC message"}})
            return
        request_id = message.get("id") if isinstance(message, dict) else None
        if isinstance(message, dict) and message.get("method") == "initialize":
            self._client = client_label(message.get("params"))
        try:
            answer = self._post(line)
        except Exception as exc:  # the host must get an answer for every request it sent
            log.error("forwarding failed: %s", exc)
            if request_id is not None:
                self._emit({"jsonrpc": "2.0", "id": request_id,
                            "error": {"code": -32603, "message": f"kumiho-ce appliance unreachable: {exc}"}})
            return
        if answer is None:
            return
        if isinstance(message, dict) and message.get("method") == "initialize":
            self._protocol_version = (answer.get("result") or {}).get("protocolVersion")
        self._emit(answer)

    def _post(self, body: str) -> dict[str, Any] | None:
        for attempt in (1, 2):
            try:
                response = self._http.post(self.base_url + "/mcp", content=body.encode(), headers=self._headers())
                break
            except httpx.TransportError:
                if attempt == 2:
                    raise
                self.ensure_appliance()  # the appliance went away (restart, crash): bring it back once
        if response.status_code == 202 or not response.content:
            return None
        if response.headers.get("content-type", "").startswith("text/event-stream"):
            return _first_event(response.text)
        payload: dict[str, Any] = response.json()  # the appliance's JSON-RPC answer: an object
        if response.status_code >= 400 and "jsonrpc" not in payload:
            raise RuntimeError(f"HTTP {response.status_code}: {payload}")
        return payload

    def _emit(self, message: dict[str, Any]) -> None:
        with self._write_lock:
            self.out.write(json.dumps(message, ensure_ascii=False) + "\n")
            self.out.flush()

    def run(self, stdin: IO[str] | None = None) -> None:
        self.ensure_appliance()
        source = stdin or sys.stdin
        with ThreadPoolExecutor(max_workers=8, thread_name_prefix="mcp-forward") as pool:
            initialized = threading.Event()
            for line in source:
                if not line.strip():
                    continue
                if '"initialize"' in line and not initialized.is_set():
                    self.forward(line)  # the handshake first: later requests carry its protocol version
                    initialized.set()
                else:
                    pool.submit(self.forward, line)
        self._http.close()


def _first_event(text: str) -> dict[str, Any] | None:
    for block in text.split("\n\n"):
        data = "\n".join(line[5:].lstrip() for line in block.splitlines() if line.startswith("data:"))
        if data:
            event: dict[str, Any] = json.loads(data)  # one JSON-RPC message per event
            return event
    return None


def client_label(params: object) -> str:
    """``name/version (stdio)`` from an initialize request's ``clientInfo`` (the appliance bounds and cleans it)."""
    info = params.get("clientInfo") if isinstance(params, dict) else None
    if not isinstance(info, dict) or not isinstance(info.get("name"), str):
        return ""
    version = info.get("version") if isinstance(info.get("version"), str) else ""
    label = f"{info['name']}/{version}" if version else info["name"]
    return "".join(ch for ch in label if " " <= ch <= "~")[:180] + " (stdio)"
