"""Query parameters the console routes share: repeatable filters with a bounded count and length, RFC 3339
times. Each refusal names its parameter and the fix."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from litestar.params import QueryParameter
from msgspec import Meta

from appliance.core import names
from appliance.errors import InvalidArgument
from appliance.graph._support import iso

# The filters' bounds, as the MCP tools' (operations/fields.py): how many values, how long each.
MAX_SPACES, MAX_SPACE_PATH = 16, 512
MAX_KINDS, MAX_MEMORY_TYPES, MAX_MEMORY_TYPE = 16, 16, 64
MAX_TAGS = 8


def values_parameter(limit: int, length: int, what: str) -> QueryParameter:
    return QueryParameter(
        max_items=limit, description=f"{what}; repeat the parameter for several (any of them matches): at most "
                                     f"{limit}, each at most {length} characters",
        schema_extra={"items": {"type": "string", "maxLength": length}})  # Litestar would not write the length


# Tuples, not optional lists: the schema then says "an array of strings", which a repeated query parameter is
# (an optional list reads "an array or null", and one value on the wire is neither). msgspec checks each length.
SpacePaths = tuple[Annotated[str, Meta(max_length=MAX_SPACE_PATH)], ...]
Kinds = tuple[Annotated[str, Meta(max_length=names.MAX_SEGMENT)], ...]
MemoryTypes = tuple[Annotated[str, Meta(max_length=MAX_MEMORY_TYPE)], ...]
Tags = tuple[Annotated[str, Meta(max_length=names.MAX_TAG)], ...]


def filter_values(values: tuple[str, ...] | list[str] | None) -> tuple[str, ...]:
    """The distinct non-blank values, stripped, in order (their count and lengths are bounded by the query
    parameter, see values_parameter)."""
    return tuple(dict.fromkeys(v.strip() for v in values or () if v.strip()))


def time_parameter(description: str) -> QueryParameter:
    """An RFC 3339 time; the schema says ``date-time`` so that clients (and schema fuzzers) know."""
    return QueryParameter(description=description, max_length=64, schema_extra={"format": "date-time"})


def moment(value: str | None, field: str) -> str:
    """An RFC 3339 time as the graph stores times (UTC ISO with microseconds), or "" when not given."""
    if not value:
        return ""
    try:
        parsed = datetime.fromisoformat(value.replace("z", "Z"))
        in_utc = parsed.astimezone(UTC) if parsed.tzinfo else None
    except (ValueError, OverflowError):  # not a time, or out of range once moved to UTC (past year 1 or 9999)
        in_utc = None
    if in_utc is None:
        raise InvalidArgument(f"{field}: give an RFC 3339 time with its offset, between years 0001 and 9999 once in "
                              "UTC, e.g. 2026-05-01T12:00:00Z", field=field)
    return iso(in_utc)
