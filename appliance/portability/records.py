"""The export format's records (docs/export-format.md): graph rows → records, records → graph rows, and the
check of one line's shape and bounds. Pure: no store, no files.

A record is a JSON object with a ``type`` and Kumiho's field names (``kref``, ``item_name``, ``kind``,
``metadata``, ``created_at``…). Every field is present (``null`` where there is no value); fields are written
in a fixed order, metadata keys sorted, so the same graph always gives the same bytes.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from appliance.core import kref as krefs
from appliance.core import names
from appliance.errors import InvalidArgument, KumihoError

FORMAT = "kumiho-ce-export"
VERSION = 1
MAX_LINE_BYTES = 32 * 1024 * 1024  # one record; an inlined artifact file is the largest
MAX_INLINE_FILE_BYTES = 16 * 1024 * 1024  # an artifact file above this is described, not carried
MAX_TEXT = 4096  # authors, usernames, locations, routing keys, file paths, ids
MAX_DESCRIPTION = 65_536
MAX_STAMP = 64
TYPES = ("project", "space", "item", "revision", "tag", "artifact", "edge", "bundle_member", "event")

Record = dict[str, Any]
Row = dict[str, Any]

HEADER_FIELDS = ("format", "version", "exported_at", "appliance_version", "schema_version", "project",
                 "artifact_file_max_bytes")


def encode(record: Record) -> str:
    """One line of the file (with its newline): compact JSON, non-ASCII kept as UTF-8."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


def _meta(text: str | None) -> dict[str, str]:
    return dict(sorted(json.loads(text).items())) if text else {}


def _id(kref: str) -> str:
    return kref[len(krefs.SCHEME):]


def _kref(node_id: str) -> str:
    return krefs.SCHEME + node_id


def revision_number(revision_id: str) -> int:
    return int(revision_id.rsplit("?r=", 1)[1])


# -- graph rows → records (export, and the import's view of what the store holds) --------------------
def project_record(n: Row) -> Record:
    return {"type": "project", "kref": _kref(n["name"]), "name": n["name"], "project_id": n["project_id"],
            "description": n["description"], "created_at": n["created_at"], "updated_at": n["updated_at"],
            "deprecated": bool(n["deprecated"]), "allow_public": bool(n["allow_public"]),
            "metadata": _meta(n["metadata"])}


def space_record(n: Row) -> Record:
    return {"type": "space", "kref": _kref(n["path"][1:]), "path": n["path"], "name": n["name"],
            "project": n["project"], "parent_path": n["parent"] or None, "created_at": n["created_at"],
            "modified_at": n["modified_at"], "author": n["author"], "username": n["username"],
            "metadata": _meta(n["metadata"])}


def item_record(n: Row) -> Record:
    return {"type": "item", "kref": _kref(n["id"]), "project": n["project"], "space_path": n["space"],
            "item_name": n["name"], "kind": n["kind"], "created_at": n["created_at"],
            "modified_at": n["modified_at"], "author": n["author"], "username": n["username"],
            "metadata": _meta(n["metadata"]), "deprecated": bool(n["deprecated"]),
            "next_revision_number": int(n["next_number"])}


def revision_record(n: Row) -> Record:
    return {"type": "revision", "kref": _kref(n["id"]), "item_kref": _kref(n["item"]), "number": int(n["number"]),
            "created_at": n["created_at"], "modified_at": n["modified_at"], "author": n["author"],
            "username": n["username"], "metadata": _meta(n["metadata"]), "deprecated": bool(n["deprecated"]),
            "default_artifact": n["default_artifact"] or None}


def tag_record(item: str, span: Row) -> Record:
    return {"type": "tag", "item_kref": _kref(item), "revision_kref": _kref(span["revision"]), "tag": span["tag"],
            "since": span["since"], "until": span["until"] or None}


def tag_order(span: Row) -> tuple[int, str, str]:
    return revision_number(span["revision"]), span["tag"], span["since"]


