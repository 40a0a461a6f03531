"""The Memory API's entries (seed 001's ``MemoryEntry``) and how they live in the graph (D11). Pure.

One entry is one item of kind ``memory`` in its namespace's space (``appliance.memory.namespaces``), named by
Revka's slug of the key so that ``revka memory get <key>`` finds it. Storing a key again adds a revision to
the same item. Everything an entry says is in its current revision's metadata, all strings::

    key, content, category, session_id ("" when none), namespace, kind = "memory",
    type = the category (recall's per-type decay reads it), title = the key,
    importance ("0.0".."1.0"; absent when not given), superseded_by (the replacing entry's key; absent when
    none) with superseded_by_kref (its item's kref, which recall's supersession order compares),
    plus the names ``store_with_metadata`` adds (bounded, checked here).

The entry's ``timestamp`` is the revision's creation time and its ``id`` the item's id.
"""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from appliance.core import names, redaction
from appliance.errors import InvalidArgument

KIND = "memory"  # Revka's MEMORY_ITEM_KIND
CORE, DAILY, CONVERSATION = "core", "daily", "conversation"
BUILT_IN_CATEGORIES = (CORE, DAILY, CONVERSATION)

# Bounds of every field a client sends (docs/memory-api.md "Bounds" lists them).
MAX_KEY = 256  # characters
MAX_SLUG = 100  # characters of the item name taken from the key; longer keys get a hash suffix
MAX_SLUG_BYTES = 200  # UTF-8 bytes of that part (an item name is at most 255 bytes)
MAX_CONTENT = 100_000  # characters
MAX_CATEGORY = 64
MAX_SESSION_ID = 128
MAX_EXTRA = 32  # names store_with_metadata may add
MAX_EXTRA_NAME = 64
MAX_EXTRA_VALUE = 4_096
MAX_QUERY = 2_000
MAX_PROCEDURAL_MESSAGES = 100
HASH_CHARS = 8  # the collision suffix: "-" + 8 hex digits of the key's SHA-1

_CATEGORY = re.compile(r"[a-z0-9][a-z0-9_.-]*")
CATEGORY_RULE = "letters, digits, '_', '.' and '-', starting with a letter or digit, at most 64 characters"
_EXTRA_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.-]*")
# The layout's own names (and the writer's): store_with_metadata cannot overwrite them.
RESERVED_NAMES = frozenset({
    "key", "content", "category", "session_id", "namespace", "kind", "type", "title", "importance",
    "superseded_by", "superseded_by_kref", "schema", "memory_type", "summary", "space", "status",
})


@dataclass(frozen=True)
class Entry:
    """What get, list, recall and export answer (JSON: REST, ``kumiho-ce memory --json``, export)."""

    id: str
    key: str
    content: str
    category: str
    timestamp: str
    session_id: str | None
    namespace: str
    importance: float | None
    superseded_by: str | None
    kref: str
    score: float | None = None
    metadata: dict[str, str] = field(default_factory=dict)  # what store_with_metadata added

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class NewEntry:
    """A checked store request (credentials already redacted)."""

    key: str
    content: str
    category: str
    namespace: str
    session_id: str = ""
    importance: float | None = None
    superseded_by: str = ""  # the key of the entry that replaces this one
    supersedes: str = ""  # the key of the entry this one replaces
    extra: dict[str, str] = field(default_factory=dict)


# -- keys and item names -------------------------------------------------------------------------------------
def revka_slug(key: str) -> str:
    """Revka's ``slugify`` (src/gateway/kumiho_client.rs): trimmed, lower-case, every character that is not a
    letter, digit or "-" becomes "-", runs of "-" collapse, none at either end ("DB Host!" → "db-host")."""
    mapped = "".join(c if c.isalnum() or c == "-" else "-" for c in key.strip().lower())
    return "-".join(part for part in mapped.split("-") if part)


def _suffix(key: str) -> str:
    return hashlib.sha1(key.encode("utf-8", "surrogatepass")).hexdigest()[:HASH_CHARS]


def item_names(key: str) -> tuple[str, str]:
    """The item name an entry takes first (Revka's slug, what ``revka memory get`` looks for) and the one it
    takes when another key of the namespace holds that name already (the slug plus a hash of the key).
    A key whose slug is empty or too long has only the hashed name."""
    slug = revka_slug(key)
    short = slug[:MAX_SLUG]
    while len(short.encode()) > MAX_SLUG_BYTES:
        short = short[:-1]
    short = short.rstrip("-")
    hashed = f"{short or 'entry'}-{_suffix(key)}"
    return (short if short == slug and short else hashed), hashed


