"""The service manager's notification protocol (``sd_notify``), without libsystemd: one datagram per message to
the AF_UNIX socket named in ``$NOTIFY_SOCKET`` (a path, or ``@name`` for an abstract socket).

Under the unit's ``Type=notify`` the appliance says ``READY=1`` once its stores are open and its port listens,
``STATUS=…`` lines along the way (``systemctl status`` shows the last one), ``STOPPING=1`` when a graceful stop
begins, and, with ``WatchdogSec=`` (systemd then sets ``$WATCHDOG_USEC``), ``WATCHDOG=1`` every half of that
interval while the appliance is healthy (``Watchdog``). Without ``$NOTIFY_SOCKET`` (not started by systemd)
every call is a no-op.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import socket
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)
POLL_SECONDS = 0.05  # how often a round looks whether its health check has returned
_warned: set[str] = set()  # socket addresses already said to be unusable: one warning each, not one a ping


def notify(state: str) -> bool:
    """Send ``state`` (e.g. ``"READY=1"``, ``"STATUS=…"``; several as lines) to the service manager; False when
    no manager listens (no ``$NOTIFY_SOCKET``) or the message could not be sent (logged once)."""
    name = os.environ.get("NOTIFY_SOCKET", "")
    if not name:
        return False
    if name.startswith("@"):
        address = "\0" + name[1:]  # Linux abstract namespace
    elif name.startswith("/"):
        address = name
    else:  # systemd also knows vsock:… addresses (virtual machines); the appliance runs on the host
        _warn_once(name, "NOTIFY_SOCKET=%s is neither a path nor an abstract @socket: notifications are off", name)
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as sock:
            sock.connect(address)
            sock.sendall(state.encode())
    except OSError as exc:
        _warn_once(name, "cannot notify the service manager at %s: %s", name, exc.strerror or exc)
        return False
    return True


def _warn_once(name: str, message: str, *args: object) -> None:
    if name not in _warned:
        _warned.add(name)
        log.warning(message, *args)


def watchdog_seconds() -> float | None:
    """The watchdog interval the service manager expects pings within (``$WATCHDOG_USEC``), or None when there
    is none or it is meant for another process (``$WATCHDOG_PID``, as ``sd_watchdog_enabled`` reads it)."""
    pid = os.environ.get("WATCHDOG_PID")
    if pid and pid != str(os.getpid()):
        return None
    try:
        usec = int(os.environ.get("WATCHDOG_USEC", ""))
    except ValueError:
        return None
    return usec / 1e6 if usec > 0 else None


class Watchdog:
    """Sends ``WATCHDOG=1`` every ``interval`` seconds (half the manager's timeout) while ``healthy`` says so.

    What "healthy" means here is what a restart would cure:
    - the event loop runs: this is a task on the serving loop, so a loop blocked by a request handler (or by
      anything else) sends nothing;
    - the stores answer: ``healthy`` (a blocking call, e.g. a graph read and an index count) runs on a thread of
      its own, one at a time, and must return True within ``deadline`` seconds. A check still running from an
      earlier round is not started again and counts as unhealthy: a wedged store stops the pings.
    One late answer (a busy machine) skips one ping; the manager acts only when a whole timeout (two rounds)
    passes without one, and then stops the process (SIGABRT, no core: ``LimitCORE=0``) and restarts it.
    """

    def __init__(self, interval: float, healthy: Callable[[], bool], deadline: float | None = None,
                 send: Callable[[str], bool] = notify) -> None:
        self.interval = interval
        self.deadline = deadline if deadline is not None else interval / 2
        self._healthy = healthy
        self._send = send
        self._pending: concurrent.futures.Future[bool] | None = None
        self.pings = 0
        self.missed = 0

    async def run(self) -> None:
        """Ping until cancelled (the server cancels it when a graceful stop begins)."""
        while True:
            if await self._check():
                self._send("WATCHDOG=1")
                self.pings += 1
            else:
                self.missed += 1
            await asyncio.sleep(self.interval)

    async def _check(self) -> bool:
        if self._pending is not None and not self._pending.done():
            log.warning("watchdog: the previous health check has not returned yet (a store does not answer): "
                        "no ping")
            return False
        pending: concurrent.futures.Future[bool] = concurrent.futures.Future()
        self._pending = pending
        # a daemon thread: a check stuck for ever never holds the process at exit
        threading.Thread(target=self._call, args=(pending,), name="watchdog-check", daemon=True).start()
        # polled rather than awaited through a callback: a check that returns after the loop has closed (a stop)
        # then has no loop to call back into
        deadline = time.monotonic() + self.deadline
        while not pending.done():
            if time.monotonic() >= deadline:
                log.warning("watchdog: the stores did not answer within %.1f s: no ping", self.deadline)
                return False
            await asyncio.sleep(min(POLL_SECONDS, self.deadline))
        return pending.result()

    def _call(self, result: concurrent.futures.Future[bool]) -> None:
        try:
            healthy = bool(self._healthy())
        except Exception:
            log.warning("watchdog: the health check failed: no ping", exc_info=True)
            healthy = False
        result.set_result(healthy)
