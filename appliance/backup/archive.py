"""The backup archive: one gzip-compressed tar file, ``manifest.json`` first, then the data directory's parts.

    manifest.json         format, versions, when and why it was made, counts, and every file's size and sha256
    config.toml           the effective configuration, with every credential left out
    graph/graph.kuzu      the graph (checkpointed; graph.kuzu.wal too when readers kept the checkpoint off)
    index/…               the search index (LanceDB)
    artifacts/…           the files the graph points to
    working/working.sqlite3  working memory (open sessions)

Compressed because the graph's database file is mostly pages Kùzu reserved and has not filled: a 22 MB file
of five memories compresses to 0.2 MB at gzip's fastest level, in 0.2 s. The fastest level because the
archive is written while the appliance serves (after the stores were released, but on the same CPUs), and
gzip because every tar reads it and it streams: the manifest is read first, and every checksum verified, in
one pass. Restore also reads uncompressed, ``.tar.xz`` and ``.tar.bz2`` archives (recompressed by hand).

The token never enters an archive: whoever holds a backup file does not hold the key to the appliance.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import io
import json
import os
import re
import tarfile
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO, Any

from appliance.errors import InvalidArgument, StorageError

FORMAT = "kumiho-ce-backup"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
CONFIG = "config.toml"
PARTS = ("graph", "index", "artifacts", "working")  # the data directory's parts an archive holds
REASONS = ("manual", "snapshot", "pre-migration", "hygiene")
COMPRESS_LEVEL = 1  # gzip's fastest (see above)
MAX_MANIFEST_BYTES = 64 * 1024 * 1024  # a manifest lists files; 64 MB is ~500k of them
CHUNK = 1024 * 1024

Progress = Callable[[int, int], None]  # (bytes done, bytes in all)


@dataclass(frozen=True)
class FileEntry:
    path: str  # inside the archive, POSIX, relative
    size: int
    sha256: str


@dataclass(frozen=True)
class Manifest:
    kumiho_ce_version: str
    schema_version: int
    created_at: str  # RFC 3339, UTC
    reason: str
    counts: dict[str, int]
    files: tuple[FileEntry, ...]
    format: str = FORMAT
    format_version: int = FORMAT_VERSION
    notes: dict[str, str] = field(default_factory=dict)

    @property
    def total_bytes(self) -> int:
        return sum(entry.size for entry in self.files)

    def to_json(self) -> bytes:
        body = asdict(self)
        ordered = {key: body[key] for key in ("format", "format_version", "kumiho_ce_version", "schema_version",
                                              "created_at", "reason", "counts", "notes", "files")}
        return json.dumps(ordered, indent=1, ensure_ascii=False).encode() + b"\n"

    @classmethod
    def from_json(cls, raw: bytes, where: str) -> Manifest:
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("not an object")
            if body.get("format") != FORMAT:
                raise ValueError(f"format is {str(body.get('format'))[:64]!r}, not {FORMAT!r}")
            version = body.get("format_version")
            if not isinstance(version, int) or version > FORMAT_VERSION or version < 1:
                raise ValueError(f"format version {str(version)[:16]} is not one this kumiho-ce reads "
                                 f"(1..{FORMAT_VERSION}); upgrade kumiho-ce")
            files = tuple(FileEntry(str(f["path"]), int(f["size"]), str(f["sha256"])) for f in body["files"])
            notes = {str(k): str(v) for k, v in dict(body.get("notes", {})).items()}
            manifest = cls(kumiho_ce_version=str(body["kumiho_ce_version"]), schema_version=int(body["schema_version"]),
                           created_at=str(body["created_at"]), reason=str(body["reason"]),
                           counts={str(k): int(v) for k, v in dict(body["counts"]).items()}, files=files,
                           format_version=version, notes=notes)
        except (ValueError, KeyError, TypeError) as exc:
            raise InvalidArgument(f"archive: {where} has no valid {MANIFEST} ({exc}); it is not a kumiho-ce "
                                  "backup or it is damaged", field="archive") from None
        for entry in files:
            check_member_path(entry.path, where)
        return manifest


def check_member_path(path: str, where: str) -> None:
    """Refuse a path that could leave the extraction directory or is not one of an archive's parts."""
    pure = PurePosixPath(path)
    if (pure.is_absolute() or ".." in pure.parts or not pure.parts or "\\" in path or "\0" in path
            or (pure.parts[0] not in PARTS and path != CONFIG) or str(pure) != path):
        raise InvalidArgument(f"archive: {where} names the file {path[:200]!r}, which no kumiho-ce backup "
                              "holds; it was refused", field="archive")


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def staged_files(staging: Path) -> list[tuple[str, Path]]:
    """Every regular file under ``staging`` as (archive path, file), in a stable order."""
    found = []
    for root, dirs, files in os.walk(staging):
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            found.append((path.relative_to(staging).as_posix(), path))
    return found


