"""The data directory: its layout and the lock that keeps it to one process.

    <data_dir>/
      lock        flock held by the owning process; holds its pid
      graph/      Kùzu database (graph.kuzu + its WAL)
      index/      LanceDB tables (derived from the graph; rebuilt by reindex)
      index.damaged-<UTC time>/  a damaged index, moved aside when it was rebuilt (kept for the operator)
      artifacts/  files the appliance writes itself (transcripts, reports, logs)
      working/    persisted working memory of open sessions
      imports/    export files staged for an import (created by the first one; see appliance.portability)
      token       bearer token for requests from beyond loopback (0600)
      server.json where the running appliance listens ({pid, host, port}); gone when it stops, and
                  stale (ignored, then replaced) when its owner was killed
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

from appliance.errors import DataDirError, DataDirInUse

log = logging.getLogger(__name__)

SUBDIRS = ("graph", "index", "artifacts", "working")


@dataclass(frozen=True)
class DataDir:
    root: Path

    @property
    def graph_path(self) -> Path:
        return self.root / "graph" / "graph.kuzu"

    @property
    def lock_path(self) -> Path:
        return self.root / "lock"

    @property
    def token_path(self) -> Path:
        return self.root / "token"

    @property
    def runtime_path(self) -> Path:
        return self.root / "server.json"

    def write_runtime(self, host: str, port: int) -> None:
        temp = self.runtime_path.with_suffix(".tmp")
        temp.write_text(json.dumps({"pid": os.getpid(), "host": host, "port": port}))
        temp.replace(self.runtime_path)

    def read_runtime(self) -> dict[str, object] | None:
        try:
            return json.loads(self.runtime_path.read_text())  # type: ignore[no-any-return]  # write_runtime's
        except (OSError, ValueError):
            return None

    def live_runtime(self) -> dict[str, object] | None:
        """``server.json`` when it names the running owner of this directory; None when absent or stale."""
        runtime = self.read_runtime()
        return runtime if runtime is not None and self.stale_reason(runtime) is None else None

    def stale_reason(self, runtime: dict[str, object]) -> str | None:
        """Why ``runtime`` (a ``server.json``) cannot be the running owner's, or None when it can be. A
        ``kill -9`` leaves the file behind; its pid may since have been reused. Reads only: probing the lock
        by taking it would make an appliance that is starting at that moment fail."""
        pid = runtime.get("pid")
        if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
            return "it names no process"
        process = _process_state(pid)
        if process == "gone":
            return f"its process {pid} is gone"
        if process == "other":
            return f"process {pid} is not a kumiho-ce"
        locker = self.lock_file_pid()
        if locker is not None and locker != pid:
            return f"the data-directory lock was last taken by process {locker}, not {pid}"
        return None

    def lock_file_pid(self) -> int | None:
        """The pid the last owner wrote into the lock file (whether or not it still holds the lock)."""
        try:
            return int(self.lock_path.read_text().strip() or 0) or None
        except (OSError, ValueError):
            return None

    def clear_runtime(self) -> None:
        self.runtime_path.unlink(missing_ok=True)

    def ensure(self) -> None:
        """Create the layout (0700: memories are private) or say why it cannot be."""
        try:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o700)
            for name in SUBDIRS:
                (self.root / name).mkdir(exist_ok=True, mode=0o700)
        except OSError as exc:
            raise DataDirError(
                f"data directory {self.root} cannot be created: {exc.strerror}; choose another with "
                "KUMIHO_CE_DATA_DIR or fix its permissions"
            ) from None
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise DataDirError(f"data directory {self.root} is not writable by this user")

    def lock(self) -> DataDirLock:
        return DataDirLock(self.lock_path)

    def holder_pid(self) -> int | None:
        """The pid recorded by the process holding the lock, if any process holds it."""
        try:
            with DataDirLock(self.lock_path):
                return None
        except DataDirInUse as exc:
            return exc.pid
        except DataDirError:
            return None

    def read_or_create_token(self) -> str:
        """The token file's content; a new token when the file is missing or empty. An empty file is what a
        crash or a full disk during an older, unsynced write could leave: it never held a usable token, so a
        new one replaces it (and the log says so)."""
        try:
            token = self.token_path.read_text().strip()
        except FileNotFoundError:
            token = None
        except (OSError, UnicodeDecodeError) as exc:
            raise DataDirError(f"the token file {self.token_path} cannot be read ({exc}); fix its permissions "
                               "or delete it to have a new token generated") from None
        if token:
            return token
        new = secrets.token_urlsafe(32)
        try:
            write_private_file(self.token_path, new + "\n")
        except OSError as exc:
            raise DataDirError(f"the token file {self.token_path} cannot be written: {exc.strerror}; free "
                               "space or fix the permissions of the data directory") from None
        if token is not None:
            log.warning("the token file %s was empty; a new token was written to it", self.token_path)
        return new


def write_private_file(path: Path, text: str) -> None:
    """Replace ``path`` atomically with ``text``, readable by this user only: a temporary file (0600) is
    written and synced, renamed over ``path``, and the directory synced, so a crash leaves the old file or
    the new one, never an empty or partial one."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # O_CREAT's mode does not apply to a leftover temporary file
        os.write(fd, text.encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(temp, path)
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)


class DataDirLock:
    """An exclusive, non-blocking flock on ``<data_dir>/lock``; released when the process dies."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError as exc:
            raise DataDirError(f"cannot open lock file {self.path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            holder = f"pid {pid}" if pid else "another process"
            raise DataDirInUse(
                f"data directory {self.path.parent} is in use by another kumiho-ce process ({holder}). "
                "Only one process may own it: stop that process, point KUMIHO_CE_DATA_DIR elsewhere, or "
                "talk to the running appliance (kumiho-ce mcp and the HTTP API do).",
                pid,
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> DataDirLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _process_state(pid: int) -> str:
    """"gone" (no such process, or a zombie), "other" (a process that is not kumiho-ce), or "kumiho-ce"
    (also when /proc cannot tell: only Linux has it, and then the lock decides)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "gone"
    except PermissionError:
        pass  # another user's process: alive
    proc = Path("/proc") / str(pid)
    try:
        state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        argv = (proc / "cmdline").read_bytes().split(b"\0")
    except FileNotFoundError:
        return "gone" if Path("/proc/self").exists() else "kumiho-ce"
    except (OSError, IndexError):
        return "kumiho-ce"
    if state in ("Z", "X"):
        return "gone"
    # `kumiho-ce serve` (a console script: python …/bin/kumiho-ce serve) or `python -m appliance serve`
    return "kumiho-ce" if any(Path(arg.decode(errors="replace")).name == "kumiho-ce" or arg == b"appliance"
                              for arg in argv) else "other"


def _read_pid(fd: int) -> int | None:
    try:
        return int(os.pread(fd, 32, 0).decode().strip() or 0) or None
    except (OSError, ValueError):
        return None
