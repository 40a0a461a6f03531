"""Validation of names, tags, edge types and metadata: the rules of the data model, pure Python.

Every check raises ``InvalidArgument`` naming the field and saying what a valid value looks like.
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Mapping

from appliance.errors import InvalidArgument

# A path segment of a kref (project, space, item name): Unicode word characters, then word characters or
# "-". Dots are kept out: an item segment is split at its first "." into name and kind, and the SDK's
# lookup by kref breaks on a dot in a space name (reference §1.4).
_SEGMENT = re.compile(r"\w[\w-]*")
_KIND = re.compile(r"\w[\w.-]*")
_ARTIFACT = re.compile(r"[A-Za-z0-9._-]+")
_EDGE_TYPE = re.compile(r"[A-Z][A-Z0-9_]{0,49}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")

MAX_SEGMENT = 128
MAX_SEGMENT_BYTES = 255  # a file name's limit on Linux file systems
MAX_TAG = 128
MAX_METADATA_KEY = 256
MAX_METADATA_VALUE = 1_000_000
# Search filters with wildcards: a long pattern of many `*` took seconds to compile and match and stayed in
# fnmatch's cache (~40 MB each); real filters are a few segments with a wildcard or two.
MAX_PATTERN = 256
MAX_WILDCARDS = 8
_WILDCARDS = "*?["

RESERVED_KIND = "bundle"
LATEST = "latest"
PUBLISHED = "published"


def _segment(value: object, field: str, what: str, pattern: re.Pattern[str]) -> str:
    if not isinstance(value, str) or not value:
        raise InvalidArgument(f"{field}: give a non-empty {what}", field=field)
    if len(value) > MAX_SEGMENT:
        raise InvalidArgument(f"{field}: {what} is longer than {MAX_SEGMENT} characters", field=field)
    if len(value.encode("utf-8", "surrogatepass")) > MAX_SEGMENT_BYTES:  # it names a directory of artifacts
        raise InvalidArgument(f"{field}: {what} is longer than {MAX_SEGMENT_BYTES} bytes of UTF-8; use fewer "
                              "or plainer characters", field=field)
    if not pattern.fullmatch(value):
        raise InvalidArgument(
            f"{field}: {what} {value!r} may hold only letters, digits, '_' and '-'"
            + (" and '.'" if pattern is _KIND else "")
            + ", starting with a letter, digit or '_'",
            field=field,
        )
    return value


def project_name(value: object, field: str = "project") -> str:
    return _segment(value, field, "project name", _SEGMENT)


def space_segment(value: object, field: str = "space_name") -> str:
    return _segment(value, field, "space name", _SEGMENT)


def item_name(value: object, field: str = "item_name") -> str:
    return _segment(value, field, "item name", _SEGMENT)


def kind(value: object, field: str = "kind") -> str:
    return _segment(value, field, "kind", _KIND)


def artifact_name(value: object, field: str = "name") -> str:
    if not isinstance(value, str) or not _ARTIFACT.fullmatch(value) or ".." in value:
        raise InvalidArgument(
            f"{field}: artifact name {value!r} may hold only ASCII letters, digits, '.', '_' and '-' "
            "(and no '..')",
            field=field,
        )
    return value


def edge_type(value: object, field: str = "edge_type") -> str:
    if not isinstance(value, str) or not _EDGE_TYPE.fullmatch(value):
        raise InvalidArgument(
            f"{field}: edge type {value!r} must match ^[A-Z][A-Z0-9_]{{0,49}}$, e.g. DERIVED_FROM",
            field=field,
        )
    return value


def tag(value: object, field: str = "tag") -> str:
    if not isinstance(value, str) or not value.strip():
        raise InvalidArgument(f"{field}: give a non-empty tag", field=field)
    if value != value.strip() or _CONTROL.search(value) or len(value) > MAX_TAG:
        raise InvalidArgument(
            f"{field}: tag {value!r} must be at most {MAX_TAG} characters with no control characters "
            "and no surrounding spaces",
            field=field,
        )
    return value


def user_tag(value: object, field: str = "tag") -> str:
    """A tag a client may apply or remove: anything but the system-managed ``latest``."""
    checked = tag(value, field)
    if checked == LATEST:
        raise InvalidArgument(
            f"{field}: 'latest' is managed by the appliance and follows the newest revision; "
            "apply another tag",
            field=field,
        )
    return checked


def metadata(value: object, field: str = "metadata") -> dict[str, str]:
    """A flat string→string map; clients JSON-encode other values before sending them."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidArgument(f"{field}: give an object of string keys and string values", field=field)
    checked: dict[str, str] = {}
    for key, item in value.items():
        metadata_key(key, f"{field}.{key}")
        if not isinstance(item, str):
            raise InvalidArgument(
                f"{field}.{key}: metadata values are strings; JSON-encode {type(item).__name__} values",
                field=f"{field}.{key}",
            )
        if len(item) > MAX_METADATA_VALUE:
            raise InvalidArgument(
                f"{field}.{key}: value is longer than {MAX_METADATA_VALUE} characters; store large "
                "content as an artifact",
                field=f"{field}.{key}",
            )
        checked[key] = item
    return checked


def metadata_key(value: object, field: str = "key") -> str:
    if not isinstance(value, str) or not value or len(value) > MAX_METADATA_KEY or _CONTROL.search(value):
        raise InvalidArgument(
            f"{field}: metadata keys are non-empty strings of at most {MAX_METADATA_KEY} characters "
            "without control characters",
            field=field,
        )
    return value


def is_glob(text: str) -> bool:
    return any(ch in text for ch in _WILDCARDS)


def glob_filter(value: object, field: str) -> str:
    """A search filter that may be a glob: at most MAX_PATTERN characters and MAX_WILDCARDS wildcards."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{field}: give a string", field=field)
    if len(value) > MAX_PATTERN:
        raise InvalidArgument(f"{field}: at most {MAX_PATTERN} characters (got {len(value)}); use a shorter "
                              "prefix or pattern", field=field)
    wildcards = sum(value.count(ch) for ch in _WILDCARDS)
    if wildcards > MAX_WILDCARDS:
        raise InvalidArgument(f"{field}: at most {MAX_WILDCARDS} wildcards (*, ?, [) in a pattern (got "
                              f"{wildcards}); use fewer, e.g. 'project-*' or '*/characters/*'", field=field)
    return value


@functools.lru_cache(maxsize=64)  # small and bounded: fnmatch's own cache keeps 32,768 compiled patterns
def glob_regex(pattern: str) -> re.Pattern[str]:
    """The compiled form of a pattern checked by ``glob_filter`` (case-sensitive, whole string)."""
    return re.compile(fnmatch.translate(pattern))


def bounded_int(value: object, field: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgument(f"{field}: give a whole number from {low} to {high}", field=field)
    return value
