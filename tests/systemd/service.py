"""What systemd does for the unit, done by a test: the manager's end of the notify socket, the unit file read as
systemd reads it (its environment, ExecStartPre=, ExecStart=), and its commands run with the environment systemd
gives them, their paths moved under a test's directories."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "systemd" / "kumiho-ce.service"


class NotifySocket:
    """The service manager's notify socket: a datagram socket bound at ``path``, or in the abstract namespace
    (``$NOTIFY_SOCKET=@name``) when ``abstract`` is given. Keeps every message it received, in order."""

    def __init__(self, path: Path | None = None, abstract: str | None = None) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract is not None:
            self.sock.bind("\0" + abstract)
            self.address = "@" + abstract
        else:
            assert path is not None
            self.sock.bind(str(path))
            self.address = str(path)
        self.messages: list[str] = []

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> NotifySocket:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def receive(self, timeout: float) -> str | None:
        self.sock.settimeout(timeout)
        try:
            message = self.sock.recv(4096).decode()
        except TimeoutError:
            return None
        self.messages.append(message)
        return message

    def wait_for(self, line: str, timeout: float, alive: Callable[[], bool] = lambda: True) -> str:
        """The next message holding ``line`` (e.g. ``READY=1``); fails when ``alive`` turns False (the process
        exited) or ``timeout`` seconds pass first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = self.receive(min(0.5, max(0.01, deadline - time.monotonic())))
            if message is not None and line in message.splitlines():
                return message
            if message is None and not alive():
                raise AssertionError(f"the process exited before it sent {line}; it sent {self.messages}")
        raise AssertionError(f"no {line} within {timeout} s; received {self.messages}")

    def lines(self) -> list[str]:
        return [line for message in self.messages for line in message.splitlines()]


@dataclass
class Unit:
    """The [Service] keys of a unit file: each key's values in order (Environment= and the like repeat)."""

    keys: dict[str, list[str]] = field(default_factory=dict)

    @classmethod
    def read(cls, path: Path = UNIT) -> Unit:
        unit, section = cls(), ""
        for raw in path.read_text().splitlines():
            line = raw.strip()
            if not line or line.startswith(("#", ";")):
                continue
            if line.startswith("["):
                section = line.strip("[]")
                continue
            if section == "Service":
                key, _, value = line.partition("=")
                unit.keys.setdefault(key.strip(), []).append(value.strip())
        return unit

    def one(self, key: str) -> str:
        values = self.keys.get(key, [])
        assert len(values) == 1, f"{key}= should be set once in the unit, found {values}"
        return values[0]

    def environment(self) -> dict[str, str]:
        env: dict[str, str] = {}
        for value in self.keys.get("Environment", []):
            for assignment in shlex.split(value):
                name, _, setting = assignment.partition("=")
                env[name] = setting
        return env

    def command(self, key: str, moved: Callable[[str], str]) -> list[str]:
        """An Exec…= line as argv, each word's paths moved by ``moved``."""
        return [moved(word) for word in shlex.split(self.one(key))]

    def watchdog_usec(self) -> int:
        value = self.one("WatchdogSec")
        assert value.isdigit(), f"WatchdogSec={value}: the test reads plain seconds"
        return int(value) * 1_000_000


def manager_environment(unit: Unit, moved: Callable[[str], str], home: Path, notify: str, main: bool,
                        this_checkout: bool = True) -> dict[str, str]:
    """The environment systemd gives the unit's commands: its own variables (PATH, the user's HOME, LANG), the
    unit's Environment= (paths moved), the directories of StateDirectory= and ConfigurationDirectory=, and for
    the main process (ExecStart=) the notify socket and the watchdog (WATCHDOG_PID is set by the process itself:
    systemd names the main process's pid). With ``this_checkout`` (the installation is this virtual environment)
    the test's PYTHONPATH is kept, so that a test run from a worktree runs that worktree's code."""
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8",
           "HOME": str(home), "USER": "kumiho", "LOGNAME": "kumiho", "SHELL": "/usr/sbin/nologin",
           "STATE_DIRECTORY": moved("/var/lib/" + unit.one("StateDirectory")),
           "CONFIGURATION_DIRECTORY": moved("/etc/" + unit.one("ConfigurationDirectory"))}
    env.update({name: moved(value) for name, value in unit.environment().items()})
    if this_checkout and "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    if main:
        env.update({"NOTIFY_SOCKET": notify, "WATCHDOG_USEC": str(unit.watchdog_usec())})
    return env


def as_main_process(argv: list[str]) -> list[str]:
    """``argv`` exec'd by a shell that first sets WATCHDOG_PID to its own pid, which ``exec`` keeps: the pid of
    the main process, as systemd sets it."""
    return ["/bin/sh", "-c", 'WATCHDOG_PID=$$; export WATCHDOG_PID; exec "$0" "$@"', *argv]


def start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as output:
        return subprocess.Popen(argv, env=env, stdout=output, stderr=output, stdin=subprocess.DEVNULL)
