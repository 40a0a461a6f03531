"""Export: the graph as JSON Lines, streamed page by page (docs/export-format.md).

Memory stays bounded by one page (``PAGE`` items with their revisions, tags and artifacts), never the whole
graph. The order is fixed, so the same graph gives the same bytes: projects by name, spaces by path, then
each item (by kref) followed by its revisions, tag spans and artifacts, then edges and bundle members (a
second pass over the items: they may point at any item) and last the events in sequence order.

Each page is its own read: a write that lands during a long export may or may not be in it (a backup is the
point-in-time copy). The file stays importable all the same: a record is written only when what it refers to
was written above it (a space whose project or parent space, an item whose space, a tag or artifact whose
revision came after the read above it is left out, and so is an edge or bundle member whose ends were not
exported), so the import never meets a reference to nothing. For that the export keeps a 16-byte digest of
each exported item and revision id (~100 bytes each): the one thing that grows with the graph. One read
transaction over the whole export would give a true snapshot instead, but it would stay open as long as the
client takes to download the file, and Kùzu cannot checkpoint while any transaction is open.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from appliance import __version__
from appliance.core import names
from appliance.graph import GraphStore
from appliance.portability import records
from appliance.portability.records import Row

PAGE = 500
EVENT_PAGE = 2000


def export_lines(graph: GraphStore, artifact_root: Path, project: str | None = None) -> Iterator[str]:
    """The file, line by line; ``project`` keeps one project (edges and bundle members that leave it, and
    events of other projects, are left out)."""
    only = names.project_name(project, "project") if project else ""
    yield records.encode({
        "format": records.FORMAT, "version": records.VERSION,
        "exported_at": datetime.now(UTC).isoformat(timespec="microseconds"),
        "appliance_version": __version__, "schema_version": graph.schema_version(), "project": only or None,
        "artifact_file_max_bytes": records.MAX_INLINE_FILE_BYTES})
    written = 0
    for line in _body(graph, artifact_root, only):
        written += 1
        yield line
    yield records.encode({"type": "end", "records": written})


def _body(graph: GraphStore, artifact_root: Path, only: str) -> Iterator[str]:
    projects: set[str] = set()
    spaces: set[str] = set()  # paths (spaces are few next to items)
    exported: set[bytes] = set()  # digests of the item and revision ids written
    for node in graph.portable_projects(only):
        projects.add(node["name"])
        yield records.encode(records.project_record(node))
    for node in _paged(lambda after: graph.portable_spaces(after, PAGE, only), "path"):
        if node["project"] in projects and (not node["parent"] or node["parent"] in spaces):
            spaces.add(node["path"])
            yield records.encode(records.space_record(node))
    for page in _item_pages(graph, only):
        page = [node for node in page if node["space"] in spaces]
        parts = graph.portable_parts([n["id"] for n in page])  # read after the page: may hold newer revisions
        for node in page:
            item = node["id"]
            exported.add(_digest(item))
            yield records.encode(records.item_record(node))
            for revision in parts.revisions.get(item, []):
                exported.add(_digest(revision["id"]))
                yield records.encode(records.revision_record(revision))
            for span in sorted(parts.tags.get(item, []), key=records.tag_order):
                if _digest(span["revision"]) in exported:
                    yield records.encode(records.tag_record(item, span))
            for artifact in sorted(parts.artifacts.get(item, []), key=records.artifact_order):
                if _digest(artifact["revision"]) in exported:
                    yield records.encode(records.artifact_record(artifact, carried_file(artifact["location"],
                                                                                        artifact_root)))
    for page in _item_pages(graph, only):
        links = graph.portable_links([n["id"] for n in page])
        for row in sorted(links, key=lambda r: (r["source"], r["target"], r["edge_type"])):
            if _within(row["target"], only) and _digest(row["source"]) in exported \
                    and _digest(row["target"]) in exported:
                yield records.encode(records.edge_record(row))
    for page in _item_pages(graph, only, kind=names.RESERVED_KIND):
        members = graph.portable_members([n["id"] for n in page])
        for row in sorted(members, key=lambda r: (r["bundle"], r["member"], r["added_in"])):
            if _within(row["member"], only) and _digest(row["bundle"]) in exported \
                    and _digest(row["member"]) in exported:
                yield records.encode(records.member_record(row))
    after = -1
    while True:
        events = graph.portable_events(after, EVENT_PAGE)
        if not events:  # the end, or a gap in the sequence (events pruned by retention): skip it
            following = graph.portable_next_event_seq(after)
            if following is None:
                break
            after = following - 1
            continue
        for node in events:
            if not only or _event_of(node["kref"], only):
                yield records.encode(records.event_record(node))
        after = int(events[-1]["seq"])


def _paged(read: object, key: str) -> Iterator[Row]:
    after = ""
    while page := read(after):  # type: ignore[operator]  # a page reader: after → rows
        yield from page
        after = page[-1][key]


def _item_pages(graph: GraphStore, project: str, kind: str = "") -> Iterator[list[Row]]:
    after = ""
    while page := graph.portable_items(after, PAGE, project, kind):
        yield page
        after = page[-1]["id"]


def _digest(node_id: str) -> bytes:
    return hashlib.blake2b(node_id.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _within(node_id: str, project: str) -> bool:
    return not project or node_id.startswith(project + "/")


def _event_of(kref: str, project: str) -> bool:
    prefix = "kref://" + project
    return kref == prefix or kref.startswith(prefix + "/") or kref.startswith(prefix + "?")


def carried_file(location: str, artifact_root: Path) -> dict[str, object] | None:
    """The ``file`` of an artifact whose location is a file this appliance wrote in its data directory
    (``artifacts/``): its bytes up to the bound, else a note; None for any other location (a URI, a path
    elsewhere, a file that is gone), which the record then carries as it is."""
    text = location[len("file://"):] if location.startswith("file://") else location
    path = Path(text)
    if "://" in text or not path.is_absolute():
        return None
    root = artifact_root.resolve()
    try:
        resolved = path.resolve()
        if not resolved.is_relative_to(root) or not resolved.is_file():
            return None
        size = resolved.stat().st_size
        relative = resolved.relative_to(root).as_posix()
        if size > records.MAX_INLINE_FILE_BYTES:
            return records.file_description(relative, None, size)
        data = resolved.read_bytes()
    except OSError:
        return None
    return records.file_description(relative, data, len(data))
