"""The backup directory: making archives into it, listing, finding and deleting them, rotating snapshots.

Names that reach this module from a request are only ever compared with the listing: a file is opened or
deleted through the listing's own name, so no path from outside reaches the file system.
"""

from __future__ import annotations

import logging
import re
import shutil
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from appliance import __version__
from appliance.backup import archive
from appliance.backup.archive import Manifest, Progress
from appliance.backup.capture import Sources, capture
from appliance.config import Settings
from appliance.errors import InvalidArgument, NotFound, StorageError

log = logging.getLogger(__name__)

# an archive file the directory may hold: what ``archive.backup_name`` makes, or one a user put there
ARCHIVE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,200}\.tar(\.gz|\.xz|\.bz2)?$")
ROTATED = ("snapshot", "hygiene")  # reasons of scheduled snapshots; manual and pre-migration ones stay


def backup_directory(settings: Settings) -> Path:
    """``[memory] snapshot_dir``, or ``backups/`` in the data directory."""
    configured = settings.memory.snapshot_dir
    return configured.expanduser() if configured is not None else settings.data_dir / "backups"


@dataclass(frozen=True)
class BackupInfo:
    name: str
    size: int
    created_at: str
    reason: str
    schema_version: int
    kumiho_ce_version: str
    counts: dict[str, int]


@dataclass(frozen=True)
class Made:
    path: Path
    manifest: Manifest
    timings: dict[str, float]  # seconds (see capture.Cut), plus ``archive``: writing the file


def list_archives(directory: Path) -> list[BackupInfo]:
    """The archives in ``directory`` whose manifest reads, newest first (others are left alone: logged)."""
    try:
        entries = sorted(directory.iterdir())
    except FileNotFoundError:
        return []
    except OSError as exc:
        raise StorageError(f"the backup directory {directory} cannot be read: {exc.strerror}; fix its "
                           "permissions or set [memory] snapshot_dir") from None
    found = []
    for path in entries:
        if not ARCHIVE_NAME.match(path.name) or not path.is_file():
            continue
        try:
            manifest = archive.read_manifest(path)
            size = path.stat().st_size
        except InvalidArgument as exc:
            log.info("%s is not listed: %s", path, exc.message)
            continue
        except FileNotFoundError:  # deleted (rotated) since the directory was read
            continue
        found.append(BackupInfo(path.name, size, manifest.created_at, manifest.reason,
                                manifest.schema_version, manifest.kumiho_ce_version, manifest.counts))
    return sorted(found, key=lambda info: (info.created_at, info.name), reverse=True)


class Backups:
    """Archives of one appliance's data, made from ``sources`` into ``directory``; one at a time."""

    def __init__(self, directory: Path, sources: Sources) -> None:
        self.directory = directory
        self.sources = sources
        self._one_at_a_time = threading.Lock()

    def create(self, reason: str, progress: Progress | None = None) -> Made:
        if reason not in archive.REASONS:
            raise InvalidArgument(f"reason: {reason[:64]!r} is not one of {', '.join(archive.REASONS)}", field="reason")
        with self._one_at_a_time:
            try:
                self.directory.mkdir(parents=True, exist_ok=True, mode=0o700)
            except OSError as exc:
                raise StorageError(f"the backup directory {self.directory} cannot be created: {exc.strerror}; "
                                   "fix its permissions or set [memory] snapshot_dir") from None
            cut = capture(self.sources)
            try:
                created = datetime.now(UTC)
                name = self._free_name(created, reason)
                fields = {"kumiho_ce_version": __version__, "schema_version": cut.schema_version,
                          "created_at": created.isoformat(timespec="microseconds"), "reason": reason,
                          "counts": cut.counts, "notes": cut.notes}
                started = datetime.now(UTC)
                try:
                    manifest = archive.write(cut.staging, fields, self.directory / name, progress)
                except OSError as exc:
                    raise StorageError(f"the backup {self.directory / name} cannot be written: {exc.strerror}; "
                                       "free space or set [memory] snapshot_dir") from None
                writing = (datetime.now(UTC) - started).total_seconds()
            finally:
                shutil.rmtree(cut.staging, ignore_errors=True)
        log.info("backup %s written (%s; %d items; writes held %.3f s, index paused %.3f s)", self.directory / name,
                 reason, cut.counts.get("items", 0), cut.timings["writes_held"], cut.timings["index_paused"])
        return Made(self.directory / name, manifest, {**cut.timings, "archive": writing})

    def _free_name(self, created: datetime, reason: str) -> str:
        base = archive.backup_name(created.isoformat(timespec="seconds"), reason)
        name, n = base, 1
        while (self.directory / name).exists():
            n += 1
            name = base.replace(".tar.gz", f"-{n}.tar.gz")
        return name

    def listing(self) -> list[BackupInfo]:
        return list_archives(self.directory)

    def path_of(self, name: str) -> Path:
        """The archive the listing names ``name`` (the listing's own name is used, never the caller's)."""
        for info in self.listing():
            if info.name == name:
                return self.directory / info.name
        raise NotFound(f"name: no backup is named {name[:256]!r}; GET /api/v1/backups lists them", field="name")

    def delete(self, name: str) -> BackupInfo:
        path = self.path_of(name)
        info = next(info for info in self.listing() if info.name == path.name)
        path.unlink(missing_ok=True)
        log.info("backup %s deleted", path)
        return info

    def rotate(self, keep: int) -> list[str]:
        """Delete the scheduled snapshots beyond the newest ``keep``; the names deleted."""
        scheduled = [info for info in self.listing() if info.reason in ROTATED]
        removed = []
        for info in scheduled[keep:]:
            (self.directory / info.name).unlink(missing_ok=True)
            removed.append(info.name)
        if removed:
            log.info("snapshot rotation deleted %s", ", ".join(removed))
        return removed