def artifact_record(n: Row, file: dict[str, Any] | None) -> Record:
    record = {"type": "artifact", "kref": _kref(n["id"]), "item_kref": _kref(n["revision"].rsplit("?r=", 1)[0]),
              "revision_kref": _kref(n["revision"]), "name": n["name"], "location": n["location"],
              "created_at": n["created_at"], "modified_at": n["modified_at"], "author": n["author"],
              "username": n["username"], "metadata": _meta(n["metadata"]), "deprecated": bool(n["deprecated"])}
    if file is not None:
        record["file"] = file
    return record


def artifact_order(n: Row) -> tuple[int, str]:
    return revision_number(n["revision"]), n["name"]


def file_description(relative: str, data: bytes | None, size: int) -> dict[str, Any]:
    """The ``file`` of an artifact record: its bytes when ``data`` is given, else why they are left out."""
    described: dict[str, Any] = {"path": relative, "size": size}
    if data is None:
        described["omitted"] = f"larger than {MAX_INLINE_FILE_BYTES} bytes; copy the file by hand"
    else:
        described["sha256"] = hashlib.sha256(data).hexdigest()
        described["content_base64"] = base64.b64encode(data).decode("ascii")
    return described


def edge_record(row: Row) -> Record:
    return {"type": "edge", "source_kref": _kref(row["source"]), "target_kref": _kref(row["target"]),
            "edge_type": row["edge_type"], "created_at": row["created_at"], "author": row["author"],
            "username": row["username"], "metadata": _meta(row["metadata"])}


def member_record(row: Row) -> Record:
    return {"type": "bundle_member", "bundle_kref": _kref(row["bundle"]), "item_kref": _kref(row["member"]),
            "added_at": row["added_at"], "added_by": row["added_by"], "added_by_username": row["added_by_username"],
            "added_in_revision": int(row["added_in"]), "removed_in_revision": int(row["removed_in"]) or None,
            "metadata": _meta(row["metadata"])}


def event_record(n: Row) -> Record:
    return {"type": "event", "seq": int(n["seq"]), "at": n["at"], "routing_key": n["routing_key"],
            "kref": n["kref"], "author": n["author"], "details": json.loads(n["details"] or "{}")}


# -- records → graph rows (import) ---------------------------------------------------------------------
def _dumps(metadata: dict[str, Any]) -> str:
    return json.dumps(metadata, ensure_ascii=False, sort_keys=True)


def to_row(r: Record) -> Row:
    """The graph row a (checked) record becomes."""
    kind = r["type"]
    if kind == "project":
        return {"name": r["name"], "project_id": r["project_id"], "description": r["description"],
                "created_at": r["created_at"], "updated_at": r["updated_at"], "deprecated": r["deprecated"],
                "allow_public": r["allow_public"], "metadata": _dumps(r["metadata"])}
    if kind == "space":
        return {"path": r["path"], "name": r["name"], "project": r["project"], "parent": r["parent_path"] or "",
                "created_at": r["created_at"], "modified_at": r["modified_at"], "author": r["author"],
                "username": r["username"], "metadata": _dumps(r["metadata"])}
    if kind == "item":
        return {"id": _id(r["kref"]), "project": r["project"], "space": r["space_path"], "name": r["item_name"],
                "kind": r["kind"], "created_at": r["created_at"], "modified_at": r["modified_at"],
                "author": r["author"], "username": r["username"], "metadata": _dumps(r["metadata"]),
                "deprecated": r["deprecated"], "next_number": r["next_revision_number"]}
    if kind == "revision":
        return {"id": _id(r["kref"]), "item": _id(r["item_kref"]), "number": r["number"],
                "metadata": _dumps(r["metadata"]), "created_at": r["created_at"], "modified_at": r["modified_at"],
                "author": r["author"], "username": r["username"], "deprecated": r["deprecated"],
                "default_artifact": r["default_artifact"] or ""}
    if kind == "tag":
        return {"item": _id(r["item_kref"]), "revision": _id(r["revision_kref"]), "tag": r["tag"],
                "since": r["since"], "until": r["until"] or ""}
    if kind == "artifact":
        return {"id": _id(r["kref"]), "revision": _id(r["revision_kref"]), "name": r["name"],
                "location": r["location"], "created_at": r["created_at"], "modified_at": r["modified_at"],
                "author": r["author"], "username": r["username"], "metadata": _dumps(r["metadata"]),
                "deprecated": r["deprecated"]}
    if kind == "edge":
        return {"source": _id(r["source_kref"]), "target": _id(r["target_kref"]), "edge_type": r["edge_type"],
                "metadata": _dumps(r["metadata"]), "created_at": r["created_at"], "author": r["author"],
                "username": r["username"]}
    if kind == "bundle_member":
        return {"bundle": _id(r["bundle_kref"]), "member": _id(r["item_kref"]), "added_at": r["added_at"],
                "added_by": r["added_by"], "added_by_username": r["added_by_username"],
                "added_in": r["added_in_revision"], "removed_in": r["removed_in_revision"] or 0,
                "metadata": _dumps(r["metadata"])}
    return {"at": r["at"], "routing_key": r["routing_key"], "kref": r["kref"], "author": r["author"],
            "details": json.dumps(r["details"], ensure_ascii=False, sort_keys=True)}


