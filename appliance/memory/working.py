"""Working memory: a per-session message buffer, embedded and persisted so it survives restarts.

The reference product keeps this in Redis; here it is one SQLite file, ``<dir>/working.sqlite3``, opened by
the appliance process only and shared by its threads through one connection behind a lock (SQLite runs
one writer at a time anyway, and a lock avoids busy-wait retries between per-thread connections).

Message ids are ``<session_id>:<n>`` with ``n`` counting every message the session ever held, so an id
is never reused after ``clear``. Sessions are never trimmed: a full session refuses further messages
until it is consolidated and cleared.
"""

from __future__ import annotations

import json
import sqlite3
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from appliance.errors import Conflict, InvalidArgument, StorageError

Clock = Callable[[], datetime]  # the same shape as appliance.graph._support.Clock
ROLES = ("user", "assistant", "system", "tool")
MAX_NAME = 256
MAX_MESSAGE_BYTES = 65536  # one buffered message, UTF-8
# Metadata is bookkeeping beside the text (the sidecar's channel, timestamp, attachment pointers; a session's
# user, context and recalled krefs), a few hundred bytes in practice: bounded so that it cannot grow a session
# without limit (every metadata write re-writes the session's whole JSON).
MAX_MESSAGE_METADATA_BYTES = 16 * 1024  # one message's metadata, serialized as JSON (UTF-8)
MAX_SESSION_METADATA_FIELDS = 64  # a session's metadata, after a merge
MAX_SESSION_METADATA_BYTES = 64 * 1024  # a session's metadata after a merge, serialized as JSON (UTF-8)
POINTER_TTL = timedelta(hours=24)  # the Redis original's expiry of active-session pointers

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    project TEXT NOT NULL, session_id TEXT NOT NULL,
    message_count INTEGER NOT NULL DEFAULT 0, last_n INTEGER NOT NULL DEFAULT 0,
    first_at TEXT, last_at TEXT, metadata TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (project, session_id));