def write(staging: Path, manifest_fields: dict[str, Any], destination: Path, progress: Progress | None = None
          ) -> Manifest:
    """Write the files under ``staging`` into the archive ``destination`` (through a temporary file renamed
    into place once synced, so a crash never leaves a partial archive under its name)."""
    files = staged_files(staging)
    entries = tuple(FileEntry(name, path.stat().st_size, sha256_of(path)) for name, path in files)
    manifest = Manifest(files=entries, **manifest_fields)
    raw = manifest.to_json()
    temp = destination.with_name(f".{destination.name}.partial")
    total, done = manifest.total_bytes, 0
    try:
        with temp.open("wb") as handle:
            with tarfile.open(fileobj=handle, mode="w:gz", format=tarfile.PAX_FORMAT,
                              compresslevel=COMPRESS_LEVEL) as tar:
                _add_bytes(tar, MANIFEST, raw)
                for (name, path), entry in zip(files, entries, strict=True):
                    info = tarfile.TarInfo(name)
                    info.size, info.mode, info.mtime = entry.size, 0o600, int(path.stat().st_mtime)
                    with path.open("rb") as source:
                        tar.addfile(info, source)
                    done += entry.size
                    if progress:
                        progress(done, total)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, 0o600)  # memories are private
        os.replace(temp, destination)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    return manifest


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), 0o600
    tar.addfile(info, io.BytesIO(data))


def read_manifest(archive: Path) -> Manifest:
    """The manifest alone (the first member), without reading the rest: for listings. FileNotFoundError when
    the file is gone."""
    if not archive.exists():
        raise FileNotFoundError(archive)
    try:
        with tarfile.open(archive, mode="r|*") as tar:
            return _first_manifest(tar, archive.name)
    except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
        raise InvalidArgument(f"archive: {archive.name} cannot be read as a tar file ({exc}); it is not a "
                              "kumiho-ce backup or it is damaged", field="archive") from None


def verify(archive: Path, progress: Progress | None = None, extract_to: Path | None = None) -> Manifest:
    """Read the whole archive once and check it against its manifest: every file listed is present with its
    size and sha256, and nothing else is there. With ``extract_to``, the files are written there as they are
    checked (the caller keeps that directory only when this returns). Raises InvalidArgument naming the first
    bad file."""
    where = archive.name
    seen: list[str] = []
    seen_names: set[str] = set()
    done = 0
    try:
        with tarfile.open(archive, mode="r|*") as tar:
            manifest = _first_manifest(tar, where)
            expected = {entry.path: entry for entry in manifest.files}
            while (member := tar.next()) is not None:
                check_member_path(member.name, where)
                entry = expected.get(member.name)
                if entry is None:
                    raise _bad(where, member.name, "is not listed in the manifest")
                if member.name in seen_names:
                    raise _bad(where, member.name, "appears twice")
                if not member.isfile():
                    raise _bad(where, member.name, "is not a regular file (links and devices are refused)")
                if member.size != entry.size:  # refused before a byte is written: the manifest bounds the disk
                    raise _bad(where, entry.path, f"holds {member.size} bytes where the manifest says {entry.size}")
                handle = tar.extractfile(member)
                assert handle is not None  # a regular file
                seen.append(member.name)
                seen_names.add(member.name)
                digest, size = hashlib.sha256(), 0
                out = _Target(extract_to, entry.path) if extract_to is not None else None
                try:
                    while chunk := handle.read(min(CHUNK, entry.size - size + 1)):
                        size += len(chunk)
                        if size > entry.size:  # never write past the size the manifest gives the file
                            raise _bad(where, entry.path, f"holds more than the {entry.size} bytes the manifest "
                                       "says")
                        digest.update(chunk)
                        if out is not None:
                            out.write(chunk)
                        done += len(chunk)
                        if progress:
                            progress(done, manifest.total_bytes)
                finally:
                    if out is not None:
                        out.close()
                if size != entry.size:
                    raise _bad(where, entry.path, f"holds {size} bytes where the manifest says {entry.size} "
                               "(the archive is truncated)")
                if digest.hexdigest() != entry.sha256:
                    raise _bad(where, entry.path, "does not match its sha256 in the manifest (the archive is "
                               "damaged)")
    except (tarfile.TarError, EOFError, OSError, zlib.error) as exc:
        last = seen[-1] if seen else MANIFEST
        raise InvalidArgument(f"archive: {where} is damaged or truncated at {last} ({exc}); the archive was "
                              "refused and nothing was changed", field="archive") from None
    missing = [path for path in expected if path not in seen_names]
    if missing:
        raise _bad(where, missing[0], "is listed in the manifest but missing from the archive (the archive is "
                   "truncated)")
    return manifest


