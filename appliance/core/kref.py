"""kref URIs: parse, validate and format ``kref://project/space…/item.kind?r=N&a=artifact``.

Pure syntax. Whether a kind-less short form (``kref://Revka/AgentPool/transport?r=4``) names a project, a
space or an item is decided against the graph (D8) by ``graph.resolve``; here it parses as a path with
``kind=None``. The canonical form is what ``format`` emits; ``parse(format(k)) == k`` always holds.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TypedDict

from appliance.core import names
from appliance.errors import InvalidArgument, InvalidKref

SCHEME = "kref://"
MAX_REVISION = 2**31 - 1  # revision numbers are int32 on the wire
MAX_KREF = 4096
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DIGITS = re.compile(r"[1-9][0-9]*")
_COMPACT_TIME = re.compile(r"(\d{4})(\d{2})(\d{2})(\d{2})(\d{2})")


@dataclass(frozen=True, slots=True)
class Kref:
    path: tuple[str, ...]
    kind: str | None = None
    revision: int | None = None
    artifact: str | None = None
    tag: str | None = None
    time: str | None = None

    @property
    def project(self) -> str:
        return self.path[0]

    @property
    def is_item(self) -> bool:
        return self.kind is not None

    @property
    def item_name(self) -> str:
        return self.path[-1]

    @property
    def space_segments(self) -> tuple[str, ...]:
        """Spaces below the project: between the project and the item, or all after the project."""
        return self.path[1:-1] if self.is_item else self.path[1:]

    @property
    def space_path(self) -> str:
        """The containing space of an item (``/P/a``), or the space path this kref names."""
        return "/" + "/".join(self.path[:-1] if self.is_item else self.path)

    def item(self) -> Kref:
        """The item (or path) part alone: no revision, artifact or selectors."""
        return Kref(self.path, self.kind)

    def with_revision(self, number: int, artifact: str | None = None) -> Kref:
        return replace(self, revision=number, artifact=artifact, tag=None, time=None)

    def __str__(self) -> str:
        return format_kref(self)


def format_kref(kref: Kref) -> str:
    text = SCHEME + "/".join(kref.path)
    if kref.kind is not None:
        text += "." + kref.kind
    params = []
    if kref.revision is not None:
        params.append(f"r={kref.revision}")
    if kref.artifact is not None:
        params.append(f"a={kref.artifact}")
    if kref.tag is not None:
        params.append(f"t={kref.tag}")
    if kref.time is not None:
        params.append(f"time={kref.time}")
    return text + ("?" + "&".join(params) if params else "")


def item_kref(project: str, spaces: tuple[str, ...] | list[str], name: str, kind: str) -> Kref:
    return Kref((project, *spaces, name), kind)


def parse(value: object, field: str = "kref") -> Kref:
    """Parse and validate a kref; raise ``InvalidKref`` naming ``field`` and the fix."""
    if not isinstance(value, str):
        raise InvalidKref(f"{field}: give a kref string such as kref://CognitiveMemory/notes/a.conversation",
                          field=field)
    if len(value) > MAX_KREF:
        raise InvalidKref(f"{field}: kref is longer than {MAX_KREF} characters", field=field)
    if _CONTROL.search(value):
        raise InvalidKref(f"{field}: kref contains a control character", field=field)
    if ".." in value:
        raise InvalidKref(f"{field}: kref may not contain '..'", field=field)
    if not value.startswith(SCHEME):
        raise InvalidKref(f"{field}: kref must start with 'kref://' (got {value[:40]!r})", field=field)
    body, _, query = value[len(SCHEME):].partition("?")
    segments = body.split("/")
    if not body or any(not seg for seg in segments):
        raise InvalidKref(
            f"{field}: kref path has an empty segment; write kref://project/space/item.kind", field=field
        )
    *parents, last = segments
    kind: str | None = None
    if "." in last:
        last, kind = last.split(".", 1)
    try:
        for index, seg in enumerate(parents):
            names.space_segment(seg, field) if index else names.project_name(seg, field)
        names.item_name(last, field) if kind is not None or parents else names.project_name(last, field)
        if kind is not None:
            names.kind(kind, field)
    except InvalidArgument as exc:
        raise InvalidKref(exc.message, field=field) from None
    if kind is not None and not parents:
        raise InvalidKref(f"{field}: an item kref needs a project: kref://project/item.kind", field=field)
    return Kref(tuple((*parents, last)), kind, **_parse_query(query, field))


class _Query(TypedDict, total=False):
    """The parameters of a kref's query string, named as ``Kref``'s fields."""

    revision: int
    artifact: str
    tag: str
    time: str


def _parse_query(query: str, field: str) -> _Query:
    found: dict[str, str] = {}
    if not query:
        return {}
    for part in query.split("&"):
        key, sep, val = part.partition("=")
        key = "t" if key == "tag" else key
        if key not in ("r", "a", "t", "time") or not sep or not val:
            raise InvalidKref(
                f"{field}: unknown or empty kref parameter {part!r}; use ?r=N, &a=artifact, ?t=tag or "
                "&time=YYYYMMDDHHMM",
                field=field,
            )
        if key in found:
            raise InvalidKref(f"{field}: kref parameter {key!r} is given twice", field=field)
        found[key] = val
    parsed: _Query = {}
    if "r" in found:
        if not _DIGITS.fullmatch(found["r"]) or int(found["r"]) > MAX_REVISION:
            raise InvalidKref(
                f"{field}: revision number {found['r']!r} must be a whole number from 1 to {MAX_REVISION}",
                field=field,
            )
        parsed["revision"] = int(found["r"])
    if "a" in found:
        if "r" not in found:
            raise InvalidKref(f"{field}: an artifact (&a=) needs a revision (?r=N) before it", field=field)
        try:
            parsed["artifact"] = names.artifact_name(found["a"], field)
        except InvalidArgument as exc:
            raise InvalidKref(exc.message, field=field) from None
    if "t" in found:
        parsed["tag"] = names.tag(found["t"], field)
    if "time" in found:
        parsed["time"] = found["time"]
        parse_time(found["time"], field)
    return parsed


def parse_time(value: str, field: str = "time") -> str:
    """A point in time as ``YYYYMMDDHHMM`` (the SDK's form: end of that minute) or ISO-8601; ISO UTC out."""
    match = _COMPACT_TIME.fullmatch(value)
    try:
        if match:
            y, mo, d, h, mi = (int(g) for g in match.groups())
            moment = datetime(y, mo, d, h, mi, 59, tzinfo=UTC)
        else:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=UTC)
    except ValueError:
        raise InvalidArgument(
            f"{field}: {value!r} is not a time; use YYYYMMDDHHMM or ISO-8601 such as 2026-03-27T10:15:30+00:00",
            field=field,
        ) from None
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def parse_space_path(value: object, field: str = "space_path") -> tuple[str, ...]:
    """A space path as ``/P/a/b``, ``P/a/b`` or ``kref://P/a/b`` → its segments, validated."""
    if not isinstance(value, str) or not value.strip("/"):
        raise InvalidArgument(f"{field}: give a space path such as /CognitiveMemory/notes", field=field)
    text = value[len(SCHEME):] if value.startswith(SCHEME) else value
    if _CONTROL.search(text) or ".." in text:
        raise InvalidArgument(f"{field}: space path may not contain control characters or '..'", field=field)
    segments = tuple(text.strip("/").split("/"))
    names.project_name(segments[0], field)
    for seg in segments[1:]:
        names.space_segment(seg, field)
    return segments


def space_path(segments: tuple[str, ...] | list[str]) -> str:
    return "/" + "/".join(segments)
