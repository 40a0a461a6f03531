"""Query parameters the console routes share: repeatable filters with a bounded count and length, RFC 3339
times. Each refusal names its parameter and the fix."""

from __future__ import annotations

from datetime import UTC, datetime

from appliance.errors import InvalidArgument
from appliance.graph._support import iso

MAX_FILTER_VALUES = 20  # values of one repeatable filter (kind, memory_type, tag, space)
FILTER_VALUE_MAX = 256  # characters of one of them


def filter_values(values: list[str] | None, field: str) -> tuple[str, ...]:
    """The distinct non-blank values, in order; at most MAX_FILTER_VALUES of at most FILTER_VALUE_MAX
    characters each."""
    found = tuple(dict.fromkeys(v.strip() for v in values or () if v.strip()))
    if len(found) > MAX_FILTER_VALUES:
        raise InvalidArgument(f"{field}: give at most {MAX_FILTER_VALUES} values", field=field)
    if any(len(v) > FILTER_VALUE_MAX for v in found):
        raise InvalidArgument(f"{field}: each value is at most {FILTER_VALUE_MAX} characters", field=field)
    return found


def moment(value: str | None, field: str) -> str:
    """An RFC 3339 time as the graph stores times (UTC ISO with microseconds), or "" when not given."""
    if not value:
        return ""
    try:
        parsed: datetime | None = datetime.fromisoformat(value.replace("z", "Z"))
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise InvalidArgument(f"{field}: give an RFC 3339 time with its offset, e.g. 2026-05-01T12:00:00Z",
                              field=field)
    return iso(parsed.astimezone(UTC))
