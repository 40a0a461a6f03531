"""Files the appliance writes that matter: durable writes and paths kept inside the data directory.

An artifact file is the only full copy of a long memory's text (the graph keeps a clipped summary), and the
graph commit that points at it is fsynced. So the file must be on disk before that commit: written to a
temporary name in its own folder, fsynced, renamed into place, and the folder fsynced so the rename itself
survives a power cut. A crash before the rename leaves only a ``*.tmp`` file, which the start-up sweep
(``appliance.memory.artifacts``) removes.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

from appliance.errors import InvalidArgument

TEMP_SUFFIX = ".tmp"


def inside(root: Path, *parts: str, field: str = "project") -> Path:
    """``root / parts…``, refused unless it resolves inside ``root``: no name a client chose (a project, a
    space) may lead a write elsewhere, whatever ``..``, absolute path or symlink it holds."""
    base = root.resolve()
    for part in parts:
        if not part or part in (".", "..") or "/" in part or "\\" in part or "\x00" in part:
            raise InvalidArgument(f"{field}: {part!r} cannot name a folder; use letters, digits, '_' and '-'",
                                  field=field)
    target = base.joinpath(*parts).resolve()
    if not target.is_relative_to(base):
        raise InvalidArgument(f"{field}: {'/'.join(parts)!r} leads outside the data directory; use letters, "
                              "digits, '_' and '-'", field=field)
    return target


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dirs(folder: Path) -> None:
    """``mkdir -p`` that also fsyncs each parent whose entry it created (a new folder is a directory entry
    too: without this a power cut can lose the folder, and the file inside it)."""
    missing: list[Path] = []
    current = folder
    while not current.exists():
        missing.append(current)
        current = current.parent
    for path in reversed(missing):
        path.mkdir(exist_ok=True, mode=0o700)
        fsync_dir(path.parent)


def write_durably(path: Path, data: bytes | str, *, sync_folder: bool = True, mode: int = 0o600) -> Path:
    """Write ``data`` to ``path`` so that it is complete on disk when this returns: a temporary file in the
    same folder, fsynced, renamed over ``path``, then the folder fsynced. Readers never see a partial file.
    A caller writing a batch may pass ``sync_folder=False`` and fsync each distinct folder once itself.
    ``mode``: the file's permissions, exactly (not left to the umask); private unless said otherwise."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    make_dirs(path.parent)
    temp = path.with_name(f"{path.name}.{uuid.uuid4().hex[:8]}{TEMP_SUFFIX}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    if sync_folder:
        fsync_dir(path.parent)
    return path