def _first_manifest(tar: tarfile.TarFile, where: str) -> Manifest:
    first = tar.next()
    if first is None or first.name != MANIFEST or not first.isfile() or first.size > MAX_MANIFEST_BYTES:
        raise InvalidArgument(f"archive: {where} does not start with {MANIFEST}; it is not a kumiho-ce backup",
                              field="archive")
    handle = tar.extractfile(first)
    assert handle is not None  # a regular file
    raw = handle.read()
    if len(raw) != first.size:
        raise _bad(where, MANIFEST, "is truncated")
    return Manifest.from_json(raw, where)


class _Target:
    """A file being extracted. A write error here (a full disk, a read-only or unwritable data directory) is
    the data directory's problem, not the archive's: it is reported as a StorageError naming the directory,
    never as a damaged archive."""

    def __init__(self, root: Path, relative: str) -> None:
        self.root, self.path = root, root / relative
        self._guard(lambda: self.path.parent.mkdir(parents=True, exist_ok=True, mode=0o700))
        self.handle: IO[bytes] = self._guard(lambda: self.path.open("xb"))

    def write(self, chunk: bytes) -> None:
        self._guard(lambda: self.handle.write(chunk))

    def close(self) -> None:
        """Flushed and fsynced: a restore renames these files into place, and a crash must find them whole."""
        try:
            self._guard(self.handle.flush)
            self._guard(lambda: os.fsync(self.handle.fileno()))
        finally:
            with contextlib.suppress(OSError):  # a flush that failed again: already reported above
                self.handle.close()

    def _guard(self, step: Callable[[], Any]) -> Any:
        try:
            return step()
        except OSError as exc:
            raise extraction_failed(self.root, exc) from None


def extraction_failed(root: Path, exc: OSError) -> StorageError:
    where = root.parent  # the data directory (staging is inside it)
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        fix = f"free space in {where} (the restore needs room for the whole archive unpacked)"
    else:
        fix = f"make {where} writable and give it room for the whole archive unpacked"
    return StorageError(f"restore: cannot write into {where} ({exc.strerror or exc}); {fix}, then run the restore "
                        "again. The archive is not at fault, and nothing was changed")


def _bad(where: str, path: str, why: str) -> InvalidArgument:
    return InvalidArgument(f"archive: {where}: the file {path} {why}; the archive was refused and nothing was "
                           "changed", field="archive")


def backup_name(created_at: str, reason: str) -> str:
    """``kumiho-ce-20261202T003000Z-snapshot.tar.gz``: sorts by time, says why."""
    stamp = re.sub(r"[-:]", "", created_at.split(".")[0].replace("+00:00", "")) + "Z"
    return f"kumiho-ce-{stamp}-{reason}.tar.gz"
