"""Restoring an archive into a data directory this process owns (its lock held by the caller).

Nothing is touched until the whole archive has been read and every file matched its checksum: the files are
extracted (and fsynced) into a staging directory inside the data directory as they are checked. Then the
current graph, index, artifacts and working memory are moved (renamed, never deleted) into
``pre-restore-<UTC time>/`` and the staged ones renamed into place. The token and the configuration stay as
they are.

Those renames are several steps, and a crash between two of them would leave a data directory without a graph
(which the next start would fill with an empty one, or with an older snapshot). So a marker,
``restore-in-progress.json``, is written and fsynced before the first rename and removed after the last. It
names the staging and pre-restore directories and which parts each holds. While it exists, the next start
(``open_services``, or ``kumiho-ce restore``) first finishes the restore from them: the staged data was fully
verified before the marker was written, so finishing it is always right. Neither directory is deleted when a
step fails: the marker stays and the next start tries again.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

from appliance.backup import archive
from appliance.backup.archive import Manifest, Progress
from appliance.backup.store import backup_directory, list_archives
from appliance.config import Settings
from appliance.datadir import DataDir
from appliance.errors import Conflict, DataDirError, InvalidArgument, KumihoError, StorageError
from appliance.fsutil import fsync_dir, write_durably
from appliance.graph import schema

log = logging.getLogger(__name__)
STAGING_PREFIX = ".restore-staging-"
ASIDE_PREFIX = "pre-restore-"
MARKER = "restore-in-progress.json"


@dataclass(frozen=True)
class Restored:
    manifest: Manifest
    aside: Path  # where the data directory's previous contents went


@dataclass(frozen=True)
class _Renames:
    """What a restore moves, written into the marker before the first rename: enough to finish it."""

    source: str  # the archive (for the log)
    staging: str  # directory names inside the data directory
    aside: str
    old_parts: list[str]  # the parts the data directory had: each goes into ``aside``
    new_parts: list[str]  # the parts the archive had: each comes out of ``staging``

    @classmethod
    def read(cls, marker: Path) -> _Renames:
        try:
            body = json.loads(marker.read_bytes())
            renames = cls(str(body["source"]), str(body["staging"]), str(body["aside"]),
                          [str(p) for p in body["old_parts"]], [str(p) for p in body["new_parts"]])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise DataDirError(f"a restore was interrupted and its marker {marker} cannot be read ({exc}); the "
                               f"restored data is in {marker.parent}/{STAGING_PREFIX}…, the previous data in "
                               f"{marker.parent}/{ASIDE_PREFIX}…: move graph, index, artifacts and working from "
                               "one of them into the data directory, then delete the marker") from None
        for name in (renames.staging, renames.aside, *renames.old_parts, *renames.new_parts):
            if "/" in name or name in ("", ".", ".."):
                raise DataDirError(f"the restore marker {marker} names {name[:64]!r}, which is not a folder of the "
                                   "data directory; delete the marker after checking the data directory by hand")
        return renames


def restore(data_dir: DataDir, source: Path, progress: Progress | None = None) -> Restored:
    """Verify ``source`` and put its contents in place of the data directory's (see the module)."""
    if not source.is_file():
        raise InvalidArgument(f"archive: {source} is not a file", field="archive")
    manifest = archive.read_manifest(source)
    refuse_newer_schema(manifest, source)
    root = data_dir.root
    finish_interrupted_restore(data_dir)  # its staging holds verified data: finish it, never unpack over it
    for stale in root.glob(f"{STAGING_PREFIX}*"):  # a restore a crash interrupted before its renames began
        shutil.rmtree(stale, ignore_errors=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    staging = root / f"{STAGING_PREFIX}{stamp}"
    staging.mkdir(mode=0o700)
    try:
        archive.verify(source, progress, extract_to=staging)
        for folder, _, _ in os.walk(staging):  # the files are fsynced; their directory entries too
            fsync_dir(Path(folder))
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)  # nothing was changed yet
        raise
    renames = _Renames(str(source), staging.name, f"{ASIDE_PREFIX}{stamp}",
                       [part for part in archive.PARTS if (root / part).exists()],
                       [part for part in archive.PARTS if (staging / part).exists()])
    write_durably(root / MARKER, json.dumps(asdict(renames), indent=1))  # before the first rename
    try:
        _rename_all(root, renames)
    except OSError as exc:
        raise StorageError(f"restore: moving the restored data into place in {root} failed "
                           f"({exc.strerror or exc}); nothing was deleted: the restored data is in {staging}, the "
                           f"previous data in {root / renames.aside}. Fix the cause, then start the appliance or "
                           "run the restore again: either finishes it first") from None
    log.warning("restored %s (made %s, %s, %d items); the previous data is in %s", source, manifest.created_at,
                manifest.reason, manifest.counts.get("items", 0), root / renames.aside)
    return Restored(manifest, root / renames.aside)