# -- identity: what a record defines, and what it must find defined ------------------------------------
@dataclass(frozen=True)
class Checked:
    """A record whose shape and bounds hold: the key it is known by, and the keys it refers to."""

    record: Record
    key: tuple[str, ...]  # (table or type, identity…), unique within a file
    refs: tuple[tuple[tuple[str, ...], str], ...]  # ((table, key), field naming it)


def identity(r: Record) -> tuple[str, ...]:
    kind = r["type"]
    if kind == "project":
        return ("Project", r["name"])
    if kind == "space":
        return ("Space", r["path"])
    if kind in ("item", "revision", "artifact"):
        return (kind.capitalize(), _id(r["kref"]))
    if kind == "tag":
        return ("tag", _id(r["revision_kref"]), r["tag"], r["since"])
    if kind == "edge":
        return ("edge", _id(r["source_kref"]), _id(r["target_kref"]), r["edge_type"])
    if kind == "bundle_member":
        return ("bundle_member", _id(r["bundle_kref"]), _id(r["item_kref"]), str(r["added_in_revision"]))
    return ("event", r["at"], r["routing_key"], r["kref"], r["author"], to_row(r)["details"])


# -- one line's shape and bounds -----------------------------------------------------------------------
class LineError(InvalidArgument):
    """A line of the file that cannot be imported: its number, the field and the fix."""

    def __init__(self, line: int, field: str | None, message: str) -> None:
        where = f"line {line}" + (f", field {field}" if field else "")
        if field and message.startswith(field + ": "):  # the checks of appliance.core name the field too
            message = message[len(field) + 2:]
        super().__init__(f"{where}: {message}", field=field)
        self.line = line


def _text(limit: int, empty: bool = True) -> Callable[[Any, str], Any]:
    def check(value: Any, field: str) -> Any:
        if not isinstance(value, str):
            raise InvalidArgument(f"{field}: give a string", field=field)
        if len(value) > limit:
            raise InvalidArgument(f"{field}: longer than {limit} characters", field=field)
        if not empty and not value:
            raise InvalidArgument(f"{field}: give a non-empty string", field=field)
        return value
    return check


def _stamp(value: Any, field: str) -> Any:
    _text(MAX_STAMP, empty=False)(value, field)
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise InvalidArgument(f"{field}: give an ISO 8601 time such as 2026-01-31T12:00:00.000000+00:00",
                              field=field) from None
    return value


def _optional(check: Callable[[Any, str], Any]) -> Callable[[Any, str], Any]:
    return lambda value, field: None if value is None else check(value, field)