# -- checking what a client sends ----------------------------------------------------------------------------
def _text(value: object, field: str, limit: int, *, allow_empty: bool = True) -> str:
    if not isinstance(value, str):
        raise InvalidArgument(f"{field}: give a string", field=field)
    if len(value) > limit:
        raise InvalidArgument(f"{field}: at most {limit} characters (got {len(value)})", field=field)
    if not allow_empty and not value.strip():
        raise InvalidArgument(f"{field}: give a non-empty string", field=field)
    return value


def check_key(value: object, field: str = "key") -> str:
    """A key: 1..256 characters, no control characters, no credential (a key is kept as given)."""
    key = _text(value, field, MAX_KEY, allow_empty=False)
    if any(ord(c) < 32 or ord(c) == 127 for c in key):
        raise InvalidArgument(f"{field}: a key has no control characters (tabs, newlines)", field=field)
    redaction.refuse_credential(key, field)
    return key


def parse_category(value: object, field: str = "category") -> str:
    """core | daily | conversation | a custom label; lower-cased as Revka serialises it; at most 64 characters
    of letters, digits, '_', '.' and '-'."""
    text = _text(value, field, MAX_CATEGORY, allow_empty=False).strip().lower()
    if not is_category(text):
        raise InvalidArgument(f"{field}: core, daily, conversation or a custom label of {CATEGORY_RULE}",
                              field=field)
    return text


def is_category(text: str) -> bool:
    """Whether ``text`` is a category as stored (lower-case): the one rule for entries and for the settings that
    name categories (``[memory.policy] retention_days_by_category``)."""
    return len(text) <= MAX_CATEGORY and _CATEGORY.fullmatch(text) is not None


def check_importance(value: object, field: str = "importance") -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not 0.0 <= value <= 1.0:
        raise InvalidArgument(f"{field}: give a number from 0.0 to 1.0", field=field)
    return float(value)


def check_session_id(value: object, field: str = "session_id") -> str:
    if value is None:
        return ""
    text = _text(value, field, MAX_SESSION_ID)
    if any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise InvalidArgument(f"{field}: a session id has no control characters", field=field)
    redaction.refuse_credential(text, field)
    return text


