"""The key layout of Kumiho's working-memory buffer, parsed into what the appliance's working memory addresses.

Kumiho's stock sidecar (its ``RedisMemoryBuffer``) keeps one conversation under two keys and three kinds of
bookkeeping beside them, all under ``kumiho:memory`` with an optional tenant segment after it:

* ``kumiho:memory[:<tenant>]:<project>:sessions:<session_id>:messages`` — the list of messages
* ``kumiho:memory[:<tenant>]:<project>:sessions:<session_id>:metadata`` — the session's metadata hash
* ``kumiho:memory[:<tenant>]:active_session:<context>:<user>`` — the user's current session id
* ``kumiho:memory[:<tenant>]:session_seq:<user>:<YYYYMMDD>`` — the day's session counter
* ``kumiho:memory[:<tenant>]:session_gen:<base_session_id>`` — the host session's consolidation generation

Session ids carry colons (``<context>:user-<hash>:<YYYYMMDD>:<seq>``), project and tenant names do not. The
appliance is single-tenant: the tenant segment is accepted and not stored, so a sidecar with a cached cloud
tenant and one without address the same sessions (those the appliance's own tools see).
"""

from __future__ import annotations

from dataclasses import dataclass

from appliance.core import names

PREFIX = "kumiho:memory:"
MAX_KEY_BYTES = 1024
BOOKKEEPING = ("active_session", "session_seq", "session_gen")
SERVED_KEYS = ("kumiho:memory[:<tenant>]:<project>:sessions:<session_id>:messages|metadata, "
               "kumiho:memory[:<tenant>]:active_session:<context>:<user>, "
               "kumiho:memory[:<tenant>]:session_seq:<user>:<YYYYMMDD>, "
               "kumiho:memory[:<tenant>]:session_gen:<base_session_id>")


class UnservedKey(ValueError):
    """A key or pattern outside Kumiho's working-memory layout."""


@dataclass(frozen=True, slots=True)
class Messages:
    project: str
    session_id: str


@dataclass(frozen=True, slots=True)
class Metadata:
    project: str
    session_id: str


@dataclass(frozen=True, slots=True)
class ActiveSession:
    context: str
    user: str


@dataclass(frozen=True, slots=True)
class Sequence:
    user: str
    day: str


@dataclass(frozen=True, slots=True)
class Generation:
    base_session_id: str


Key = Messages | Metadata | ActiveSession | Sequence | Generation


def unserved(key: str) -> UnservedKey:
    shown = key if len(key) <= 120 else key[:117] + "..."
    return UnservedKey(f"key '{shown}' is not a Kumiho working-memory key; served: {SERVED_KEYS}")


def parse(key: str) -> Key:
    """What ``key`` names, or UnservedKey naming the served layout."""
    if len(key.encode("utf-8", "surrogatepass")) > MAX_KEY_BYTES or not key.startswith(PREFIX):
        raise unserved(key)
    segments = key[len(PREFIX):].split(":")
    if segments[0] in BOOKKEEPING:
        parsed = _bookkeeping(segments[0], segments[1:])
    elif len(segments) >= 4 and segments[1] == "sessions":
        parsed = _session(segments[0], segments[2:])
    elif len(segments) >= 2 and segments[1] in BOOKKEEPING:
        parsed = _bookkeeping(segments[1], segments[2:])
    elif len(segments) >= 5 and segments[2] == "sessions":
        parsed = _session(segments[1], segments[3:])
    else:
        parsed = None
    if parsed is None:
        raise unserved(key)
    return parsed


def _session(project: str, tail: list[str]) -> Key | None:
    session_id = ":".join(tail[:-1])
    if not project or not session_id:
        return None
    if tail[-1] == "messages":
        return Messages(project, session_id)
    if tail[-1] == "metadata":
        return Metadata(project, session_id)
    return None


def _bookkeeping(kind: str, rest: list[str]) -> Key | None:
    if kind == "active_session" and len(rest) >= 2 and rest[0] and all(rest[1:]):
        return ActiveSession(rest[0], ":".join(rest[1:]))
    if kind == "session_seq" and len(rest) >= 2 and all(rest):
        return Sequence(":".join(rest[:-1]), rest[-1])
    if kind == "session_gen" and rest and all(rest):
        return Generation(":".join(rest))
    return None


@dataclass(frozen=True, slots=True)
class SessionPattern:
    """A SCAN pattern over one project's sessions: a literal ``kumiho:memory[:<tenant>]:<project>:sessions:``
    head and a glob over ``<session_id>:messages``. Only the messages lists are listed (one key per session
    holding messages): that is what the sidecar's listing asks for."""

    head: str
    project: str
    tail_glob: str

    def keys(self, session_ids: list[str]) -> list[str]:
        # Redis negates a class with ^, fnmatch with !; glob_regex's small cache, not fnmatch's 32,768 entries
        glob = names.glob_regex(self.tail_glob.replace("[^", "[!"))
        return [self.head + name for name in (f"{sid}:messages" for sid in session_ids) if glob.fullmatch(name)]


SCAN_PATTERN = "kumiho:memory[:<tenant>]:<project>:sessions:<glob>"
GLOB_FIELD = "MATCH (the glob after ':sessions:')"


def session_pattern(pattern: str) -> SessionPattern:
    marker = pattern.find(":sessions:")
    head = pattern[:marker + len(":sessions:")] if marker >= 0 else ""
    owner = head[len(PREFIX):-len(":sessions:")].split(":") if head.startswith(PREFIX) else []
    if not owner or len(owner) > 2 or not all(owner) or any(c in head for c in "*?[]\\"):
        shown = pattern if len(pattern) <= 120 else pattern[:117] + "..."
        raise UnservedKey(f"SCAN MATCH '{shown}': give {SCAN_PATTERN} (the project named literally); that is the "
                        "listing of sessions this listener serves")
    # bounded before anything compiles it: a long glob of many '*' took seconds on the listener's one loop
    tail = names.glob_filter(pattern[len(head):], GLOB_FIELD)
    return SessionPattern(head, owner[-1], tail)
