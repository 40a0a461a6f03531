"""What the console's read endpoints assemble from the stores: statistics, one memory's full picture, an
artifact's text. The routes (console.py) stay thin; everything here is a plain function of the services.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from appliance.admin_api import console_shapes as shapes
from appliance.admin_api.errors import field_as_sent
from appliance.core import kref as krefs
from appliance.core.model import Artifact, Revision
from appliance.datadir import SUBDIRS
from appliance.errors import InvalidArgument
from appliance.graph import GraphStore
from appliance.graph.overview import ItemCount
from appliance.memory import records
from appliance.memory.views import edge_view, item_view, revision_view

if TYPE_CHECKING:
    from appliance.app import Services

K = TypeVar("K")
N = TypeVar("N", str, tuple[str, str])  # a name: sorted ties
V = TypeVar("V")
MAX_LISTED = 1000  # entries one list of counts holds (projects, spaces, kinds, memory types, tags)
MAX_REVISIONS = 200  # revisions one inspect answer lists (newest first)
MAX_TAG_SPANS = 500
MAX_ARTIFACTS = 50
TEXT_BYTES = 64 * 1024  # bytes of one artifact's text an inspect answer carries
WALK_DEPTH = 10  # hops a provenance walk follows
WALK_LIMIT = 100  # revisions one provenance walk lists
MAX_CONTESTED = 200


# -- statistics ------------------------------------------------------------------------------------------------
def stats(services: Services) -> shapes.StatsResponse:
    graph = services.graph
    counts = graph.item_counts()
    totals = graph.stats()
    revisions = graph.revision_counts()
    by_project = _tally(counts, lambda c: c.project)
    by_space = _tally(counts, lambda c: (c.space, c.project))
    by_kind = _tally(counts, lambda c: (c.project, c.kind))
    by_type = _tally(counts, lambda c: (c.project, c.memory_type))
    listed = {p.name: p for p in graph.list_projects(include_deprecated=True)}
    projects, projects_cut = largest(listed, lambda p: by_project.get(p.name, (0, 0))[0])
    kinds, kinds_cut = largest(by_kind, lambda tally: tally[0])
    types, types_cut = largest(by_type, lambda tally: tally[0])
    spaces = sorted(by_space.items())
    return shapes.StatsResponse(
        totals=shapes.Totals(projects=totals["projects"], spaces=totals["spaces"], items=totals["items"],
                             deprecated_items=sum(d for _, d in by_project.values()), revisions=totals["revisions"],
                             artifacts=totals["artifacts"], edges=totals["edges"], events=totals["events"]),
        projects=[shapes.ProjectCount(project=name, archived=p.deprecated, items=by_project.get(name, (0, 0))[0],
                                      deprecated_items=by_project.get(name, (0, 0))[1],
                                      revisions=revisions.get(name, 0)) for name, p in projects],
        projects_truncated=projects_cut,
        spaces=[shapes.SpaceCount(space=s, project=p, items=n, deprecated_items=d)
                for (s, p), (n, d) in spaces[:MAX_LISTED]],
        spaces_truncated=len(spaces) > MAX_LISTED,
        kinds=[shapes.KindCount(project=p, kind=k, items=n, deprecated_items=d) for (p, k), (n, d) in kinds],
        kinds_truncated=kinds_cut,
        memory_types=[shapes.MemoryTypeCount(project=p, memory_type=t, items=n, deprecated_items=d)
                      for (p, t), (n, d) in types],
        memory_types_truncated=types_cut,
        index=index_lag(services),
        disk=disk_use(services.data_dir.root),
    )


def tags_in_use(graph: GraphStore, project: str) -> tuple[list[shapes.TagCount], bool]:
    """The tags held now in ``project`` ('' = every project), the most held first, and whether some were cut."""
    tags, truncated = largest(graph.tag_counts(project), lambda revisions: revisions)
    return [shapes.TagCount(tag=t, revisions=n) for t, n in tags], truncated


def largest(table: dict[N, V], count: Callable[[V], int]) -> tuple[list[tuple[N, V]], bool]:
    """The MAX_LISTED entries with the largest count, ties by name, and whether any were left out: names are
    text clients choose, so there may be any number of them."""
    ordered = sorted(table.items(), key=lambda entry: (-count(entry[1]), entry[0]))
    return ordered[:MAX_LISTED], len(ordered) > MAX_LISTED


def _tally(counts: list[ItemCount], key: Callable[[ItemCount], K]) -> dict[K, tuple[int, int]]:
    """(items, deprecated items) per key."""
    table: dict[K, tuple[int, int]] = {}
    for count in counts:
        items, deprecated = table.get(key(count), (0, 0))
        table[key(count)] = (items + count.items, deprecated + count.deprecated)
    return table


def index_lag(services: Services) -> shapes.IndexLag:
    lag = services.graph.index_lag()
    behind = 0.0
    if lag.oldest_pending_at:
        oldest = datetime.fromisoformat(lag.oldest_pending_at)
        behind = round(max(0.0, (datetime.now(UTC) - oldest).total_seconds()), 3)
    worker = services.index_worker
    return shapes.IndexLag(pending_rows=lag.pending, seconds_behind=behind, state=worker.state()["state"],
                           sync_error=worker.sync_error(), rows=services.index.count_if_readable(),
                           embedder=services.index.model_id)


def disk_use(root: Path) -> shapes.DiskUse:
    sizes = {name: _bytes_under(root / name) for name in SUBDIRS}
    return shapes.DiskUse(graph_bytes=sizes["graph"], index_bytes=sizes["index"],
                          artifacts_bytes=sizes["artifacts"], working_bytes=sizes["working"],
                          total_bytes=sum(sizes.values()))


def _bytes_under(folder: Path) -> int:
    """Bytes of the files under ``folder`` (symbolic links not followed; files vanishing meanwhile skipped)."""
    total = 0
    pending = [str(folder)]
    while pending:
        try:
            with os.scandir(pending.pop()) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            pending.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            total += entry.stat(follow_symlinks=False).st_size
                    except OSError:
                        continue
        except OSError:
            continue
    return total


# -- one memory --------------------------------------------------------------------------------------------------
def inspect(services: Services, kref: str) -> shapes.InspectResponse:
    graph = services.graph
    parsed = krefs.parse(kref, "kref")
    if not parsed.is_item:
        raise InvalidArgument("kref: name an item (kref://project/space/name.kind) or one of its revisions "
                              "(…?r=N)", field="kref")
    with field_as_sent("kref"):  # the stores name what they cannot follow in their own words
        found = graph.resolve(kref)
        assert found.item is not None  # an item kref resolves to its item
        item = found.item
        asked = parsed.revision is not None or parsed.tag is not None or parsed.time is not None
        revision = found.revision if asked else graph.current_revisions([item.kref]).get(item.kref)
        page = graph.list_revisions(item.kref, page_size=MAX_REVISIONS)
        spans = graph.tag_history(item.kref)[-MAX_TAG_SPANS:]
        artifacts = graph.list_artifacts(revision.kref)[:MAX_ARTIFACTS] if revision else []
    root = services.data_dir.root
    return shapes.InspectResponse(
        item=shapes.ItemView.model_validate(item_view(item)),
        revision=shapes.RevisionView.model_validate(revision_view(revision)) if revision else None,
        revisions=[shapes.RevisionView.model_validate(revision_view(r)) for r in page.items],
        revisions_truncated=page.next_cursor is not None,
        tags=[shapes.TagSpan.model_validate(span) for span in spans],
        artifacts=[artifact_with_text(a, root) for a in artifacts],
        provenance=provenance(graph, revision) if revision else shapes.Provenance(
            derived_from=[], derived=[], supersedes=[], superseded_by=[], contested=[], truncated=False),
    )


def provenance(graph: GraphStore, revision: Revision) -> shapes.Provenance:
    walks = {name: graph.traverse(revision.kref, direction, [edge], WALK_DEPTH, WALK_LIMIT)
             for name, direction, edge in (("derived_from", "outgoing", "DERIVED_FROM"),
                                           ("derived", "incoming", "DERIVED_FROM"),
                                           ("supersedes", "outgoing", "SUPERSEDES"),
                                           ("superseded_by", "incoming", "SUPERSEDES"))}
    reached = sorted({r.revision_kref for walk in walks.values() for r in walk.reached})
    metadata = graph.revision_metadata(reached)  # ≤ 4 × WALK_LIMIT: within one read's bound
    contested = graph.get_edges(revision.kref, "CONTRADICTS", "both", page_size=MAX_CONTESTED)

    def steps(name: str) -> list[shapes.ProvenanceStep]:
        return [shapes.ProvenanceStep(revision_kref=r.revision_kref, depth=r.depth,
                                      title=_title(metadata.get(r.revision_kref))) for r in walks[name].reached]

    return shapes.Provenance(
        derived_from=steps("derived_from"), derived=steps("derived"), supersedes=steps("supersedes"),
        superseded_by=steps("superseded_by"),
        contested=[shapes.EdgeView.model_validate(edge_view(e)) for e in contested.items],
        truncated=any(w.truncated for w in walks.values()) or contested.next_cursor is not None)


def _title(metadata: dict[str, str] | None) -> str | None:
    if metadata is None:
        return None  # deleted since the walk
    return metadata.get("title") or records.summary_of(metadata)[:120] or None


def artifact_with_text(artifact: Artifact, data_root: Path) -> shapes.ArtifactWithText:
    text, truncated, note = artifact_text(artifact.location, data_root)
    return shapes.ArtifactWithText(kref=artifact.kref, name=artifact.name, location=artifact.location,
                                   revision_kref=artifact.revision_kref, created_at=artifact.created_at,
                                   metadata=dict(artifact.metadata), text=text, text_truncated=truncated,
                                   text_note=note)


def artifact_text(location: str, data_root: Path) -> tuple[str | None, bool, str | None]:
    """(text, cut at TEXT_BYTES, why there is none). Only a regular file inside the data directory's
    ``artifacts/`` folder is read, once its path is resolved (``..`` and symbolic links followed): a location
    is text a client wrote, and the console must not become a way to read the token file, server.json, the
    stores' own files or any other file this process can. A FIFO or device is never opened (it could block a
    worker thread for good)."""
    path_text = location[len("file://"):] if location.startswith("file://") else location
    path = Path(path_text)
    if "://" in path_text or not path.is_absolute():
        return None, False, "not a file path of this machine (a URI or a relative path): not read"
    artifacts = (data_root / "artifacts").resolve()
    try:
        resolved = path.resolve()
    except (OSError, RuntimeError):
        return None, False, "the path cannot be resolved"
    if not resolved.is_relative_to(artifacts):
        return None, False, "outside the data directory's artifacts folder: not read"
    try:
        if not resolved.exists():
            return None, False, "the file does not exist"
        if not resolved.is_file():
            return None, False, "not a regular file: not read"
        with resolved.open("rb") as handle:
            data = handle.read(TEXT_BYTES + 1)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None, False, "the file does not exist"
    except OSError as exc:
        return None, False, f"the file cannot be read ({exc.strerror})"
    if b"\x00" in data:
        return None, False, "not a text file"
    truncated = len(data) > TEXT_BYTES
    return data[:TEXT_BYTES].decode("utf-8", "ignore" if truncated else "replace"), truncated, None
