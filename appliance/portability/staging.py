"""Files an import reads: staged in ``<data dir>/imports/`` and named, never given as a path.

A client on this machine (``kumiho-ce import`` talking to a running appliance) copies a large file there and
names it; an upload (``POST /api/v1/imports`` with an ``application/x-ndjson`` body) is written there under a
name of its own and removed once its import has ended.
"""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path

from appliance.datadir import DataDir
from appliance.errors import InvalidArgument, NotFound
from appliance.fsutil import make_dirs

FOLDER = "imports"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
NAME_RULE = "1 to 128 of A-Z a-z 0-9 . _ -, starting with a letter or digit"
UPLOAD_PREFIX = "upload-"


def imports_dir(data_dir: DataDir) -> Path:
    return data_dir.root / FOLDER


def staged_file(data_dir: DataDir, name: str) -> Path:
    """The staged file ``name`` (a plain name inside ``imports/``, a regular file)."""
    if not isinstance(name, str) or not NAME.fullmatch(name) or ".." in name:
        raise InvalidArgument(f"file: give the name of a file in the data directory's {FOLDER}/ folder ({NAME_RULE}), "
                              "not a path", field="file")
    folder = imports_dir(data_dir).resolve()
    path = folder / name
    if path.is_symlink() or not path.is_file() or path.resolve().parent != folder:
        raise NotFound(f"file: no file {name!r} in the data directory's {FOLDER}/ folder; copy the export there "
                       "first (kumiho-ce import does this for you)", field="file")
    return path


def stage_upload(data_dir: DataDir, body: bytes) -> Path:
    """Write an uploaded body under a new name in ``imports/`` (0600); the caller removes it when done."""
    folder = imports_dir(data_dir)
    make_dirs(folder)
    path = folder / f"{UPLOAD_PREFIX}{uuid.uuid4().hex}.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(body)
    return path
