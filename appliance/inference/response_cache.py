"""The LLM response cache of seed 001 (``[memory] response_cache_*``) and a ``ChatModel`` that uses it.

An answer is keyed by the model id, the kind of call, the messages, the schema and the sampling settings,
so a different model, prompt or schema never shares an entry. Entries live ``ttl`` seconds (0: until
evicted). Two tiers: an in-memory LRU of ``hot_entries``; behind it, when a path is given, a SQLite file
(in the data directory) of at most ``max_entries`` rows that survives restarts. Without a path the memory
tier alone holds up to ``max_entries``. ``max_entries`` 0 means no limit.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from appliance.config import MemorySettings, Settings
from appliance.core.ports import ChatModel, Message, ModelStatus, NoModel, Progress

_MISS = object()


class ResponseCache:
    def __init__(self, *, ttl_seconds: float, max_entries: int, hot_entries: int, path: Path | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.ttl = ttl_seconds
        self.max_entries = max_entries
        self.hot_entries = hot_entries if path is not None else max_entries
        self._clock = clock
        self._hot: OrderedDict[str, tuple[float, Any]] = OrderedDict()  # key -> (stored at, value)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self.hits = self.misses = 0
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL, "
                             "stored REAL NOT NULL, used REAL NOT NULL)")

    @classmethod
    def from_settings(cls, memory: MemorySettings, data_dir: Path | None = None,
                      clock: Callable[[], float] = time.time) -> ResponseCache | None:
        """The cache ``[memory]`` asks for (None when disabled); persisted under ``data_dir`` when given."""
        if not memory.response_cache_enabled:
            return None
        return cls(ttl_seconds=memory.response_cache_ttl_minutes * 60.0,
                   max_entries=memory.response_cache_max_entries, hot_entries=memory.response_cache_hot_entries,
                   path=data_dir / "cache" / "llm-responses.sqlite" if data_dir is not None else None, clock=clock)

    @staticmethod
    def key(model_id: str, kind: str, messages: Sequence[Message], schema: Mapping[str, Any] | None,
            **params: Any) -> str:
        blob = json.dumps([model_id, kind, [dict(m) for m in messages], schema, params], sort_keys=True,
                          ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    def get(self, key: str) -> Any:
        """The cached value, or ``None`` on a miss (values are never None)."""
        now = self._clock()
        with self._lock:
            value = self._get_hot(key, now)
            if value is _MISS and self._db is not None:
                value = self._get_db(key, now)
                if value is not _MISS:
                    self._put_hot(key, value, now)
            if value is _MISS:
                self.misses += 1
                return None
            self.hits += 1
            return value

    def put(self, key: str, value: Any) -> None:
        now = self._clock()
        with self._lock:
            self._put_hot(key, value, now)
            if self._db is not None:
                self._db.execute("INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?)",
                                 (key, json.dumps(value, ensure_ascii=False), now, now))
                if self.max_entries:
                    self._db.execute("DELETE FROM responses WHERE key IN (SELECT key FROM responses ORDER BY used "
                                     "DESC LIMIT -1 OFFSET ?)", (self.max_entries,))

    def __len__(self) -> int:
        with self._lock:
            if self._db is not None:
                return int(self._db.execute("SELECT count(*) FROM responses").fetchone()[0])
            return len(self._hot)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def _expired(self, stored: float, now: float) -> bool:
        return self.ttl > 0 and now - stored >= self.ttl

    def _get_hot(self, key: str, now: float) -> Any:
        entry = self._hot.get(key)
        if entry is None:
            return _MISS
        if self._expired(entry[0], now):
            del self._hot[key]
            return _MISS
        self._hot.move_to_end(key)
        return entry[1]

    def _put_hot(self, key: str, value: Any, stored: float) -> None:
        if self.hot_entries == 0 and self._db is not None:
            return
        self._hot[key] = (stored, value)
        self._hot.move_to_end(key)
        while self.hot_entries and len(self._hot) > self.hot_entries:
            self._hot.popitem(last=False)

    def _get_db(self, key: str, now: float) -> Any:
        assert self._db is not None
        row = self._db.execute("SELECT value, stored FROM responses WHERE key = ?", (key,)).fetchone()
        if row is None:
            return _MISS
        if self._expired(row[1], now):
            self._db.execute("DELETE FROM responses WHERE key = ?", (key,))
            return _MISS
        self._db.execute("UPDATE responses SET used = ? WHERE key = ?", (now, key))
        return json.loads(row[0])


class CachedModel:
    """A ``ChatModel`` that answers repeated calls from a ``ResponseCache`` and asks ``model`` otherwise.

    Only complete answers are stored: errors, timeouts and cancellations never are.
    """

    def __init__(self, model: ChatModel, cache: ResponseCache) -> None:
        self.model = model
        self.cache = cache
        self.model_id = model.model_id

    def complete_json(self, messages: Sequence[Message], schema: Mapping[str, Any], *, max_tokens: int = 512,
                      timeout: float | None = None, cancel: threading.Event | None = None,
                      temperature: float = 0.0, progress: Progress | None = None) -> dict[str, Any]:
        key = self.cache.key(self.model.model_id, "json", messages, schema, max_tokens=max_tokens,
                             temperature=temperature)
        cached = self.cache.get(key)
        if cached is not None:
            return cached  # type: ignore[no-any-return]  # what complete_json returned for this key
        answer = self.model.complete_json(messages, schema, max_tokens=max_tokens, timeout=timeout, cancel=cancel,
                                          temperature=temperature, progress=progress)
        self.cache.put(key, answer)
        return answer

    def complete_text(self, messages: Sequence[Message], *, max_tokens: int = 512, timeout: float | None = None,
                      cancel: threading.Event | None = None, temperature: float = 0.0,
                      progress: Progress | None = None) -> str:
        key = self.cache.key(self.model.model_id, "text", messages, None, max_tokens=max_tokens,
                             temperature=temperature)
        cached = self.cache.get(key)
        if cached is not None:
            return cached  # type: ignore[no-any-return]  # what complete_text returned for this key
        answer = self.model.complete_text(messages, max_tokens=max_tokens, timeout=timeout, cancel=cancel,
                                          temperature=temperature, progress=progress)
        self.cache.put(key, answer)
        return answer

    def status(self) -> ModelStatus:
        return self.model.status()


def with_response_cache(settings: Settings, model: ChatModel, clock: Callable[[], float] = time.time) -> ChatModel:
    """``model`` behind the response cache when ``[memory] response_cache_enabled`` (persisted in the data
    directory); ``model`` itself otherwise, or when it is a ``NoModel``."""
    if isinstance(model, NoModel):
        return model
    cache = ResponseCache.from_settings(settings.memory, Path(settings.data_dir), clock)
    return model if cache is None else CachedModel(model, cache)