def _flag(value: Any, field: str) -> Any:
    if not isinstance(value, bool):
        raise InvalidArgument(f"{field}: give true or false", field=field)
    return value


def _count(low: int, high: int) -> Callable[[Any, str], Any]:
    def check(value: Any, field: str) -> Any:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise InvalidArgument(f"{field}: give a whole number from {low} to {high}", field=field)
        return value
    return check


def _metadata(value: Any, field: str) -> Any:
    if not isinstance(value, dict):
        raise InvalidArgument(f"{field}: give an object of string keys and string values ({{}} when none)",
                              field=field)
    return names.metadata(value, field)


def _object(value: Any, field: str) -> Any:
    if not isinstance(value, dict):
        raise InvalidArgument(f"{field}: give a JSON object", field=field)
    return value


def _file(value: Any, field: str) -> Any:
    _object(value, field)
    allowed = {"path", "size", "sha256", "content_base64", "omitted"}
    if unknown := sorted(set(value) - allowed):
        raise InvalidArgument(f"{field}.{unknown[0]}: not a field of an artifact file (known: "
                              f"{', '.join(sorted(allowed))})", field=f"{field}.{unknown[0]}")
    path = _text(MAX_TEXT, empty=False)(value.get("path"), f"{field}.path")
    if path.startswith("/") or any(part in ("", ".", "..") or "\\" in part or "\x00" in part
                                   for part in path.split("/")):
        raise InvalidArgument(f"{field}.path: give a relative path inside the artifacts folder, without '..'",
                              field=f"{field}.path")
    size = _count(0, 2**53)(value.get("size"), f"{field}.size")
    if "content_base64" not in value:
        _text(MAX_TEXT, empty=False)(value.get("omitted"), f"{field}.omitted")
        return value
    try:
        data = base64.b64decode(_text(MAX_LINE_BYTES)(value["content_base64"], f"{field}.content_base64"),
                                validate=True)
    except binascii.Error:
        raise InvalidArgument(f"{field}.content_base64: not base64", field=f"{field}.content_base64") from None
    digest = _text(64, empty=False)(value.get("sha256"), f"{field}.sha256")
    if len(data) != size or hashlib.sha256(data).hexdigest() != digest:
        raise InvalidArgument(f"{field}.content_base64: the bytes do not match size and sha256 (damaged file?)",
                              field=f"{field}.content_base64")
    return value


_STAMPS = {"created_at": _stamp, "modified_at": _stamp, "author": _text(MAX_TEXT), "username": _text(MAX_TEXT)}
_REVISION = _count(1, krefs.MAX_REVISION)
_FIELDS: dict[str, dict[str, Callable[[Any, str], Any]]] = {
    "project": {"kref": _text(MAX_TEXT), "name": names.project_name, "project_id": _text(MAX_TEXT),
                "description": _text(MAX_DESCRIPTION), "created_at": _stamp, "updated_at": _stamp,
                "deprecated": _flag, "allow_public": _flag, "metadata": _metadata},
    "space": {"kref": _text(MAX_TEXT), "path": _text(MAX_TEXT, empty=False), "name": names.space_segment,
              "project": names.project_name, "parent_path": _optional(_text(MAX_TEXT)), **_STAMPS,
              "metadata": _metadata},
    "item": {"kref": _text(MAX_TEXT), "project": names.project_name, "space_path": _text(MAX_TEXT),
             "item_name": names.item_name, "kind": names.kind, **_STAMPS, "metadata": _metadata,
             "deprecated": _flag, "next_revision_number": _count(1, krefs.MAX_REVISION)},
    "revision": {"kref": _text(MAX_TEXT), "item_kref": _text(MAX_TEXT), "number": _REVISION, **_STAMPS,
                 "metadata": _metadata, "deprecated": _flag, "default_artifact": _optional(names.artifact_name)},
    "tag": {"item_kref": _text(MAX_TEXT), "revision_kref": _text(MAX_TEXT), "tag": names.tag, "since": _stamp,
            "until": _optional(_stamp)},
    "artifact": {"kref": _text(MAX_TEXT), "item_kref": _text(MAX_TEXT), "revision_kref": _text(MAX_TEXT),
                 "name": names.artifact_name, "location": _text(MAX_TEXT, empty=False), **_STAMPS,
                 "metadata": _metadata, "deprecated": _flag, "file": _file},
    "edge": {"source_kref": _text(MAX_TEXT), "target_kref": _text(MAX_TEXT), "edge_type": names.edge_type,
             "created_at": _stamp, "author": _text(MAX_TEXT), "username": _text(MAX_TEXT), "metadata": _metadata},
    "bundle_member": {"bundle_kref": _text(MAX_TEXT), "item_kref": _text(MAX_TEXT), "added_at": _stamp,
                      "added_by": _text(MAX_TEXT), "added_by_username": _text(MAX_TEXT),
                      "added_in_revision": _REVISION, "removed_in_revision": _optional(_REVISION),
                      "metadata": _metadata},
    "event": {"seq": _count(0, 2**62), "at": _stamp, "routing_key": _text(128, empty=False),
              "kref": _text(MAX_TEXT), "author": _text(MAX_TEXT), "details": _object},
}
_OPTIONAL = {("artifact", "file")}


