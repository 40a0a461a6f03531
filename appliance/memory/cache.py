"""The seed's 5-second dedup guard (MISSION D3): an identical engage/recall within the window gets the same
result again, and only while nothing was written: every graph commit starts a new generation, which
empties the cache. It never answers with an empty result because of the guard."""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

WINDOW_SECONDS = 5.0
MAX_ENTRIES = 256


class RecallCache:
    def __init__(self, clock: Callable[[], float] = time.monotonic, window: float = WINDOW_SECONDS) -> None:
        self._clock, self.window = clock, window
        self._entries: OrderedDict[str, tuple[float, int, dict[str, Any]]] = OrderedDict()
        self._generation = 0
        self._lock = threading.Lock()

    def invalidate(self) -> None:
        """A write happened (graph commit listener)."""
        with self._lock:
            self._generation += 1
            self._entries.clear()

    @staticmethod
    def key(tool: str, arguments: dict[str, Any], client: Any) -> str:
        return json.dumps([tool, arguments, repr(client)], sort_keys=True, default=str)

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            found = self._entries.get(key)
            if found is None:
                return None
            at, generation, result = found
            if generation != self._generation or self._clock() - at > self.window:
                del self._entries[key]
                return None
            return result

    def put(self, key: str, result: dict[str, Any], generation: int) -> None:
        """``generation`` as read before the recall ran: a write during the recall makes it stale."""
        with self._lock:
            if generation != self._generation or not result.get("results"):
                return
            self._entries[key] = (self._clock(), generation, result)
            while len(self._entries) > MAX_ENTRIES:
                self._entries.popitem(last=False)

    @property
    def generation(self) -> int:
        return self._generation