CREATE INDEX IF NOT EXISTS sessions_last_at ON sessions (last_at);
CREATE TABLE IF NOT EXISTS messages (
    project TEXT NOT NULL, session_id TEXT NOT NULL, n INTEGER NOT NULL,
    role TEXT NOT NULL, content TEXT NOT NULL, timestamp TEXT NOT NULL, metadata TEXT NOT NULL,
    PRIMARY KEY (project, session_id, n)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS active_pointers (
    context TEXT NOT NULL, user TEXT NOT NULL, session_id TEXT NOT NULL, claimed_at TEXT NOT NULL,
    PRIMARY KEY (context, user));
CREATE TABLE IF NOT EXISTS sequences (
    user TEXT NOT NULL, day TEXT NOT NULL, value INTEGER NOT NULL, PRIMARY KEY (user, day));
CREATE TABLE IF NOT EXISTS generations (base TEXT PRIMARY KEY, value INTEGER NOT NULL);
"""


def utc_now() -> datetime:
    return datetime.now(UTC)


def iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True, slots=True)
class Appended:
    message_id: str
    message_count: int
    created_bucket: bool  # True when this was the session's first message


@dataclass(frozen=True, slots=True)
class Message:
    message_id: str
    role: str
    content: str
    timestamp: str
    metadata: dict[str, Any]


@dataclass(frozen=True, slots=True)
class SessionInfo:
    project: str
    session_id: str
    message_count: int
    first_at: str
    last_at: str


def check_name(value: object, field: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"{field}: give a non-empty string", field=field)
    if len(value) > MAX_NAME:
        raise InvalidArgument(f"{field}: at most {MAX_NAME} characters (got {len(value)})", field=field)
    return value


def message_number(message_id: str) -> int:
    """``<session_id>:<n>`` → n."""
    return int(message_id.rpartition(":")[2])


def _check_string_map(values: object, field: str) -> dict[str, str]:
    if not isinstance(values, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                               for k, v in values.items()):
        raise InvalidArgument(f"{field}: give a mapping of strings to strings", field=field)
    return values


def _metadata_json(values: dict[str, Any]) -> tuple[str, int]:
    """The stored form of metadata and its size in bytes of UTF-8."""
    try:
        text = json.dumps(values, ensure_ascii=False, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"metadata: not JSON-serialisable ({exc})", field="metadata") from exc
    return text, len(text.encode("utf-8", "surrogatepass"))


def check_message_metadata(metadata: dict[str, Any]) -> str:
    """A message's metadata as stored (JSON), or InvalidArgument past MAX_MESSAGE_METADATA_BYTES. The doors call
    it before credential redaction too, so that an oversized value is refused before it is scanned."""
    text, size = _metadata_json(metadata)
    if size > MAX_MESSAGE_METADATA_BYTES:
        raise InvalidArgument(f"metadata: {size} bytes as JSON; a message's metadata is at most "
                              f"{MAX_MESSAGE_METADATA_BYTES} (keep large content in the message text or an "
                              "artifact)", field="metadata")
    return text


def check_metadata_write(values: dict[str, str]) -> None:
    """One session-metadata write on its own within the session's bounds (before its merge is checked)."""
    _check_session_metadata(values, _metadata_json(values)[1], "the write alone holds")


def _check_session_metadata(values: dict[str, str], size: int, what: str) -> None:
    if len(values) > MAX_SESSION_METADATA_FIELDS:
        raise InvalidArgument(f"metadata: {what} {len(values)} fields; a session keeps at most "
                              f"{MAX_SESSION_METADATA_FIELDS}: send fewer, or consolidate and clear the session",
                              field="metadata")
    if size > MAX_SESSION_METADATA_BYTES:
        raise InvalidArgument(f"metadata: {what} {size} bytes as JSON; a session keeps at most "
                              f"{MAX_SESSION_METADATA_BYTES}: send shorter values, or consolidate and clear the "
                              "session", field="metadata")


class WorkingMemory:
    def __init__(self, conn: sqlite3.Connection, max_messages: int, max_message_bytes: int, clock: Clock):
        self._conn: sqlite3.Connection | None = conn
        self._lock = threading.Lock()
        self._clock = clock
        self.max_messages = max_messages
        self.max_message_bytes = max_message_bytes

    @classmethod
    def open(cls, directory: Path, *, max_messages: int = 2000, max_message_bytes: int = MAX_MESSAGE_BYTES,
             clock: Clock = utc_now) -> WorkingMemory:
        if max_messages < 1:
            raise InvalidArgument("max_messages: give at least 1", field="max_messages")
        if max_message_bytes < 1:
            raise InvalidArgument("max_message_bytes: give at least 1", field="max_message_bytes")
        path = Path(directory) / "working.sqlite3"
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            # NORMAL in WAL mode: a commit reaches the OS before append() returns, so it survives a
            # crash or kill of the process; only an OS crash or power cut can lose the last commits.
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.executescript(_SCHEMA)
        except (OSError, sqlite3.Error) as exc:
            raise StorageError(f"working memory: cannot open {path}: {exc}") from exc
        return cls(conn, max_messages, max_message_bytes, clock)

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def backup_to(self, path: Path) -> None:
        """A consistent copy of the whole working memory into a new SQLite file at ``path`` (SQLite's online
        backup: one step under the lock, so no write lands half-way; the copy is a few MB at most)."""
        with self._lock:
            conn = self._open_conn()
            try:
                target = sqlite3.connect(path)
                try:
                    conn.backup(target)
                finally:
                    target.close()
            except sqlite3.Error as exc:
                raise StorageError(f"working memory: the backup copy failed: {exc}") from exc

    def __enter__(self) -> WorkingMemory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- plumbing ---------------------------------------------------------------------------------------
    def _now(self) -> datetime:
        return self._clock()

    def _open_conn(self) -> sqlite3.Connection:
        if self._conn is None:
            raise StorageError("working memory: already closed")
        return self._conn

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """One write transaction; rolled back whole on any error."""
        with self._lock:
            conn = self._open_conn()
            try:
                conn.execute("BEGIN IMMEDIATE")
                yield conn
                conn.execute("COMMIT")
            except BaseException as exc:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if isinstance(exc, sqlite3.Error):
                    raise StorageError(f"working memory: {exc}; the write was rolled back") from exc
                raise

    def _query(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            try:
                return self._open_conn().execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise StorageError(f"working memory: {exc}") from exc

    # -- messages ---------------------------------------------------------------------------------------
    def check_content(self, content: object, field: str = "content") -> None:
        """What ``append`` accepts as message text; callers check first to refuse before any other effect."""
        if not isinstance(content, str) or not content.strip():
            raise InvalidArgument(f"{field}: give non-empty message text", field=field)
        size = len(content.encode("utf-8", "surrogatepass"))
        if size > self.max_message_bytes:
            raise InvalidArgument(f"{field}: the message is {size} bytes of UTF-8; the limit is "
                                  f"{self.max_message_bytes} (max_message_bytes)", field=field)

    def append(self, project: str, session_id: str, role: str, content: str,
               metadata: dict[str, Any] | None = None) -> Appended:
        check_name(project, "project")
        check_name(session_id, "session_id")
        if role not in ROLES:
            raise InvalidArgument(f"role: give one of {', '.join(ROLES)} (got {role!r})", field="role")
        self.check_content(content)
        if metadata is not None and not isinstance(metadata, dict):
            raise InvalidArgument("metadata: give a JSON object or omit it", field="metadata")
        meta = check_message_metadata(metadata or {})
        now = iso(self._now())
        with self._tx() as conn:
            row = conn.execute("SELECT message_count FROM sessions WHERE project = ? AND session_id = ?",
                               (project, session_id)).fetchone()
            if row and row[0] >= self.max_messages:
                raise Conflict(f"session_id: session {session_id!r} holds {row[0]} messages, the most it "
                               "may hold (max_messages); consolidate and clear it before adding more",
                               field="session_id")
            # fetchall, not fetchone: a RETURNING statement must run to its end before COMMIT
            count, n = conn.execute(
                "INSERT INTO sessions (project, session_id, message_count, last_n, first_at, last_at) "
                "VALUES (?, ?, 1, 1, ?, ?) ON CONFLICT DO UPDATE SET message_count = message_count + 1, "
                "last_n = last_n + 1, first_at = coalesce(first_at, excluded.first_at), last_at = excluded.last_at "
                "RETURNING message_count, last_n", (project, session_id, now, now)).fetchall()[0]
            conn.execute("INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (project, session_id, n, role, content, now, meta))
        return Appended(f"{session_id}:{n}", count, count == 1)

    def messages(self, project: str, session_id: str, limit: int = 10, offset: int = 0) -> list[Message]:
        """The last ``limit`` messages, skipping ``offset`` from the end, oldest first."""
        if limit < 1:
            raise InvalidArgument("limit: give at least 1", field="limit")
        if offset < 0:
            raise InvalidArgument("offset: give 0 or more", field="offset")
        rows = self._query(
            "SELECT n, role, content, timestamp, metadata FROM messages WHERE project = ? AND session_id = ? "
            "ORDER BY n DESC LIMIT ? OFFSET ?", (project, session_id, limit, offset))
        return [Message(f"{session_id}:{n}", role, content, ts, json.loads(meta))
                for n, role, content, ts, meta in reversed(rows)]

    def all_messages(self, project: str, session_id: str) -> list[Message]:
        """Every buffered message of the session, oldest first (what consolidation archives)."""
        rows = self._query(
            "SELECT n, role, content, timestamp, metadata FROM messages WHERE project = ? AND session_id = ? "
            "ORDER BY n", (project, session_id))
        return [Message(f"{session_id}:{n}", role, content, ts, json.loads(meta))
                for n, role, content, ts, meta in rows]

    def find_message(self, project: str, session_id: str, key: str, value: str) -> str | None:
        """The id of the session's buffered message whose metadata ``key`` is ``value`` (reflect's
        idempotency mark), or None."""
        rows = self._query("SELECT n FROM messages WHERE project = ? AND session_id = ? "
                           "AND json_extract(metadata, '$.' || ?) = ? LIMIT 1", (project, session_id, key, value))
        return f"{session_id}:{rows[0][0]}" if rows else None

    def count(self, project: str, session_id: str) -> int:
        rows = self._query("SELECT message_count FROM sessions WHERE project = ? AND session_id = ?",
                           (project, session_id))
        return rows[0][0] if rows else 0

    def clear(self, project: str, session_id: str, through: int | None = None) -> int:
        """Drop a session's messages, or only those numbered up to ``through`` (consolidation clears exactly
        what it archived: a message that arrived meanwhile stays buffered); returns how many went. The
        session's metadata goes with its last message. ``last_n`` stays."""
        with self._tx() as conn:
            removed = conn.execute("DELETE FROM messages WHERE project = ? AND session_id = ? "
                                   "AND (? IS NULL OR n <= ?)", (project, session_id, through, through)).rowcount
            left, first_at, last_at = conn.execute(
                "SELECT count(*), min(timestamp), max(timestamp) FROM messages WHERE project = ? "
                "AND session_id = ?", (project, session_id)).fetchone()
            conn.execute("UPDATE sessions SET message_count = ?, first_at = ?, last_at = ?, metadata = "
                         "CASE WHEN ? > 0 THEN metadata ELSE '{}' END WHERE project = ? AND session_id = ?",
                         (left, first_at, last_at, left, project, session_id))
        return removed

    # -- session metadata -------------------------------------------------------------------------------
    def set_metadata(self, project: str, session_id: str, values: dict[str, str]) -> None:
        """Merge ``values`` into the session's metadata (the session need not hold messages yet); refused whole
        when the merged metadata would pass MAX_SESSION_METADATA_FIELDS or MAX_SESSION_METADATA_BYTES."""
        check_name(project, "project")
        check_name(session_id, "session_id")
        _check_string_map(values, "values")
        # the values alone first: an oversized write is refused before it waits for the lock or reads the row
        check_metadata_write(values)
        with self._tx() as conn:
            row = conn.execute("SELECT metadata FROM sessions WHERE project = ? AND session_id = ?",
                               (project, session_id)).fetchone()
            stored = json.loads(row[0]) if row else {}
            merged = {**stored, **values}
            if merged == stored:
                return  # nothing changes: no re-write
            text, size = _metadata_json(merged)
            _check_session_metadata(merged, size, "the session's metadata would hold")
            conn.execute("INSERT INTO sessions (project, session_id, metadata) VALUES (?, ?, ?) "
                         "ON CONFLICT DO UPDATE SET metadata = excluded.metadata", (project, session_id, text))

    def clear_metadata(self, project: str, session_id: str) -> bool:
        """Drop the session's metadata (its messages stay); whether there was any."""
        with self._tx() as conn:
            return conn.execute("UPDATE sessions SET metadata = '{}' WHERE project = ? AND session_id = ? "
                                "AND metadata != '{}'", (project, session_id)).rowcount > 0

    def metadata(self, project: str, session_id: str) -> dict[str, str]:
        rows = self._query("SELECT metadata FROM sessions WHERE project = ? AND session_id = ?",
                           (project, session_id))
        return json.loads(rows[0][0]) if rows else {}

    # -- listing ----------------------------------------------------------------------------------------
    def sessions(self, project: str | None = None) -> list[SessionInfo]:
        """Sessions holding messages, most recently active first."""
        rows = self._query(
            "SELECT project, session_id, message_count, first_at, last_at FROM sessions "
            "WHERE message_count > 0 AND (? IS NULL OR project = ?) ORDER BY last_at DESC", (project, project))
        return [SessionInfo(*row) for row in rows]

    def idle_sessions(self, older_than_seconds: float) -> list[SessionInfo]:
        """Sessions whose last message is older than the given age, longest idle first."""
        if older_than_seconds < 0:
            raise InvalidArgument("older_than_seconds: give 0 or more", field="older_than_seconds")
        cutoff = iso(self._now() - timedelta(seconds=older_than_seconds))
        rows = self._query(
            "SELECT project, session_id, message_count, first_at, last_at FROM sessions "
            "WHERE message_count > 0 AND last_at < ? ORDER BY last_at", (cutoff,))
        return [SessionInfo(*row) for row in rows]

    # -- session identity: active pointers, daily sequences, host generations ---------------------------
    def active_session(self, context: str, user: str) -> str | None:
        rows = self._query("SELECT session_id, claimed_at FROM active_pointers WHERE context = ? AND user = ?",
                           (context, user))
        return rows[0][0] if rows and not self._expired(rows[0][1]) else None

    def claim_active_session(self, context: str, user: str, session_id: str) -> str:
        """Point (context, user) at ``session_id`` unless a live pointer exists; returns the winner."""
        check_name(context, "context")
        check_name(user, "user_id")
        check_name(session_id, "session_id")
        with self._tx() as conn:
            row = conn.execute("SELECT session_id, claimed_at FROM active_pointers WHERE context = ? AND user = ?",
                               (context, user)).fetchone()
            if row and not self._expired(row[1]):
                return str(row[0])
            conn.execute("INSERT OR REPLACE INTO active_pointers VALUES (?, ?, ?, ?)",
                         (context, user, session_id, iso(self._now())))
        return session_id

    def point_active_session(self, context: str, user: str, session_id: str) -> None:
        """Point (context, user) at ``session_id`` whatever it pointed at (a claim that always wins)."""
        check_name(context, "context")
        check_name(user, "user_id")
        check_name(session_id, "session_id")
        with self._tx() as conn:
            conn.execute("INSERT OR REPLACE INTO active_pointers VALUES (?, ?, ?, ?)",
                         (context, user, session_id, iso(self._now())))

    def active_session_expiry(self, context: str, user: str) -> datetime | None:
        """When the live pointer of (context, user) expires; None without one."""
        rows = self._query("SELECT claimed_at FROM active_pointers WHERE context = ? AND user = ?", (context, user))
        if not rows or self._expired(rows[0][0]):
            return None
        return datetime.fromisoformat(rows[0][0]) + POINTER_TTL

    def clear_active_session(self, context: str, user: str, only_if: str | None = None) -> None:
        with self._tx() as conn:
            conn.execute("DELETE FROM active_pointers WHERE context = ? AND user = ? "
                         "AND (? IS NULL OR session_id = ?)", (context, user, only_if, only_if))

    def clear_pointers_to(self, session_id: str) -> int:
        """Drop every active pointer naming ``session_id`` (after it was consolidated)."""
        with self._tx() as conn:
            return conn.execute("DELETE FROM active_pointers WHERE session_id = ?", (session_id,)).rowcount

    def _expired(self, claimed_at: str) -> bool:
        return datetime.fromisoformat(claimed_at) + POINTER_TTL <= self._now()

    def next_sequence(self, user: str, date_str: str) -> int:
        with self._tx() as conn:
            return int(conn.execute("INSERT INTO sequences VALUES (?, ?, 1) ON CONFLICT DO UPDATE "
                                    "SET value = value + 1 RETURNING value", (user, date_str)).fetchall()[0][0])

    def sequence(self, user: str, date_str: str) -> int | None:
        """The day's last sequence number of ``user`` (None before the first), without taking one."""
        rows = self._query("SELECT value FROM sequences WHERE user = ? AND day = ?", (user, date_str))
        return int(rows[0][0]) if rows else None

    def generation(self, base_session_id: str) -> int:
        rows = self._query("SELECT value FROM generations WHERE base = ?", (base_session_id,))
        return rows[0][0] if rows else 0

    def bump_generation(self, base_session_id: str) -> int:
        with self._tx() as conn:
            return int(conn.execute("INSERT INTO generations VALUES (?, 1) ON CONFLICT DO UPDATE "
                                    "SET value = value + 1 RETURNING value", (base_session_id,)).fetchall()[0][0])
