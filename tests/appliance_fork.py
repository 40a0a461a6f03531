"""Start ``kumiho-ce serve`` for a test in a fraction of the time: a helper process imports the appliance once and
forks each appliance from there, instead of every start importing it again (the imports are most of a start:
lancedb, litestar, mcp and grpc).

The forked child is the process ``python -m appliance serve …`` would be, but for its imports: it takes the test's
environment, working directory and arguments, sends its output to the log, runs ``appliance.__main__`` and exits
through the interpreter's own exit (atexit handlers included). The helper reaps it and reports its exit status,
so a test holds a ``Forked`` that answers like ``subprocess.Popen`` (pid, poll, wait, send_signal, kill).

Only what cannot differ between a fork and a fresh interpreter may be forked: ``can_fork`` says no (the caller
then starts a fresh process) when the environment differs in more than the appliance's settings, the config
directory or HOME, when the caller is not the process that started the helper (a test body forked into its own
network namespace), or when ``KUMIHO_TEST_FORK=0``. The helper imports before it forks and never starts a thread.
"""

from __future__ import annotations

import json
import os
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import threading
import traceback
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_OWNER = os.getpid()  # the test process; a test body it forks (into a network namespace, say) starts its own

# what cmd_serve imports before it serves (appliance/cli.py); importing more would change nothing but the cost
PRELOAD = ("appliance.cli", "appliance.app", "appliance.admin_api.auth", "appliance.server.idle",
           "appliance.grpc_api.server", "appliance.server.front", "appliance.server.runner",
           "appliance.workmem.redis_server")
# variables a forked child may take from the test: read when the appliance runs, not when it is imported
FORKABLE = ("KUMIHO_CE_", "XDG_CONFIG_HOME", "HOME")


# -- the helper process ----------------------------------------------------------------------------------------

def _helper(control: socket.socket) -> None:
    """Serve fork requests on ``control`` until it closes; in a forked child, run the appliance and exit."""
    for name in PRELOAD:
        __import__(name)
    selector = selectors.DefaultSelector()
    selector.register(control, selectors.EVENT_READ)
    reader = control.makefile("r")
    control.sendall(b'{"ready": true}\n')
    while True:
        if selector.select(timeout=0.05):
            line = reader.readline()
            if not line:
                return  # the test process is gone
            request = json.loads(line)
            defaults = warnings.filters[:]
            # lancedb resets its runtime in the child and warns that a call under way could deadlock: the helper
            # makes none (it only imports)
            warnings.filterwarnings("ignore", "lancedb fork support", RuntimeWarning)
            pid = os.fork()
            warnings.filters[:] = defaults
            if pid == 0:
                selector.close()
                reader.close()
                control.close()
                _child(request)  # never returns
            control.sendall(json.dumps({"started": pid}).encode() + b"\n")
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            control.sendall(json.dumps({"exited": pid, "code": os.waitstatus_to_exitcode(status)}).encode() + b"\n")


def _child(request: dict[str, Any]) -> None:
    null = os.open(os.devnull, os.O_RDONLY)
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(null, 0)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(null)
    os.close(log)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = ["-m", *request["args"]]
    try:
        runpy.run_module("appliance", run_name="__main__", alter_sys=True)
    except SystemExit:
        raise  # the interpreter exits with its code, as a fresh one would
    except BaseException:
        traceback.print_exc()
        raise SystemExit(1) from None
    raise SystemExit(0)


# -- the test side ---------------------------------------------------------------------------------------------

class Forked:
    """A forked appliance as the test sees it: the part of ``subprocess.Popen`` the tests use."""

    def __init__(self, helper: _Helper, pid: int, args: list[str]) -> None:
        self._helper = helper
        self.pid = pid
        self.args = args
        self.returncode: int | None = None
        self.stdout = self.stderr = None

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._helper.exit_code(self.pid, 0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self.returncode = self._helper.exit_code(self.pid, timeout)
            if self.returncode is None:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:  # as Popen: never signal a pid that may be another process's by now
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def __enter__(self) -> Forked:
        return self

    def __exit__(self, *exc: object) -> None:
        self.wait()


class _Helper:
    def __init__(self) -> None:
        self.netns = _netns()
        ours, theirs = socket.socketpair()
        self.env = _unforkable(os.environ)
        self.process = subprocess.Popen(
            [sys.executable, "-c", "import socket, sys; from tests.appliance_fork import _helper; "
             "_helper(socket.socket(fileno=int(sys.argv[1])))", str(theirs.fileno())],
            cwd=ROOT, env=self.env, pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL)
        theirs.close()
        self._socket = ours
        self._lines = ours.makefile("r")
        self._changed = threading.Condition()
        self._started: list[int] = []
        self._exits: dict[int, int] = {}
        self._alive = True
        self._request = threading.Lock()
        self._ready = threading.Event()
        self._reader = threading.Thread(target=self._read, name="appliance-fork-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self._lines:  # until the helper exits (close() ends its input)
            message = json.loads(line)
            with self._changed:
                if "ready" in message:
                    self._ready.set()
                elif "started" in message:
                    self._started.append(message["started"])
                else:
                    self._exits[message["exited"]] = message["code"]
                self._changed.notify_all()
        with self._changed:
            self._alive = False
            self._ready.set()
            self._changed.notify_all()

    def fork(self, args: list[str], env: dict[str, str], log: Path) -> Forked:
        with self._request:
            if not self._ready.wait(300) or not self._alive:
                raise RuntimeError("the appliance fork helper did not start")
            request = {"args": args, "env": env, "cwd": str(ROOT), "log": str(log)}
            self._socket.sendall(json.dumps(request).encode() + b"\n")
            with self._changed:
                if not self._changed.wait_for(lambda: self._started or not self._alive, timeout=60):
                    raise RuntimeError("the appliance fork helper did not answer")
                if not self._started:
                    raise RuntimeError("the appliance fork helper stopped")
                return Forked(self, self._started.pop(0), args)

    def exit_code(self, pid: int, timeout: float | None) -> int | None:
        with self._changed:
            self._changed.wait_for(lambda: pid in self._exits or not self._alive, timeout=timeout)
            return self._exits.get(pid)

    def close(self) -> None:
        self._socket.shutdown(socket.SHUT_WR)  # the helper reads the end, exits, and the reader sees it go
        self.process.wait(30)
        self._reader.join(30)
        self._lines.close()
        self._socket.close()


_helper_process: _Helper | None = None
_helper_lock = threading.Lock()


def _netns() -> str:
    try:
        return os.readlink("/proc/self/ns/net")
    except OSError:
        return ""


def helper() -> _Helper:
    global _helper_process
    with _helper_lock:
        if _helper_process is None:
            _helper_process = _Helper()
            import atexit
            atexit.register(_helper_process.close)
        return _helper_process


def can_fork(env: dict[str, str]) -> bool:
    """Whether an appliance with ``env`` may be forked from the helper (else: a fresh process)."""
    if os.environ.get("KUMIHO_TEST_FORK", "1") == "0" or not hasattr(os, "fork"):
        return False
    if os.getpid() != _OWNER or (_helper_process is not None and _netns() != _helper_process.netns):
        return False
    forked_from = _helper_process.env if _helper_process is not None else _unforkable(os.environ)
    return _unforkable(env) == forked_from


def _unforkable(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if not k.startswith(FORKABLE)}


def start(args: list[str], env: dict[str, str], log: Path) -> Forked:
    """``python -m appliance *args`` with ``env``, output to ``log``, forked from the helper."""
    return helper().fork(args, env, log)
