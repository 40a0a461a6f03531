"""Slow clients (slowloris-style) held open against a running appliance, for the test and the benchmark.

Each connection is one of three kinds, taken in turn:

* ``headers``: sends a request line, then one header line per tick, and never ends its headers;
* ``body``: sends a POST to ``/mcp`` announcing a large body, then one byte of it per tick;
* ``silent``: connects and sends nothing.

A thread sends the trickle, reads whatever the server answers, and notes when the server closes a connection
(its lifetime and the status line it was told). With ``reopen`` a closed connection is replaced at once, as an
attacker would, so that ``count`` connections stay open as far as the server lets them.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

KINDS = ("headers", "body", "silent")


@dataclass
class _Slow:
    kind: str
    conn: socket.socket
    opened: float
    answer: bytes = b""


@dataclass
class SlowTally:
    opened: int = 0
    closed_by_server: int = 0
    answers: Counter[str] = field(default_factory=Counter)  # first status line's code ("408"), "" for none
    lifetimes: list[float] = field(default_factory=list)  # seconds, of the connections the server closed


class SlowClients(threading.Thread):
    def __init__(self, address: tuple[str, int], count: int, *, kinds: tuple[str, ...] = KINDS,
                 tick: float = 1.0, reopen: bool = False) -> None:
        super().__init__(name="slow-clients", daemon=True)
        self.address = address
        self.count = count
        self.kinds = kinds
        self.tick = tick
        self.reopen = reopen
        self.tally = SlowTally()
        self._open: dict[socket.socket, _Slow] = {}
        self._selector = selectors.DefaultSelector()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self.ready = threading.Event()  # set once all ``count`` connections were opened the first time

    @property
    def open_now(self) -> int:
        with self._lock:
            return len(self._open)

    def stop(self) -> None:
        self._stopping.set()
        self.join(30)

    def run(self) -> None:
        try:
            for n in range(self.count):
                self._connect(self.kinds[n % len(self.kinds)])
            self.ready.set()
            next_tick = time.monotonic() + self.tick
            while not self._stopping.is_set():
                if time.monotonic() >= next_tick:
                    next_tick += self.tick
                    for slow in list(self._open.values()):
                        self._trickle(slow)
                for key, _ in self._selector.select(timeout=0.05):
                    self._readable(self._open[key.fileobj])  # type: ignore[index]
        finally:
            self.ready.set()
            for conn in list(self._open):
                self._selector.unregister(conn)
                conn.close()
            self._selector.close()

    def _connect(self, kind: str) -> None:
        conn = socket.create_connection(self.address, timeout=10)
        host = f"{self.address[0]}:{self.address[1]}"
        if kind == "headers":
            conn.sendall(f"GET /api/_ready HTTP/1.1\r\nHost: {host}\r\n".encode())
        elif kind == "body":
            conn.sendall(f"POST /mcp HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                         "Accept: application/json, text/event-stream\r\nContent-Length: 100000\r\n\r\n{".encode())
        conn.setblocking(False)
        with self._lock:
            self._open[conn] = _Slow(kind, conn, time.monotonic())
        self._selector.register(conn, selectors.EVENT_READ)
        self.tally.opened += 1

    def _trickle(self, slow: _Slow) -> None:
        piece = {"headers": b"X-Trickle: 1\r\n", "body": b" ", "silent": b""}[slow.kind]
        if not piece:
            return
        try:
            slow.conn.send(piece)
        except BlockingIOError:
            pass  # the server stopped reading: the connection is bounded by its timeouts
        except OSError:
            self._closed(slow)

    def _readable(self, slow: _Slow) -> None:
        try:
            chunk = slow.conn.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        slow.answer += chunk
        if not chunk:
            self._closed(slow)

    def _closed(self, slow: _Slow) -> None:
        self._selector.unregister(slow.conn)
        slow.conn.close()
        with self._lock:
            del self._open[slow.conn]
        self.tally.closed_by_server += 1
        self.tally.lifetimes.append(time.monotonic() - slow.opened)
        status = slow.answer.split(b" ", 2)[1].decode("latin-1") if slow.answer.startswith(b"HTTP/") else ""
        self.tally.answers[status] += 1
        if self.reopen and not self._stopping.is_set():
            with contextlib.suppress(OSError):  # the server refused a new one: try again at the next close
                self._connect(slow.kind)


def probe_live(address: tuple[str, int], timeout: float = 10) -> tuple[int, float]:
    """One ``GET /api/_live`` on a new connection: (status, milliseconds from connect to the whole answer)."""
    began = time.perf_counter()
    with socket.create_connection(address, timeout=timeout) as conn:
        conn.sendall(f"GET /api/_live HTTP/1.1\r\nHost: {address[0]}:{address[1]}\r\nConnection: close\r\n\r\n"
                     .encode())
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    elapsed = (time.perf_counter() - began) * 1000
    status = int(answer.split(b" ", 2)[1]) if answer.startswith(b"HTTP/") else 0
    return status, elapsed
