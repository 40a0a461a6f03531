"""Deleting items for real, their files included: the one way the Memory API's purges and hygiene's purges go.

An item's revisions may point at artifact files under the data directory's ``artifacts`` (a Memory API entry's
full text is one). Deleting the item leaves those files behind unless someone unlinks them: the next start would
move them to ``artifacts/.orphaned`` and every backup would copy them, so the purged text would live on. The
items go in one graph transaction; their files are unlinked only after it commits, so a purge that fails or rolls
back keeps every file its items still point to. Files outside the artifacts directory (a path an agent gave) are
never touched.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from pathlib import Path

from appliance.core.model import Page, Revision, every_item
from appliance.errors import NotFound
from appliance.graph import GraphStore

PAGE = 1000  # the graph store's largest page

# Runs inside the purge's transaction before the deletes; answers which of the candidates to delete (it may make
# other changes that must commit with them, e.g. hygiene's archiving).
Choose = Callable[[], Iterable[str]]


def purge_items(graph: GraphStore, artifact_root: Path, krefs: list[str], choose: Choose | None = None) -> list[str]:
    """Delete these items (``choose``'s pick of them, if given) in one transaction, then, after the commit, the
    artifact files of their revisions inside ``artifact_root``. Answers the krefs deleted."""
    if not krefs and choose is None:
        return []
    files = files_of(graph, artifact_root, krefs)  # read before: the deletes take the artifacts' nodes along

    def delete() -> list[str]:
        chosen = [kref for kref in (krefs if choose is None else choose()) if kref in files]
        for kref in chosen:
            graph.delete_item(kref, force=True)
        return chosen

    deleted = graph.atomic(delete)
    for kref in deleted:  # after the commit: a failed purge keeps every file its items point to
        for path in files[kref]:
            path.unlink(missing_ok=True)
    return deleted


def files_of(graph: GraphStore, artifact_root: Path, krefs: list[str]) -> dict[str, list[Path]]:
    """Item kref → the artifact files of all its revisions that lie inside ``artifact_root`` (every kref asked
    for has an entry, perhaps empty)."""
    root = artifact_root.resolve()
    revisions: dict[str, str] = {}
    for kref in krefs:
        try:
            revisions |= {r.kref: kref for r in every_item(functools.partial(_revisions, graph, kref))}
        except NotFound:
            continue  # gone already (purged by someone else): nothing of it to delete
    found: dict[str, list[Path]] = {kref: [] for kref in krefs}
    for revision, artifacts in graph.artifacts_of(list(revisions)).items():
        for artifact in artifacts:
            path = Path(artifact.location)
            if path.is_absolute() and path.resolve().is_relative_to(root):
                found[revisions[revision]].append(path)
    return found


def _revisions(graph: GraphStore, item_kref: str, cursor: str | None) -> Page[Revision]:
    return graph.list_revisions(item_kref, page_size=PAGE, cursor=cursor)