def check_header(value: Any) -> Record:
    """The first line: this format, a version this appliance reads."""
    if not isinstance(value, dict) or value.get("format") != FORMAT:
        raise LineError(1, "format", f'the file does not start with a {{"format": "{FORMAT}", …}} header: '
                        "not a kumiho-ce export")
    version = value.get("version")
    if version != VERSION:
        raise LineError(1, "version", f"format version {version!r} is not one this appliance reads (it reads "
                        f"version {VERSION}); export again with this version, or upgrade kumiho-ce")
    return value


def check_line(number: int, text: str | bytes) -> Checked:
    """Parse and check one record line; LineError names the line and the field."""
    try:
        value = json.loads(text)
    except (ValueError, UnicodeDecodeError) as exc:
        raise LineError(number, None, f"not valid JSON ({str(exc)[:120]}); each line holds one JSON object "
                        "(was the file cut short or edited?)") from None
    if not isinstance(value, dict):
        raise LineError(number, None, "give a JSON object with a type")
    kind = value.get("type")
    if kind not in _FIELDS:
        raise LineError(number, "type", f"unknown record type {str(kind)[:40]!r}; known: {', '.join(TYPES)}")
    fields = _FIELDS[kind]
    if unknown := sorted(set(value) - set(fields) - {"type"}):
        raise LineError(number, unknown[0], f"not a field of a {kind} record (known: {', '.join(fields)})")
    try:
        for name, check in fields.items():
            if name not in value:
                if (kind, name) in _OPTIONAL:
                    continue
                raise InvalidArgument(f"{name}: missing; a {kind} record has {', '.join(fields)}", field=name)
            check(value[name], name)
        refs = _consistent(value)
    except KumihoError as exc:
        raise LineError(number, exc.field, exc.message) from None
    return Checked(value, identity(value), refs)


def _kref_of(value: str, field: str, *, revision: bool = False, artifact: bool = False) -> krefs.Kref:
    """A canonical item, revision or artifact kref (no tag or time selector)."""
    parsed = krefs.parse(value, field)
    wanted = "an artifact kref (…?r=N&a=name)" if artifact else "a revision kref (…?r=N)" if revision \
        else "an item kref (kref://project/space/name.kind)"
    if (not parsed.is_item or parsed.tag or parsed.time or (parsed.revision is not None) != (revision or artifact)
            or (parsed.artifact is not None) != artifact or str(parsed) != value):
        raise InvalidArgument(f"{field}: give {wanted} in its canonical form", field=field)
    return parsed


def _same(field: str, value: Any, expected: Any) -> None:
    if value != expected:
        raise InvalidArgument(f"{field}: {value!r} does not match the kref (expected {expected!r})", field=field)


Ref = tuple[tuple[str, ...], str]


