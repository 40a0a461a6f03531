"""The appliance that ``kumiho-ce mcp`` starts in the background: it exits once nobody uses it, and the
``server.json`` a killed appliance leaves behind misleads neither the next shim nor ``doctor``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio

from tests.appliance_process import ROOT, cli_env, free_port, kumiho_ce, serve
from tests.mcp_api.clients import call, stdio_session

IDLE_MINUTES = "0.05"  # 3 s: a shim-started appliance with nothing to do exits after that


def pid_running(pid: int) -> bool:
    """Alive and not a zombie (the background appliance is the shim's child, reaped by nobody here)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_for(condition: Any, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return bool(condition())


@contextmanager
def killed_at_the_end(data_dir: Path) -> Iterator[None]:
    """Whatever the test found, no background appliance outlives it."""
    pids: set[int] = set()
    try:
        yield
    finally:
        for path in (data_dir / "server.json", data_dir / "lock"):
            try:
                text = path.read_text().strip()
                pids.add(int(json.loads(text)["pid"]) if path.suffix == ".json" else int(text))
            except (OSError, ValueError, KeyError):
                pass
        for pid in pids:
            if pid != os.getpid() and pid_running(pid):
                os.kill(pid, signal.SIGKILL)


def shim_round_trip(data_dir: Path, port: int, earlier: str | None = None, **env: str) -> dict[str, Any]:
    """One short agent-host session through ``kumiho-ce mcp``: store a memory and read it back (and an
    ``earlier`` one); the shim then exits as it does when its host goes away."""

    async def steps() -> dict[str, Any]:
        async with stdio_session(data_dir, port, **env) as session:
            stored = await call(session, "kumiho_memory_store", title="Background appliance note",
                                user_text="The shim started this appliance.", space_path="lifecycle")
            found = await call(session, "kumiho_resolve_kref", kref=earlier or stored["revision_kref"])
            runtime = json.loads((data_dir / "server.json").read_text())  # while the appliance surely runs
            return {"stored": stored, "found": found, "pid": int(runtime["pid"])}

    return anyio.run(steps)


def test_a_shim_started_appliance_exits_when_idle_and_a_hand_started_one_does_not(tmp_path: Path) -> None:
    background, by_hand = tmp_path / "background", tmp_path / "by-hand"
    with killed_at_the_end(background), serve(by_hand, KUMIHO_CE_IDLE_EXIT_MINUTES=IDLE_MINUTES) as manual:
        answers = shim_round_trip(background, free_port(), KUMIHO_CE_IDLE_EXIT_MINUTES=IDLE_MINUTES)
        assert answers["found"]["kref"] == answers["stored"]["revision_kref"]
        pid = answers["pid"]  # the shim has exited; its appliance has not, yet

        assert wait_for(lambda: not pid_running(pid), timeout=90), "the idle background appliance kept running"
        assert not (background / "server.json").exists()  # a clean exit: stores closed, server.json removed
        log = (background / "serve.log").read_text()
        assert "no request and no job for 3 s: exiting" in log

        # `kumiho-ce serve` started by hand (or systemd) has the same setting and is still serving
        assert manual.process.poll() is None
        assert manual.stop() == 0

    # the data survived the idle exit: the next shim starts the appliance again and finds the memory
    with killed_at_the_end(background):
        first = answers["stored"]["revision_kref"]
        again = shim_round_trip(background, free_port(), first, KUMIHO_CE_IDLE_EXIT_MINUTES=IDLE_MINUTES)
        assert again["found"]["kref"] == first
        assert again["pid"] != pid  # a new appliance
        assert wait_for(lambda: not pid_running(again["pid"]), timeout=90)  # which idles out in turn


class Impostor(BaseHTTPRequestHandler):
    """Whatever took the dead appliance's port: answers every request with 200 and nothing useful."""

    def _answer(self) -> None:
        body = b'{"status": "live"}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def impostor_on(port: int) -> Iterator[None]:
    server = ThreadingHTTPServer(("127.0.0.1", port), Impostor)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


def doctor_checks(data_dir: Path) -> dict[str, dict[str, str]]:
    result = kumiho_ce("doctor", "--json", env=cli_env(data_dir))
    return {check["name"]: check for check in json.loads(result.stdout)}


def test_after_kill_9_the_stale_server_json_is_recognised_and_a_new_appliance_starts(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serve(data) as first:
        old_port = int(first.base_url.rsplit(":", 1)[1])
        first.process.kill()
        first.process.wait()
    assert json.loads((data / "server.json").read_text())["pid"] == first.process.pid  # kill -9 left it

    stale = doctor_checks(data).get("server")
    assert stale is not None and stale["status"] == "warn", stale
    assert "stale" in stale["detail"] and "kumiho-ce mcp ignores it" in stale["fix"]

    new_port = free_port()
    with killed_at_the_end(data), impostor_on(old_port):  # the dead appliance's port now answers as someone else
        answers = shim_round_trip(data, new_port)
        assert answers["found"]["kref"] == answers["stored"]["revision_kref"]
        runtime = json.loads((data / "server.json").read_text())  # replaced by the new appliance
        assert runtime["port"] == new_port and runtime["pid"] != first.process.pid and pid_running(runtime["pid"])
        assert "server" not in doctor_checks(data)  # a live owner's server.json is not stale
        os.kill(runtime["pid"], signal.SIGTERM)
        assert wait_for(lambda: not pid_running(runtime["pid"]), timeout=60)


def test_a_server_json_whose_pid_now_belongs_to_another_program_is_ignored(tmp_path: Path) -> None:
    """The pid of a killed appliance was reused by another program, and its port answers as someone else."""
    data, old_port = tmp_path / "data", free_port()
    data.mkdir(mode=0o700)
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], cwd=ROOT) as other:
        try:
            (data / "server.json").write_text(json.dumps({"pid": other.pid, "host": "127.0.0.1", "port": old_port}))
            stale = doctor_checks(data)["server"]
            with killed_at_the_end(data), impostor_on(old_port):
                answers = shim_round_trip(data, free_port())
                runtime = json.loads((data / "server.json").read_text())
                os.kill(runtime["pid"], signal.SIGTERM)
                assert wait_for(lambda: not pid_running(runtime["pid"]), timeout=60)
        finally:
            other.kill()
    assert stale["status"] == "warn" and "is stale (the data-directory lock is free" in stale["detail"]
    assert answers["found"]["kref"] == answers["stored"]["revision_kref"]
    assert runtime["pid"] != other.pid
