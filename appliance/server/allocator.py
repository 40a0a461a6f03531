"""glibc's allocator, tuned for one long-lived process with many threads (uvicorn's, anyio's worker pool, Kùzu's,
onnxruntime's, llama.cpp's).

By default glibc gives threads up to 8 arenas per core, and each arena keeps what its threads freed: RSS then
grows with every thread that once allocated and is not given back. The appliance caps the arenas before its
threads start and trims the heaps now and then while it serves.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time

M_ARENA_MAX = -8  # mallopt parameter numbers (malloc.h)
ARENAS = 2
TRIM_EVERY_SECONDS = 10.0  # malloc_trim(0) hands free pages of every arena back to the system


def _glibc() -> ctypes.CDLL | None:
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION"):
            return None
    except (ValueError, OSError, AttributeError):  # not glibc (musl, macOS)
        return None
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return None
    return libc if hasattr(libc, "mallopt") and hasattr(libc, "malloc_trim") else None


def limit_malloc_arenas() -> bool:
    """At most ``ARENAS`` malloc arenas from now on (call it before threads start: arenas made earlier stay);
    a ``MALLOC_ARENA_MAX`` in the environment wins. False where the C library is not glibc."""
    libc = _glibc()
    if libc is None or "MALLOC_ARENA_MAX" in os.environ:
        return False
    return bool(libc.mallopt(M_ARENA_MAX, ARENAS))


class MallocTrimmer:
    """A daemon thread calling ``malloc_trim(0)`` every ``every`` seconds while the appliance serves: freed
    memory inside the heaps (index rows replaced, batches embedded, responses sent) goes back to the system
    instead of staying in RSS. A no-op where the C library is not glibc."""

    def __init__(self, every: float = TRIM_EVERY_SECONDS) -> None:
        self._libc, self._every = _glibc(), every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="malloc-trim", daemon=True)
        self.trims = 0
        self.slowest_ms = 0.0

    def __enter__(self) -> MallocTrimmer:
        if self._libc is not None:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def trim(self) -> None:
        if self._libc is None:
            return
        started = time.perf_counter()
        self._libc.malloc_trim(0)
        self.trims += 1
        self.slowest_ms = max(self.slowest_ms, (time.perf_counter() - started) * 1000)

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self.trim()
