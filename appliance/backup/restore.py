"""Restoring an archive into a data directory this process owns (its lock held by the caller).

Nothing is touched until the whole archive has been read and every file matched its checksum: the files are
extracted into a staging directory inside the data directory as they are checked. Then the current graph,
index, artifacts and working memory are moved (renamed, never deleted) into ``pre-restore-<UTC time>/`` and
the staged ones renamed into place. The token and the configuration stay as they are.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from appliance.backup import archive
from appliance.backup.archive import Manifest, Progress
from appliance.backup.store import backup_directory, list_archives
from appliance.config import Settings
from appliance.datadir import DataDir
from appliance.errors import Conflict, InvalidArgument, KumihoError
from appliance.fsutil import fsync_dir
from appliance.graph import schema
from appliance.graph.engine import KuzuEngine, Tx

log = logging.getLogger(__name__)
STAGING_PREFIX = ".restore-staging-"
ASIDE_PREFIX = "pre-restore-"


@dataclass(frozen=True)
class Restored:
    manifest: Manifest
    aside: Path  # where the data directory's previous contents went


def restore(data_dir: DataDir, source: Path, progress: Progress | None = None) -> Restored:
    """Verify ``source`` and put its contents in place of the data directory's (see the module)."""
    if not source.is_file():
        raise InvalidArgument(f"archive: {source} is not a file", field="archive")
    manifest = archive.read_manifest(source)
    refuse_newer_schema(manifest, source)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
    root = data_dir.root
    for stale in root.glob(f"{STAGING_PREFIX}*"):  # a restore a crash interrupted before its renames
        shutil.rmtree(stale, ignore_errors=True)
    staging = root / f"{STAGING_PREFIX}{stamp}"
    staging.mkdir(mode=0o700)
    try:
        archive.verify(source, progress, extract_to=staging)
        aside = root / f"{ASIDE_PREFIX}{stamp}"
        aside.mkdir(mode=0o700)
        for part in archive.PARTS:  # renames within one file system: each is instant and whole
            if (root / part).exists():
                os.rename(root / part, aside / part)
        for part in archive.PARTS:
            if (staging / part).exists():
                os.rename(staging / part, root / part)
            else:
                (root / part).mkdir(mode=0o700)
        fsync_dir(root)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    log.warning("restored %s (made %s, %s, %d items); the previous data is in %s", source, manifest.created_at,
                manifest.reason, manifest.counts.get("items", 0), aside)
    return Restored(manifest, aside)


def refuse_newer_schema(manifest: Manifest, source: Path) -> None:
    newest = schema.LATEST_VERSION
    if manifest.schema_version > newest:
        raise Conflict(f"archive: {source.name} holds a graph of schema version {manifest.schema_version}, newer "
                       f"than this kumiho-ce knows ({newest}; made by kumiho-ce {manifest.kumiho_ce_version}); "
                       "upgrade kumiho-ce, then restore it", field="archive")


def store_is_empty(data_dir: DataDir) -> bool:
    """No graph yet, or a graph without items (opened briefly: the caller holds the lock, nothing else runs)."""
    if not data_dir.graph_path.exists():
        return True
    engine = KuzuEngine(data_dir.graph_path, buffer_pool_mb=64, readers=1)
    try:
        def count(tx: Tx) -> int:
            if "Item" not in {row[0] for row in tx.rows("CALL show_tables() RETURN name")}:
                return 0
            return int(tx.scalar("MATCH (i:Item) RETURN count(i)") or 0)

        return engine.read(count) == 0
    finally:
        engine.close()


def hydrate_if_empty(settings: Settings, data_dir: DataDir) -> Restored | None:
    """``[memory] auto_hydrate``: when the store is empty, restore the newest snapshot that holds items and
    passes its checksums (an older one when the newest fails). None when nothing was restored."""
    directory = backup_directory(settings)
    try:
        listed = list_archives(directory)
    except KumihoError as exc:  # an unreadable snapshot directory must not keep the appliance from starting
        log.error("auto_hydrate: %s; starting without looking for a snapshot", exc.message)
        return None
    candidates = [info for info in listed
                  if info.counts.get("items", 0) > 0 and info.schema_version <= schema.LATEST_VERSION]
    if not candidates or not store_is_empty(data_dir):
        return None
    for info in candidates:
        try:
            restored = restore(data_dir, directory / info.name)
        except KumihoError as exc:
            log.error("auto_hydrate: the snapshot %s cannot be restored (%s); trying an older one",
                      directory / info.name, exc.message)
            continue
        log.warning("auto_hydrate: the store was empty; restored the snapshot %s (%d items, made %s)",
                    directory / info.name, info.counts.get("items", 0), info.created_at)
        return restored
    log.error("auto_hydrate: the store is empty and no snapshot in %s could be restored; starting empty", directory)
    return None
