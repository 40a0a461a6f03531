"""The service manager's notify protocol, emulated: a real ``kumiho-ce serve`` with ``$NOTIFY_SOCKET`` naming a
socket the test bound says READY=1 only once its port answers, pings WATCHDOG=1 every half of ``$WATCHDOG_USEC``,
and says STOPPING=1 on SIGTERM, then exits cleanly."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from appliance.server import sdnotify
from tests.appliance_process import cli_env, free_port
from tests.systemd.service import NotifySocket, start


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[NotifySocket]:
    with NotifySocket(path=tmp_path / "notify.sock") as sock:
        yield sock


def test_ready_comes_once_the_port_answers_then_watchdog_pings_then_stopping(manager: NotifySocket,
                                                                          tmp_path: Path) -> None:
    port = free_port()
    env = cli_env(tmp_path / "data", NOTIFY_SOCKET=manager.address, WATCHDOG_USEC="1000000")  # a ping every 0.5 s
    process = start([sys.executable, "-m", "appliance", "serve", "--port", str(port)], env, tmp_path / "serve.log")
    try:
        ready = manager.wait_for("READY=1", 120, alive=lambda: process.poll() is None)
        # at once, no retry: the stores are open and the port listens before READY=1 is sent
        assert httpx.get(f"http://127.0.0.1:{port}/api/_live", timeout=10).status_code == 200
        assert httpx.get(f"http://127.0.0.1:{port}/api/_ready", timeout=10).status_code == 200
        assert f"STATUS=serving on http://127.0.0.1:{port}" in ready.splitlines()
        assert manager.lines()[0] == "STATUS=opening the data directory and the stores"
        for _ in range(3):
            manager.wait_for("WATCHDOG=1", 30, alive=lambda: process.poll() is None)
        process.send_signal(signal.SIGTERM)
        stopping = manager.wait_for("STOPPING=1", 30)
        assert "STATUS=stopping: finishing the requests under way" in stopping.splitlines()
        assert process.wait(timeout=60) == 0
        while manager.receive(0.2) is not None:  # whatever the process sent before it exited
            pass
        lines = manager.lines()
        after_stop = lines[lines.index("STOPPING=1"):]
        assert "WATCHDOG=1" not in after_stop  # the pinger ends as the stop begins
        assert after_stop[-1] == "STATUS=stopping: closing the stores (queued writes commit first)"
        assert lines.count("READY=1") == 1
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_without_a_notify_socket_nothing_is_sent_and_a_dead_socket_is_only_logged(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert sdnotify.notify("READY=1") is False
    monkeypatch.setenv("NOTIFY_SOCKET", str(tmp_path / "nobody-listens"))
    assert sdnotify.notify("READY=1") is False and sdnotify.notify("WATCHDOG=1") is False
    assert len([r for r in caplog.records if "cannot notify" in r.getMessage()]) == 1  # once, not once a ping
    with NotifySocket(path=tmp_path / "listens") as manager:
        monkeypatch.setenv("NOTIFY_SOCKET", manager.address)
        assert sdnotify.notify("STATUS=a\nREADY=1") is True
        assert manager.receive(5) == "STATUS=a\nREADY=1"
    # an abstract socket name (NOTIFY_SOCKET=@name), as sd_notify accepts it
    with NotifySocket(abstract=f"/kumiho-ce-test/{uuid.uuid4().hex}") as manager:
        monkeypatch.setenv("NOTIFY_SOCKET", manager.address)
        assert manager.address.startswith("@") and sdnotify.notify("WATCHDOG=1") is True
        assert manager.receive(5) == "WATCHDOG=1"
    monkeypatch.setenv("NOTIFY_SOCKET", "vsock:2:1234")  # a virtual machine's manager: not the appliance's case
    assert sdnotify.notify("READY=1") is False


def test_the_watchdog_interval_is_the_managers_and_only_for_its_main_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WATCHDOG_PID", raising=False)
    monkeypatch.delenv("WATCHDOG_USEC", raising=False)
    assert sdnotify.watchdog_seconds() is None
    monkeypatch.setenv("WATCHDOG_USEC", "60000000")
    assert sdnotify.watchdog_seconds() == 60.0
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid()))
    assert sdnotify.watchdog_seconds() == 60.0
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid() + 1))  # meant for another process (a child inherited it)
    assert sdnotify.watchdog_seconds() is None
    monkeypatch.delenv("WATCHDOG_PID")
    for bad in ("0", "-5", "soon", ""):
        monkeypatch.setenv("WATCHDOG_USEC", bad)
        assert sdnotify.watchdog_seconds() is None


def run_watchdog(healthy: threading.Event | None, block_loop: float = 0.0, rounds: float = 2.0) -> list[float]:
    """Run a Watchdog (0.1 s rounds) on an event loop for ``rounds`` seconds; the times of its pings. Its check
    waits while ``healthy`` is clear (a store that does not answer); ``block_loop`` seconds into the run the loop
    itself is blocked for a second (a handler that never yields)."""
    pings: list[float] = []
    began = time.monotonic()

    def check() -> bool:
        return healthy is None or healthy.wait(30)

    def send(state: str) -> bool:
        assert state == "WATCHDOG=1"
        pings.append(time.monotonic() - began)
        return True

    async def main() -> None:
        task = asyncio.create_task(sdnotify.Watchdog(0.1, check, deadline=0.05, send=send).run())
        if block_loop:
            await asyncio.sleep(block_loop)
            time.sleep(1.0)  # the loop is wedged: nothing else runs
        await asyncio.sleep(rounds - block_loop)
        task.cancel()

    asyncio.run(main())
    return pings


def test_the_watchdog_pings_while_the_stores_answer_and_stops_while_one_hangs() -> None:
    assert len(run_watchdog(None, rounds=1.0)) >= 3
    hung = threading.Event()  # the check never returns while this is clear
    assert run_watchdog(hung, rounds=1.0) == []
    hung.set()  # its check thread ends
    answers_later = threading.Event()
    threading.Timer(1.0, answers_later.set).start()
    pings = run_watchdog(answers_later, rounds=3.0)
    assert pings and min(pings) >= 1.0  # nothing while it hung; pings again once it answers


def test_the_watchdog_sends_nothing_while_the_event_loop_is_blocked() -> None:
    pings = run_watchdog(None, block_loop=0.5, rounds=2.5)
    assert [p for p in pings if p < 0.5] and [p for p in pings if p > 1.5]
    assert not [p for p in pings if 0.6 < p < 1.5]  # the blocked second (and the round it ended in)
