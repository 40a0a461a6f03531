"""Session identity: which working-memory session a call belongs to.

In order: an explicit ``session_id``; without a user, the host's session (``KUMIHO_SESSION_ID``, moved to
a fresh ``:c<n>`` bucket each time it is consolidated); with a user, the (context, user) active pointer,
or else a newly minted ``<context>:user-<hash>:<YYYYMMDD>:<seq>`` that concurrent callers agree on.
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC

from appliance.errors import Conflict, InvalidArgument
from appliance.memory import records
from appliance.memory.working import Clock, WorkingMemory, utc_now

DEFAULT_CONTEXT = "personal"
MAX_CONTEXT = 200  # of a minted id "<context>:user-<hash>:<YYYYMMDD>:<seq>", at most 256 characters
DEFAULT_PROJECT = "CognitiveMemory"  # the graph's default project; owner of minted sessions' metadata


def host_session(wm: WorkingMemory, host_session_id: str) -> str:
    """The host's current bucket: its id, or ``<id>:c<n>`` once it has been consolidated n times."""
    n = wm.generation(host_session_id)
    return f"{host_session_id}:c{n}" if n > 0 else host_session_id


def resolve_session(wm: WorkingMemory, *, session_id: str | None, user_id: str | None, context: str | None,
                    host_session_id: str | None, clock: Clock = utc_now,
                    project: str = DEFAULT_PROJECT, mint: bool = True) -> tuple[str, str]:
    """(session id, source) with source one of argument, host-env, active-pointer, generated. With
    ``mint=False`` a user without an active session is a ``Conflict`` instead of a new, empty session."""
    if session_id is not None:
        if not session_id.strip():
            raise InvalidArgument("session_id: it is blank; pass a non-empty id or omit it", field="session_id")
        return session_id, "argument"
    if user_id is None:
        if host_session_id and host_session_id.strip():
            return host_session(wm, host_session_id), "host-env"
        raise InvalidArgument("no session identity available: pass session_id explicitly (and reuse the same "
                              "value) or user_id", field="session_id")
    if not user_id.strip():
        raise InvalidArgument("user_id: it is blank; pass a non-empty user id or omit it", field="user_id")
    context = context if context and context.strip() else DEFAULT_CONTEXT
    active = wm.active_session(context, user_id)
    if active:
        return active, "active-pointer"
    if not mint:
        raise Conflict(f"No messages to consolidate for user_id {user_id[:64]!r}: no active session in context "
                       f"{context[:64]!r} (nothing was buffered, or it was consolidated already)", field="user_id")
    if len(context) > MAX_CONTEXT:  # the minted id must fit the working memory's names
        raise InvalidArgument(f"context: at most {MAX_CONTEXT} characters (got {len(context)})", field="context")
    day = clock().astimezone(UTC).strftime("%Y%m%d")
    user_hash = hashlib.sha256(user_id.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    minted = f"{context}:user-{user_hash}:{day}:{wm.next_sequence(user_id, day):03d}"
    # Two callers may mint at once; the pointer claim is atomic, so both adopt whichever landed first.
    winner = wm.claim_active_session(context, user_id, minted)
    wm.set_metadata(project, winner, {"user_id": user_id, "context": context})
    return winner, "generated"


def after_consolidation(wm: WorkingMemory, session_id: str, host_session_id: str | None) -> None:
    """Retire a consolidated session: the next identity-less call, or the next call for its user, gets a
    fresh bucket instead of appending to the consolidated one."""
    if host_session_id and host_session_id.strip() and session_id == host_session(wm, host_session_id):
        # Two racing calls may bump twice and skip a :c<n>; either way the next bucket is fresh.
        wm.bump_generation(host_session_id)
    wm.clear_pointers_to(session_id)


RECALLED_KEPT = 20  # krefs a session remembers having recalled or cited (its summary links to them)


def recalled(wm: WorkingMemory, project: str, session_id: str) -> list[str]:
    """What the session recalled (ingest) or cited (reflect's ``source_krefs``), newest first."""
    return records.json_strings(wm.metadata(project, session_id).get("recalled"))


def remember_recalled(wm: WorkingMemory, project: str, session_id: str, found: list[str]) -> None:
    """Add ``found`` to what the session recalled, so its summary can link to it (newest first, bounded)."""
    merged = list(dict.fromkeys([*found, *recalled(wm, project, session_id)]))[:RECALLED_KEPT]
    wm.set_metadata(project, session_id, {"recalled": json.dumps(merged)})
