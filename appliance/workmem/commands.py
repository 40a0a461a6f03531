"""The Redis commands Kumiho's stock sidecar issues, on the appliance's working memory.

Its ``RedisMemoryBuffer`` (redis-py, RESP3 or RESP2) sends, beside the connection handshake (``HELLO`` with
``AUTH``, ``AUTH``, ``CLIENT SETINFO``, ``SELECT`` of a ``/db`` URL, ``PING``): ``RPUSH``/``LRANGE``/``LLEN``
on the messages list, ``HSET``/``HGETALL`` on the metadata hash, ``DEL`` of both and of the active-session
pointer, ``GET``/``SET … EX … [NX]`` of the pointer, ``INCR`` (redis-py sends ``INCRBY <key> 1``) and ``GET``
of the day's sequence and of the host generation, ``EXPIRE``/``TTL`` after them, and ``SCAN … MATCH <project's
sessions> COUNT 100``. Those are served here on the key layout of ``keys.py``; any other command or key is
answered with an error naming what is served.

TTLs follow the appliance's working memory, not Redis: a buffer, its metadata, sequences and generations do
not expire (``TTL`` says -1; ``EXPIRE`` answers 1 for a key that exists and changes nothing: sessions stay until
consolidated or cleared, and idle ones are consolidated by the appliance); an active-session pointer lives 24
hours from when it was set (``TTL`` counts that down; ``EX`` is accepted and not applied).
"""

from __future__ import annotations

import hmac
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

from appliance import __version__
from appliance.errors import KumihoError
from appliance.memory.working import WorkingMemory, check_name
from appliance.workmem import buffer, keys
from appliance.workmem.keys import ActiveSession, Generation, Messages, Metadata, Sequence
from appliance.workmem.resp import OK, Error, Reply, Status

TypedKey = TypeVar("TypedKey", Messages, Metadata)

log = logging.getLogger(__name__)

DATA_COMMANDS = ("GET", "SET", "DEL", "INCR", "INCRBY", "EXPIRE", "TTL", "RPUSH", "LRANGE", "LLEN", "HSET", "HGETALL",
                 "SCAN")
CONNECTION_COMMANDS = ("PING", "ECHO", "HELLO", "AUTH", "SELECT", "CLIENT", "QUIT")
SCAN_PAGE = 1000  # keys per SCAN reply (COUNT is a hint, as in Redis; a project's sessions usually fit one)
WRONGTYPE = Error("WRONGTYPE Operation against a key holding the wrong kind of value")
NOT_INTEGER = "value is not an integer or out of range"
# In every NOAUTH refusal: how `kumiho-ce doctor` knows the listener is the appliance's before it sends the token
NOAUTH_MARK = "kumiho-ce's working memory"
_ids = itertools.count(1)


class CommandError(Exception):
    """An error reply (its text starts with the code)."""


@dataclass
class Connection:
    """One client's state: its protocol version (2 until ``HELLO 3``), whether it has authenticated, its name."""

    token: bytes | None  # the appliance token when it is required, else None (any AUTH is accepted)
    protocol: int = 2
    authenticated: bool = False
    name: str | None = None
    closing: bool = False
    id: int = field(default_factory=lambda: next(_ids))

    def __post_init__(self) -> None:
        self.authenticated = self.token is None

    def check_token(self, password: bytes) -> None:
        if self.token is not None and not hmac.compare_digest(password, self.token):
            raise CommandError("WRONGPASS the password is not the appliance's token (the file token in the data "
                               "directory, or the api_token setting)")
        self.authenticated = True


def _text(value: bytes, what: str) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        raise CommandError(f"ERR {what} is not UTF-8") from None


def _int(value: bytes) -> int:
    try:
        return int(value)
    except ValueError:
        raise CommandError(f"ERR {NOT_INTEGER}") from None


def _key(value: bytes) -> keys.Key:
    try:
        return keys.parse(_text(value, "the key"))
    except keys.UnservedKey as exc:
        raise CommandError(f"ERR {exc}") from None


def _typed_key(value: bytes, kind: type[TypedKey]) -> TypedKey:
    """The key, which must name a ``kind`` (the messages list, the metadata hash); WRONGTYPE otherwise."""
    key = _key(value)
    if not isinstance(key, kind):
        raise CommandError(WRONGTYPE.text)
    return key