def _consistent(r: Record) -> tuple[Ref, ...]:
    """Fields that repeat what the kref says agree with it; the keys the record refers to."""
    kind = r["type"]
    if kind == "project":
        _same("kref", r["kref"], _kref(r["name"]))
        return ()
    if kind == "space":
        segments = krefs.parse_space_path(r["path"], "path")
        _same("path", r["path"], krefs.space_path(segments))
        _same("kref", r["kref"], _kref("/".join(segments)))
        _same("name", r["name"], segments[-1])
        _same("project", r["project"], segments[0])
        parent = krefs.space_path(segments[:-1]) if len(segments) > 1 else None
        _same("parent_path", r["parent_path"], parent)
        return ((("Project", segments[0]), "project"),) + (((("Space", parent), "parent_path"),) if parent else ())
    if kind == "item":
        parsed = _kref_of(r["kref"], "kref")
        _same("project", r["project"], parsed.project)
        _same("space_path", r["space_path"], parsed.space_path)
        _same("item_name", r["item_name"], parsed.item_name)
        _same("kind", r["kind"], parsed.kind)
        return ((("Space", parsed.space_path), "space_path"),)
    if kind == "revision":
        parsed = _kref_of(r["kref"], "kref", revision=True)
        _same("item_kref", r["item_kref"], str(parsed.item()))
        _same("number", r["number"], parsed.revision)
        return ((("Item", _id(r["item_kref"])), "item_kref"),)
    if kind == "tag":
        parsed = _kref_of(r["revision_kref"], "revision_kref", revision=True)
        _same("item_kref", r["item_kref"], str(parsed.item()))
        if r["until"] is not None and r["until"] < r["since"]:
            raise InvalidArgument("until: earlier than since", field="until")
        return ((("Revision", _id(r["revision_kref"])), "revision_kref"),)
    if kind == "artifact":
        parsed = _kref_of(r["kref"], "kref", artifact=True)
        _same("revision_kref", r["revision_kref"], str(krefs.Kref(parsed.path, parsed.kind, parsed.revision)))
        _same("item_kref", r["item_kref"], str(parsed.item()))
        _same("name", r["name"], parsed.artifact)
        return ((("Revision", _id(r["revision_kref"])), "revision_kref"),)
    if kind == "edge":
        _kref_of(r["source_kref"], "source_kref", revision=True)
        _kref_of(r["target_kref"], "target_kref", revision=True)
        return ((("Revision", _id(r["source_kref"])), "source_kref"),
                (("Revision", _id(r["target_kref"])), "target_kref"))
    if kind == "bundle_member":
        bundle = _kref_of(r["bundle_kref"], "bundle_kref")
        if bundle.kind != names.RESERVED_KIND:
            raise InvalidArgument("bundle_kref: name an item of kind bundle", field="bundle_kref")
        _kref_of(r["item_kref"], "item_kref")
        removed = r["removed_in_revision"]
        if removed is not None and removed <= r["added_in_revision"]:
            raise InvalidArgument("removed_in_revision: must be later than added_in_revision",
                                  field="removed_in_revision")
        return ((("Item", _id(r["bundle_kref"])), "bundle_kref"), (("Item", _id(r["item_kref"])), "item_kref"))
    return ()


def describe(key: tuple[str, ...]) -> str:
    """A key as a user reads it (a kref or a path)."""
    table = key[0]
    if table == "Space":
        return key[1]
    if table == "Project":
        return _kref(key[1])
    if table in ("Item", "Revision", "Artifact"):
        return _kref(key[1])
    if table == "tag":
        return f"tag {key[2]!r} on {_kref(key[1])} since {key[3]}"
    if table == "edge":
        return f"edge {key[3]} {_kref(key[1])} → {_kref(key[2])}"
    if table == "bundle_member":
        return f"member {_kref(key[2])} of {_kref(key[1])} (added in r{key[3]})"
    return f"event {key[2]} {key[3]} at {key[1]}"