def check_extra(value: object, field: str = "metadata") -> dict[str, str]:
    """What store_with_metadata adds: at most 32 names (a letter, then letters, digits, '_', '.', '-'; at most
    64 characters; none of the layout's own names) with string values of at most 4,096 characters."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidArgument(f"{field}: give an object of string names and string values", field=field)
    if len(value) > MAX_EXTRA:
        raise InvalidArgument(f"{field}: at most {MAX_EXTRA} names (got {len(value)})", field=field)
    checked = {}
    for name, text in value.items():
        where = f"{field}.{name}"
        if not isinstance(name, str) or len(name) > MAX_EXTRA_NAME or not _EXTRA_NAME.fullmatch(name):
            raise InvalidArgument(f"{field}: a name starts with a letter and has at most {MAX_EXTRA_NAME} letters, "
                                  "digits, '_', '.' and '-'", field=field)
        if name in RESERVED_NAMES:
            raise InvalidArgument(f"{where}: {name!r} is a field of the entry itself; give it as that field or "
                                  "choose another name", field=where)
        checked[name] = _text(text, where, MAX_EXTRA_VALUE)
    return names.metadata(checked, field)


def parse_time(value: object, field: str) -> datetime | None:
    """An RFC 3339 time with its offset ("2026-05-01T12:00:00Z"), in UTC; None when not given (an empty
    string is no time: refused)."""
    if value is None:
        return None
    parsed = None
    if isinstance(value, str) and len(value) <= 64:
        try:
            moment = datetime.fromisoformat(value.replace("z", "Z"))
            parsed = moment.astimezone(UTC) if moment.tzinfo else None
        except (ValueError, OverflowError):
            parsed = None
    if parsed is None:
        raise InvalidArgument(f"{field}: give an RFC 3339 time with its offset, e.g. 2026-05-01T12:00:00Z",
                              field=field)
    return parsed


def check_window(since: object, until: object) -> tuple[datetime | None, datetime | None]:
    start, end = parse_time(since, "since"), parse_time(until, "until")
    if start and end and start > end:
        raise InvalidArgument("until: give a time after since", field="until")
    return start, end


def write_filter(key: str, content: str) -> str | None:
    """Why the seed never stores this (cron output, heartbeat tasks, distilled chunks, empty text, the
    ``assistant_resp*`` auto-save keys), or None."""
    return redaction.skip_reason(content, key)


def new_entry(*, key: object, content: object, category: object, namespace: str, session_id: object = None,
              importance: object = None, superseded_by: object = None, supersedes: object = None,
              metadata: object = None) -> NewEntry:
    """A checked store request; credentials in the content and in added metadata become ``[secret]``."""
    checked_key = check_key(key)
    text = _text(content, "content", MAX_CONTENT)
    extra = check_extra(metadata)
    replaced_by = check_key(superseded_by, "superseded_by") if superseded_by not in (None, "") else ""
    replaces = check_key(supersedes, "supersedes") if supersedes not in (None, "") else ""
    if checked_key in (replaced_by, replaces):
        field_name = "superseded_by" if replaced_by == checked_key else "supersedes"
        raise InvalidArgument(f"{field_name}: an entry cannot replace itself; name another key", field=field_name)
    redacted, _ = redaction.redact_secrets(text)
    extra = {name: redaction.redact_secrets(value)[0] for name, value in extra.items()}
    return NewEntry(checked_key, redacted, parse_category(category), namespace, check_session_id(session_id),
                    check_importance(importance), replaced_by, replaces, extra)


# -- the metadata layout ---------------------------------------------------------------------------------------
def format_importance(value: float) -> str:
    return repr(round(value, 6))


def metadata_of(entry: NewEntry, superseded_by_kref: str = "") -> dict[str, str]:
    """The revision metadata of an entry (the writer adds schema, memory_type, summary and space)."""
    meta = {**entry.extra, "key": entry.key, "content": entry.content, "category": entry.category,
            "session_id": entry.session_id, "namespace": entry.namespace, "kind": KIND}
    if entry.importance is not None:
        meta["importance"] = format_importance(entry.importance)
    if entry.superseded_by:
        meta["superseded_by"] = entry.superseded_by
        meta["superseded_by_kref"] = superseded_by_kref
    return meta


def _float(text: str | None) -> float | None:
    try:
        value = float(text) if text not in (None, "") else None
    except ValueError:
        return None
    return value if value is not None and math.isfinite(value) else None


def entry_from(item_kref: str, item_name: str, meta: dict[str, str], created_at: str, namespace: str,
               score: float | None = None) -> Entry:
    """An entry from its item and current revision's metadata (entries another tool wrote show what they
    have: the item name as key, category core, as Revka's CLI shows them)."""
    extra = {k: v for k, v in meta.items() if k not in RESERVED_NAMES}
    return Entry(
        id=item_kref.removeprefix("kref://"), key=meta.get("key") or item_name, content=meta.get("content", ""),
        category=meta.get("category") or CORE, timestamp=created_at, session_id=meta.get("session_id") or None,
        namespace=meta.get("namespace") or namespace, importance=_float(meta.get("importance")),
        superseded_by=meta.get("superseded_by") or None, kref=item_kref,
        score=None if score is None else round(score, 6), metadata=extra)


def in_window(created_at: str, since: datetime | None, until: datetime | None) -> bool:
    """Whether a stored time (ISO, UTC) lies in [since, until]; an unreadable time lies in no window."""
    if since is None and until is None:
        return True
    try:
        moment = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    except ValueError:
        return False
    moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    return (since is None or moment >= since) and (until is None or moment <= until)


def procedural_content(messages: object, field: str = "messages") -> str:
    """store_procedural's messages ([{role, content}], at most 100) as one text, a line per message."""
    if not isinstance(messages, list) or not messages:
        raise InvalidArgument(f"{field}: give a non-empty list of {{role, content}} messages", field=field)
    if len(messages) > MAX_PROCEDURAL_MESSAGES:
        raise InvalidArgument(f"{field}: at most {MAX_PROCEDURAL_MESSAGES} messages (got {len(messages)})",
                              field=field)
    lines = []
    for index, message in enumerate(messages):
        where = f"{field}[{index}]"
        if not isinstance(message, dict):
            raise InvalidArgument(f"{where}: give an object with role and content", field=where)
        role = _text(message.get("role"), f"{where}.role", 32, allow_empty=False).strip()
        lines.append(f"{role}: {_text(message.get('content'), f'{where}.content', MAX_CONTENT)}")
    text = "\n".join(lines)
    if len(text) > MAX_CONTENT:
        raise InvalidArgument(f"{field}: the messages together have at most {MAX_CONTENT} characters", field=field)
    return text