def _arity(args: list[bytes], low: int, high: int | None = None) -> None:
    if len(args) - 1 < low or (high is not None and len(args) - 1 > high):
        name = args[0].decode("utf-8", "replace").lower()
        raise CommandError(f"ERR wrong number of arguments for '{name}' command")


class Commands:
    """Runs one command of one connection on the working memory (a blocking call: SQLite, a few µs)."""

    def __init__(self, working: WorkingMemory, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.working = working
        self._clock = clock
        self._table: dict[str, Callable[[Connection, list[bytes]], Reply]] = {
            "PING": self._ping, "ECHO": self._echo, "HELLO": self._hello, "AUTH": self._auth,
            "SELECT": self._select, "CLIENT": self._client, "QUIT": self._quit,
            "GET": self._get, "SET": self._set, "DEL": self._del, "INCR": self._incr, "INCRBY": self._incrby,
            "EXPIRE": self._expire, "TTL": self._ttl, "RPUSH": self._rpush, "LRANGE": self._lrange,
            "LLEN": self._llen, "HSET": self._hset, "HGETALL": self._hgetall, "SCAN": self._scan}

    def run(self, conn: Connection, args: list[bytes]) -> Reply:
        name = args[0].decode("utf-8", "replace").upper()
        handler = self._table.get(name)
        if handler is None:
            shown = name if len(name) <= 40 else name[:37] + "..."
            return Error(f"ERR unknown command '{shown}': this listener serves Kumiho's working-memory buffer "
                         f"only: {' '.join(DATA_COMMANDS)} (and {' '.join(CONNECTION_COMMANDS)})")
        if not conn.authenticated and name not in ("AUTH", "HELLO", "QUIT"):
            return Error(f"NOAUTH Authentication required: {NOAUTH_MARK} requires the appliance's token; put it in "
                         "the URL (redis://:<token>@127.0.0.1:<port>)")
        try:
            return handler(conn, args)
        except CommandError as exc:
            return Error(str(exc))
        except KumihoError as exc:  # the working memory's own refusals: bad names, a full session
            return Error(f"ERR {exc.message}")

    # -- connection ------------------------------------------------------------------------------------
    def _ping(self, conn: Connection, args: list[bytes]) -> Reply:
        _arity(args, 0, 1)
        return args[1] if len(args) == 2 else Status("PONG")

    def _echo(self, conn: Connection, args: list[bytes]) -> Reply:
        _arity(args, 1, 1)
        return args[1]

    def _hello(self, conn: Connection, args: list[bytes]) -> Reply:
        protocol = conn.protocol
        rest = args[1:]
        if rest:
            protocol = _int(rest.pop(0))
            if protocol not in (2, 3):
                raise CommandError("NOPROTO unsupported protocol version: give 2 or 3")
        while rest:
            option = rest.pop(0).upper()
            if option == b"AUTH" and len(rest) >= 2:
                conn.check_token(rest[1])
                del rest[:2]
            elif option == b"SETNAME" and rest:
                conn.name = _text(rest.pop(0), "the client name")
            else:
                raise CommandError("ERR syntax error in HELLO: HELLO [2|3 [AUTH <user> <token>] [SETNAME <name>]]")
        if not conn.authenticated:
            raise CommandError("NOAUTH HELLO must be called with the client already authenticated, otherwise the "
                               f"HELLO <proto> AUTH <user> <token> option can be used ({NOAUTH_MARK} requires the "
                               "appliance's token)")
        conn.protocol = protocol
        return {"server": "kumiho-ce", "version": __version__, "proto": protocol, "id": conn.id,
                "mode": "standalone", "role": "master", "modules": []}

    def _auth(self, conn: Connection, args: list[bytes]) -> Reply:
        _arity(args, 1, 2)
        conn.check_token(args[-1])  # AUTH <token> or AUTH <user> <token>: the user name is not checked
        return OK

    def _select(self, conn: Connection, args: list[bytes]) -> Reply:
        _arity(args, 1, 1)
        if _int(args[1]) != 0:
            raise CommandError("ERR DB index is out of range: the working memory is database 0 only (use a URL "
                               "without /<db>, or /0)")
        return OK

    def _client(self, conn: Connection, args: list[bytes]) -> Reply:
        _arity(args, 1)
        sub = args[1].upper()
        if sub == b"SETINFO" and len(args) == 4:
            return OK
        if sub == b"SETNAME" and len(args) == 3:
            conn.name = _text(args[2], "the client name")
            return OK
        if sub == b"GETNAME" and len(args) == 2:
            return conn.name
        if sub == b"ID" and len(args) == 2:
            return conn.id
        raise CommandError("ERR CLIENT: only SETINFO, SETNAME, GETNAME and ID are served")

    def _quit(self, conn: Connection, args: list[bytes]) -> Reply:
        conn.closing = True
        return OK

    # -- strings and counters: active-session pointers, daily sequences, generations ---------------------
    def _get(self, conn: Connection, args: list[bytes]) -> Reply:
        _arity(args, 1, 1)
        key = _key(args[1])
        if isinstance(key, ActiveSession):
            return self.working.active_session(key.context, key.user)
        if isinstance(key, Sequence):
            value = self.working.sequence(key.user, key.day)
            return None if value is None else str(value)
        if isinstance(key, Generation):
            generation = self.working.generation(key.base_session_id)
            return str(generation) if generation else None
        return WRONGTYPE

    def _set(self, conn: Connection, args: list[bytes]) -> Reply:
        _arity(args, 2)
        key = _key(args[1])
        if not isinstance(key, ActiveSession):
            raise CommandError("ERR SET serves active_session keys only (the sidecar's other keys are lists, hashes "
                               "and counters)")
        session_id = check_name(_text(args[2], "the value"), "session_id")
        options = [a.upper() for a in args[3:]]
        nx = False
        while options:
            option = options.pop(0)
            if option in (b"EX", b"PX") and options:
                if _int(options.pop(0)) <= 0:
                    raise CommandError("ERR invalid expire time in 'set' command")
            elif option == b"NX":
                nx = True
            else:
                raise CommandError("ERR syntax error: SET <key> <session id> [EX <seconds>|PX <ms>] [NX] is served")
        if nx:
            winner = self.working.claim_active_session(key.context, key.user, session_id)
            return OK if winner == session_id else None
        self.working.point_active_session(key.context, key.user, session_id)
        return OK

    def _incr(self, conn: Connection, args: list[bytes]) -> Reply:
        _arity(args, 1, 1)
        key = _key(args[1])
        if isinstance(key, Sequence):
            check_name(key.user, "user")
            return self.working.next_sequence(key.user, key.day)
        if isinstance(key, Generation):
            check_name(key.base_session_id, "base_session_id")
            return self.working.bump_generation(key.base_session_id)
        if isinstance(key, ActiveSession):
            return Error(f"ERR {NOT_INTEGER}")
        return WRONGTYPE

    def _incrby(self, conn: Connection, args: list[bytes]) -> Reply:
        """redis-py sends ``INCR`` as ``INCRBY <key> 1``; the counters here only count up by one."""
        _arity(args, 2, 2)
        if _int(args[2]) != 1:
            raise CommandError("ERR INCRBY: sequences and generations count up by 1 (INCRBY <key> 1, or INCR)")
        return self._incr(conn, args[:2])

    def _del(self, conn: Connection, args: list[bytes]) -> Reply:
        _arity(args, 1)
        parsed = [_key(a) for a in args[1:]]  # every key checked before any is deleted
        if any(isinstance(k, (Sequence, Generation)) for k in parsed):
            raise CommandError("ERR DEL serves messages, metadata and active_session keys (sequences and "
                               "generations are kept)")
        removed = sum(self._exists(k) for k in dict.fromkeys(parsed))  # counted first: a list takes its hash along
        for key in parsed:
            if isinstance(key, Messages):
                self.working.clear(key.project, key.session_id)
            elif isinstance(key, Metadata):
                self.working.clear_metadata(key.project, key.session_id)
            elif isinstance(key, ActiveSession):
                self.working.clear_active_session(key.context, key.user)
        return removed

    # -- expiry ----------------------------------------------------------------------------------------
    def _exists(self, key: keys.Key) -> bool:
        if isinstance(key, Messages):
            return self.working.count(key.project, key.session_id) > 0
        if isinstance(key, Metadata):
            return bool(self.working.metadata(key.project, key.session_id))
        if isinstance(key, ActiveSession):
            return self.working.active_session(key.context, key.user) is not None
        if isinstance(key, Sequence):
            return self.working.sequence(key.user, key.day) is not None
        return self.working.generation(key.base_session_id) > 0

    def _expire(self, conn: Connection, args: list[bytes]) -> Reply:
        _arity(args, 2, 3)
        _int(args[2])
        return int(self._exists(_key(args[1])))  # nothing is applied: see the module's docstring

    def _ttl(self, conn: Connection, args: list[bytes]) -> Reply:
        _arity(args, 1, 1)
        key = _key(args[1])
        if isinstance(key, ActiveSession):
            expiry = self.working.active_session_expiry(key.context, key.user)
            return -2 if expiry is None else max(0, int((expiry - self._clock()).total_seconds()))
        return -1 if self._exists(key) else -2

    # -- the messages list -----------------------------------------------------------------------------
    def _rpush(self, conn: Connection, args: list[bytes]) -> Reply:
        _arity(args, 2)
        key = _typed_key(args[1], Messages)
        if len(args) > 3:
            raise CommandError("ERR RPUSH takes one message per call here (RPUSH <key> <message JSON>)")
        message = buffer.parse_pushed(_text(args[2], "the message"))
        return self.working.append(key.project, key.session_id, message.role, message.content,
                                   message.metadata).message_count

    def _lrange(self, conn: Connection, args: list[bytes]) -> Reply:
        _arity(args, 3, 3)
        key = _typed_key(args[1], Messages)
        start, stop = _int(args[2]), _int(args[3])
        total = self.working.count(key.project, key.session_id)
        start = max(0, start + total if start < 0 else start)
        stop = min(total - 1, stop + total if stop < 0 else stop)
        if start > stop:
            return []
        found = self.working.messages(key.project, key.session_id, limit=stop - start + 1, offset=total - 1 - stop)
        return [buffer.message_json(m) for m in found]

    def _llen(self, conn: Connection, args: list[bytes]) -> Reply:
        _arity(args, 1, 1)
        key = _typed_key(args[1], Messages)
        return self.working.count(key.project, key.session_id)

    # -- the metadata hash -----------------------------------------------------------------------------
    def _hset(self, conn: Connection, args: list[bytes]) -> Reply:
        _arity(args, 3)
        if len(args) % 2:
            raise CommandError("ERR wrong number of arguments for 'hset' command")
        key = _typed_key(args[1], Metadata)
        pairs = args[2:]
        values = {_text(pairs[i], "a field"): _text(pairs[i + 1], "a value") for i in range(0, len(pairs), 2)}
        before = self.working.metadata(key.project, key.session_id)
        self.working.set_metadata(key.project, key.session_id, buffer.redacted_strings(values))
        return sum(1 for name in values if name not in before)

    def _hgetall(self, conn: Connection, args: list[bytes]) -> Reply:
        _arity(args, 1, 1)
        key = _typed_key(args[1], Metadata)
        return dict(self.working.metadata(key.project, key.session_id).items())

    # -- listing sessions ------------------------------------------------------------------------------
    def _scan(self, conn: Connection, args: list[bytes]) -> Reply:
        _arity(args, 1)
        cursor = _int(args[1])
        if cursor < 0:
            raise CommandError("ERR invalid cursor")
        pattern: str | None = None
        lists = True
        options = args[2:]
        while options:
            option = options.pop(0).upper()
            if option == b"MATCH" and options:
                pattern = _text(options.pop(0), "the pattern")
            elif option == b"COUNT" and options:
                if _int(options.pop(0)) < 1:
                    raise CommandError("ERR syntax error: COUNT is at least 1")
            elif option == b"TYPE" and options:
                lists = options.pop(0).lower() == b"list"
            else:
                raise CommandError("ERR syntax error: SCAN <cursor> MATCH <pattern> [COUNT <n>] [TYPE <type>]")
        if pattern is None:
            raise CommandError(f"ERR SCAN needs MATCH {keys.SCAN_PATTERN}: only a project's sessions are listed")
        try:
            wanted = keys.session_pattern(pattern)
        except keys.UnservedKey as exc:
            raise CommandError(f"ERR {exc}") from None
        sessions = [s.session_id for s in self.working.sessions(wanted.project)]  # most recently active first
        found = wanted.keys(sessions) if lists else []
        page = found[cursor:cursor + SCAN_PAGE]
        following = cursor + SCAN_PAGE
        return [str(following if following < len(found) else 0), list(page)]
