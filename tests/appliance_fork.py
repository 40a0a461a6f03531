"""Start ``kumiho-ce serve`` (or another ``kumiho-ce`` command) for a test in a fraction of the time: a helper
process imports the appliance once and forks each process from there, instead of every start importing it again
(the imports are most of a start: lancedb, litestar, mcp and grpc).

The forked child is the process ``python -m appliance serve …`` would be, but for its imports: it takes the test's
environment, working directory and arguments, sends its output to files, runs ``appliance.__main__`` and exits
as the interpreter would (threads joined, atexit handlers run, output flushed) but without tearing every module
down. The helper reaps it and reports its exit status,
so a test holds a ``Forked`` that answers like ``subprocess.Popen`` (pid, poll, wait, send_signal, kill).

Only what cannot differ between a fork and a fresh interpreter may be forked: ``can_fork`` says no (the caller
then starts a fresh process) when the environment differs in more than KUMIHO_* variables (the appliance's
settings), the config directory or HOME, when the caller is not the process that started the helper (a test body
forked into its own network namespace), or when ``KUMIHO_TEST_FORK=0``. The helper imports before it forks and
never starts a thread.
"""

from __future__ import annotations

import atexit
import json
import os
import runpy
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
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
# (pytest names the running test in PYTEST_CURRENT_TEST)
FORKABLE = ("KUMIHO_", "XDG_CONFIG_HOME", "HOME", "PYTEST_CURRENT_TEST")


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
    os.dup2(null, 0)
    os.close(null)
    for fd, path in ((1, request["stdout"]), (2, request["stderr"])):
        opened = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(opened, fd)
        os.close(opened)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = ["-m", *request["args"]]
    sys.orig_argv = [sys.executable, "-m", "appliance", *request["args"]]  # as a re-exec would need it
    try:
        runpy.run_module("appliance", run_name="__main__", alter_sys=True)
        code = 0
    except SystemExit as exit_:
        code = _exit_code(exit_.code)
    except BaseException:
        traceback.print_exc()
        code = 1
    # what the interpreter's exit does that a caller can see (other threads joined, atexit handlers run, output
    # flushed), without tearing down every module the helper imported: that took seconds
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


def _exit_code(code: object) -> int:
    """The status ``raise SystemExit(code)`` gives a process."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


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
        # "appliance" on the command line, as in `python -m appliance`: the forked children share it, and the
        # appliance tells its own processes from others by it (datadir._process_state, read by doctor and the lock)
        self.process = subprocess.Popen(
            [sys.executable, "-c", "import socket, sys; from tests.appliance_fork import _helper; "
             "_helper(socket.socket(fileno=int(sys.argv[2])))", "appliance", str(theirs.fileno())],
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

    def ready(self, timeout: float) -> bool:
        """Whether the helper has imported the appliance and takes requests (waits up to ``timeout``)."""
        return self._ready.wait(timeout) and self._alive

    def fork(self, args: list[str], env: dict[str, str], stdout: Path, stderr: Path) -> Forked:
        with self._request:
            if not self.ready(300):
                raise RuntimeError("the appliance fork helper did not start")
            request = {"args": args, "env": env, "cwd": str(ROOT), "stdout": str(stdout), "stderr": str(stderr)}
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
    return helper().fork(args, env, log, log)


def run(args: list[str], env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    """``subprocess.run([python, -m, appliance, *args], text=True, capture_output=True, timeout=timeout)``,
    forked from the helper (its input is /dev/null)."""
    with tempfile.TemporaryDirectory(prefix="kumiho-ce-run-") as scratch:
        out, err = Path(scratch) / "stdout", Path(scratch) / "stderr"
        process = helper().fork(args, env, out, err)
        try:
            code = process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise subprocess.TimeoutExpired([sys.executable, "-m", "appliance", *args], timeout,
                                            out.read_text(), err.read_text()) from None
        return subprocess.CompletedProcess([sys.executable, "-m", "appliance", *args], code, out.read_text(),
                                           err.read_text())