def finish_interrupted_restore(data_dir: DataDir) -> bool:
    """When a restore was interrupted after its marker was written (a crash, a kill, a failed rename), finish
    it from its staging and pre-restore directories; True when there was one. Runs before anything opens
    the graph (the caller holds the data directory's lock)."""
    marker = data_dir.root / MARKER
    if not marker.exists():
        return False
    renames = _Renames.read(marker)
    log.warning("a restore of %s was interrupted; finishing it (the previous data goes to %s)", renames.source,
                data_dir.root / renames.aside)
    try:
        _rename_all(data_dir.root, renames)
    except OSError as exc:
        raise DataDirError(f"a restore of {renames.source} was interrupted and cannot be finished "
                           f"({exc.strerror or exc}); nothing was deleted: the restored data is in "
                           f"{data_dir.root / renames.staging}, the previous data in {data_dir.root / renames.aside}. "
                           "Fix the cause and start again, or move the parts into place by hand and delete "
                           f"{marker}") from None
    return True


def _rename_all(root: Path, renames: _Renames) -> None:
    """Move the old parts aside and the staged ones in, then remove the marker. Each step checks what is
    already done, so running this again after a crash at any point finishes the same restore."""
    staging, aside = root / renames.staging, root / renames.aside
    if not aside.exists():
        aside.mkdir(mode=0o700)
        fsync_dir(root)
    for part in renames.old_parts:
        if not (aside / part).exists():  # not moved yet, so nothing staged came in yet: this is the old part
            os.rename(root / part, aside / part)  # within one file system: instant and whole
    fsync_dir(aside)
    for part in archive.PARTS:
        if part in renames.new_parts:
            if (staging / part).exists():
                os.rename(staging / part, root / part)
            elif not (root / part).exists():
                raise FileNotFoundError(f"{part} is neither in {staging} nor in {root}")
        elif not (root / part).exists():
            (root / part).mkdir(mode=0o700)
    fsync_dir(root)
    (root / MARKER).unlink()
    fsync_dir(root)
    shutil.rmtree(staging, ignore_errors=True)  # only what is never restored is left there (config.toml)


def refuse_newer_schema(manifest: Manifest, source: Path) -> None:
    newest = schema.LATEST_VERSION
    if manifest.schema_version > newest:
        raise Conflict(f"archive: {source.name} holds a graph of schema version {manifest.schema_version}, newer "
                       f"than this kumiho-ce knows ({newest}; made by kumiho-ce {manifest.kumiho_ce_version}); "
                       "upgrade kumiho-ce, then restore it", field="archive")


def hydrate_if_empty(settings: Settings, data_dir: DataDir) -> Restored | None:
    """``[memory] auto_hydrate``: when the data directory has no graph at all (a new machine, a wiped
    ``graph/``), restore the newest snapshot that holds items and passes its checksums (an older one when the
    newest fails). None when nothing was restored.

    A graph without items is not "empty" here: it is what purging or deleting everything leaves, and bringing
    that memory back unasked would undo the deletion (only a restore the operator runs may do that)."""
    directory = backup_directory(settings)
    try:
        listed = list_archives(directory)
    except KumihoError as exc:  # an unreadable snapshot directory must not keep the appliance from starting
        log.error("auto_hydrate: %s; starting without looking for a snapshot", exc.message)
        return None
    candidates = [info for info in listed
                  if info.counts.get("items", 0) > 0 and info.schema_version <= schema.LATEST_VERSION]
    if not candidates or data_dir.graph_path.exists():
        return None
    for info in candidates:
        try:
            restored = restore(data_dir, directory / info.name)
        except KumihoError as exc:
            log.error("auto_hydrate: the snapshot %s cannot be restored (%s); trying an older one",
                      directory / info.name, exc.message)
            continue
        log.warning("auto_hydrate: the data directory had no graph; restored the snapshot %s (%d items, made %s)",
                    directory / info.name, info.counts.get("items", 0), info.created_at)
        return restored
    log.error("auto_hydrate: the data directory has no graph and no snapshot in %s could be restored; starting "
              "empty", directory)
    return None
