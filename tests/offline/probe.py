"""What the appliance does beyond its data directory: every ``connect()`` and every file it writes elsewhere.

``python -m tests.offline.probe`` starts ``kumiho-ce serve`` (the default embedding model, so that ONNX
Runtime runs too) under ``strace -f``, stores, engages, searches, ingests and consolidates through MCP and
the search API, stops it, and prints as JSON the connections it attempted (loopback or not) and the files
it wrote, renamed or created outside the data directory, each either matched by a justified allow-list
entry or listed as unexplained. Run it inside a network namespace with only loopback (``unshare -n``; the
offline test and ``make test-offline`` do): there a connect() to anywhere else fails with ENETUNREACH and
is recorded all the same.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from tests.appliance_process import ROOT, cli_env, free_port, wait_until_live
from tests.mcp_api.clients import RevkaLikeClient

TRACED = "connect,open,openat,creat,rename,renameat,renameat2,mkdir,mkdirat,link,linkat,symlink,symlinkat"

# Writes outside the data directory that are expected, each with the reason it is harmless.
ALLOWED: dict[str, str] = {
    r"/__pycache__/[^/]+\.pyc(\.\d+)?$": "Python's bytecode cache of the installed code (no user data; "
                                        "PYTHONDONTWRITEBYTECODE=1 turns it off)",
    r"^/dev/(null|tty|urandom|random)$": "devices, not files",
}

_CALL = re.compile(r"^(?P<pid>\d+)\s+(?P<name>\w+)\((?P<args>.*)\)\s+=\s+(?P<result>-?\d+)(?P<tail>.*)$")
_PATH = re.compile(r'(?:(?P<dirfd>AT_FDCWD|\d+)(?:<(?P<dir>[^>]*)>)?, )?"(?P<path>(?:[^"\\]|\\.)*)"')
_WRITE_FLAGS = re.compile(r"\bO_(WRONLY|RDWR|CREAT|TRUNC|APPEND)\b")


@dataclass(frozen=True)
class Connection:
    family: str
    address: str
    result: str

    @property
    def loopback(self) -> bool:
        if self.family == "AF_INET":
            return self.address.split(":")[0].startswith("127.")
        if self.family == "AF_INET6":
            host = self.address.rsplit(":", 1)[0].strip("[]")
            return host == "::1" or host.startswith("::ffff:127.")
        return True  # AF_UNIX, AF_NETLINK: this machine only


def parse_connect(args: str, result: str) -> Connection | None:
    family = re.search(r"sa_family=(AF_\w+)", args)
    if family is None:
        return None
    name = family.group(1)
    if name == "AF_INET":
        host = re.search(r'inet_addr\("([^"]+)"\)', args)
        port = re.search(r"sin_port=htons\((\d+)\)", args)
        address = f"{host.group(1) if host else '?'}:{port.group(1) if port else '?'}"
    elif name == "AF_INET6":
        host = re.search(r'inet_pton\(AF_INET6, "([^"]+)"', args)
        port = re.search(r"sin6_port=htons\((\d+)\)", args)
        address = f"[{host.group(1) if host else '?'}]:{port.group(1) if port else '?'}"
    else:
        path = re.search(r'sun_path=(@?"[^"]*")', args)
        address = path.group(1) if path else ""
    return Connection(name, address, result)


def written_paths(name: str, args: str, result: str, tail: str) -> list[str]:
    """The absolute paths a successful call wrote, created or renamed onto (none for reads)."""
    if int(result) < 0:
        return []
    paths = [_absolute(m) for m in _PATH.finditer(args)]
    if name in ("open", "openat"):
        if not _WRITE_FLAGS.search(args):
            return []
        opened = re.match(r"<([^>]*)>", tail.strip())  # strace -y shows the file the new fd is
        return [opened.group(1)] if opened else paths[-1:]
    if name in ("rename", "renameat", "renameat2", "link", "linkat", "symlink", "symlinkat"):
        return paths[-1:]  # the new name
    return paths  # creat, mkdir, mkdirat


def _absolute(match: re.Match[str]) -> str:
    path = match.group("path").encode().decode("unicode_escape")
    if path.startswith("/") or not match.group("dir"):
        return path
    return str(Path(match.group("dir")) / path)


def _whole_calls(lines: list[str]) -> list[str]:
    """strace -f splits a call that another thread interrupts into ``… <unfinished ...>`` and
    ``<pid> <... name resumed>…``: join the halves."""
    pending: dict[str, str] = {}
    whole = []
    for line in lines:
        pid, _, rest = line.partition(" ")
        if rest.endswith("<unfinished ...>"):
            pending[pid] = line[: -len("<unfinished ...>")].rstrip()
        elif rest.lstrip().startswith("<... ") and pid in pending:
            whole.append(pending.pop(pid) + rest.split("resumed>", 1)[1])
        else:
            whole.append(line)
    return whole


def read_trace(trace: Path, data_dir: Path) -> dict[str, Any]:
    connections: list[Connection] = []
    outside: set[str] = set()
    inside = 0
    root = str(data_dir.resolve())
    for line in _whole_calls(trace.read_text(errors="replace").splitlines()):
        call = _CALL.match(line)
        if call is None:
            continue
        name, args, result, tail = call["name"], call["args"], call["result"], call["tail"]
        if name == "connect":
            found = parse_connect(args, f"{result}{tail}".strip())
            if found is not None:
                connections.append(found)
            continue
        for path in written_paths(name, args, result, tail):
            resolved = os.path.normpath(path)
            if resolved != root and not resolved.startswith(root + "/"):
                outside.add(resolved)
            else:
                inside += 1
    explained: dict[str, list[str]] = {}
    unexplained = []
    for path in sorted(outside):
        reason = next((why for pattern, why in ALLOWED.items() if re.search(pattern, path)), None)
        if reason is None:
            unexplained.append(path)
        else:
            explained.setdefault(reason, []).append(path)
    beyond = [c for c in connections if not c.loopback]
    return {
        "connects": len(connections),
        "connects_beyond_loopback": [f"{c.family} {c.address} -> {c.result}" for c in beyond],
        "local_connects": sorted({f"{c.family} {c.address}" for c in connections if c.loopback}),
        "writes_in_data_dir": inside,  # proof that the trace saw the appliance work at all
        "written_outside_data_dir": {"explained": explained, "unexplained": unexplained},
    }


def exercise(base_url: str) -> dict[str, Any]:
    """Every kind of work that loads a library: writes and the index (ONNX), recall, the search API,
    working memory and a consolidation (spaCy for the transcript)."""
    with RevkaLikeClient(base_url) as mcp:
        mcp.handshake()
        stored = json.loads(mcp.tool_text("kumiho_memory_store", {
            "title": "Offline probe", "user_text": "The offline probe stores this note about tide tables."}))
        engaged = json.loads(mcp.tool_text("kumiho_memory_engage", {"query": "what about tide tables?"}))
        json.loads(mcp.tool_text("kumiho_memory_ingest", {"user_id": "probe", "session_id": "offline-probe",
                                                          "message": "Ada Lovelace checked the tide tables."}))
        consolidated = json.loads(mcp.tool_text("kumiho_memory_consolidate", {
            "session_id": "offline-probe", "summary": "Tide tables were checked."}))
    deadline = time.monotonic() + 120
    while httpx.get(base_url + "/api/_ready", timeout=30).json()["search"]["pending"] and \
            time.monotonic() < deadline:
        time.sleep(0.2)  # both memories in the index before the search API looks
    found = httpx.get(base_url + "/api/v1/search", params={"q": "tide tables"}, timeout=60).json()
    return {"stored": bool(stored.get("revision_kref")), "engaged": engaged.get("count", 0),
            "consolidated": bool(consolidated.get("success")), "searched": found["count"]}


def probe(data_dir: Path, trace: Path) -> dict[str, Any]:
    strace = shutil.which("strace")
    if strace is None:
        raise SystemExit("the probe needs strace (apt-get install strace; make test-offline installs it)")
    port = free_port()
    env = cli_env(data_dir, KUMIHO_CE_SEARCH__EMBEDDER="minilm")
    log = data_dir.parent / "probe-serve.log"
    command = [strace, "-f", "-qq", "-y", "-e", f"trace={TRACED}", "-e", "signal=none", "-o", str(trace),
               sys.executable, "-m", "appliance", "serve", "--port", str(port)]
    with open(log, "a") as output:
        process = subprocess.Popen(command, cwd=ROOT, env=env, text=True, stdout=output, stderr=output)
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_until_live(base_url, process, timeout=180, log=log)
        done = exercise(base_url)
    finally:
        stop(process, data_dir)
    return {"network_interfaces": sorted(name for _, name in socket.if_nameindex()), "work": done,
            **read_trace(trace, data_dir)}


def stop(tracer: subprocess.Popen[str], data_dir: Path) -> None:
    """SIGTERM to the appliance itself (strace does not pass signals on); strace ends with it."""
    pid = None
    for source in (data_dir / "server.json", data_dir / "lock"):  # the lock names it while it starts
        try:
            text = source.read_text().strip()
            pid = int(json.loads(text)["pid"]) if source.suffix == ".json" else int(text)
            break
        except (OSError, ValueError, KeyError):
            continue
    try:
        if pid is not None:
            os.kill(pid, signal.SIGTERM)
        tracer.wait(timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        if pid is not None:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        tracer.kill()
        tracer.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", help="data directory to use (default: a new temporary one)")
    parser.add_argument("--trace", help="keep the strace output here")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kumiho-offline-") as scratch:
        data_dir = Path(args.data_dir) if args.data_dir else Path(scratch) / "data"
        report = probe(data_dir, Path(args.trace) if args.trace else Path(scratch) / "strace.log")
    print(json.dumps(report, indent=1))
    written = report["written_outside_data_dir"]["unexplained"]
    return 1 if report["connects_beyond_loopback"] or written else 0


if __name__ == "__main__":
    sys.exit(main())
