"""``kumiho-ce doctor``: the stores of the data directory: who holds it, the graph's schema version and whether
the search index agrees with the graph.

A running appliance is never disturbed: who holds the data-directory lock is read from ``/proc/locks`` (taking
the lock, even for an instant, would make an appliance that starts at that moment refuse to), and the graph is
opened (read-only) only when no process holds the lock; while one does, its own answers are asked instead."""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path
from typing import Any

from appliance.config import Settings
from appliance.datadir import DataDir
from appliance.doctor_check import Check
from appliance.errors import KumihoError
from appliance.graph import schema

RESTORE_FIX = "restore a backup: kumiho-ce snapshots lists them, kumiho-ce restore <file> puts one back"
REPAIR_FIX = ("none needed: the next kumiho-ce serve repairs the index as it starts (in the background); to do it "
              "now, with the appliance stopped: kumiho-ce reindex")


def lock_holder(data_dir: DataDir) -> int | None:
    """The pid of the process that holds the data-directory lock (0 when it cannot be named), None when free."""
    try:
        inode = data_dir.lock_path.stat().st_ino
    except OSError:
        return None  # no lock file: no kumiho-ce ever owned this directory
    try:
        locks = Path("/proc/locks").read_text()
    except OSError:
        return data_dir.holder_pid()  # no /proc (not Linux): probing by taking the lock is all there is
    for line in locks.splitlines():
        # "1: FLOCK  ADVISORY  WRITE 1980 fe:00:2146836 0 EOF" (a waiter's line reads "1: -> FLOCK …"). The
        # inode alone decides: on overlayfs (a container) the device shown is not the one stat() gives.
        parts = line.split()
        if len(parts) >= 6 and parts[1] == "FLOCK" and parts[5].rsplit(":", 1)[-1] == str(inode):
            pid = int(parts[4]) if parts[4].lstrip("-").isdigit() else 0
            return pid if pid > 0 else (data_dir.lock_file_pid() or 0)
    return None


def holder_text(pid: int) -> str:
    return f"pid {pid}" if pid else "a process in another namespace"


# -- appliance stopped: the graph and the index, read here ---------------------------------------------------

def check_stopped_store(settings: Settings, data_dir: DataDir) -> list[Check]:
    """The schema version and the index consistency, from one read-only open of the graph."""
    from appliance.graph.engine import KuzuEngine

    path = data_dir.graph_path
    if not path.exists():
        hydrate = (" (or restores the newest snapshot of memory.snapshot_dir there: auto_hydrate)"
                   if settings.memory.auto_hydrate else "")
        return [Check.warn("database", f"{path} not created yet", f"none needed: kumiho-ce serve creates it on "
                           f"its first start{hydrate}"), check_index(data_dir, None)]
    try:
        engine = KuzuEngine(path, buffer_pool_mb=64, readers=1, read_only=True)
    except KumihoError as exc:
        return [Check.fail("database", exc.message, RESTORE_FIX), check_index(data_dir, None)]
    try:
        version = engine.read(schema.current_version)
        revisions = engine.read(_revisions) if version <= schema.LATEST_VERSION else None
    except Exception as exc:  # a graph whose tables cannot be read: Kùzu raises RuntimeError
        return [Check.fail("database", f"{path} opens but cannot be read ({exc})", RESTORE_FIX),
                check_index(data_dir, None)]
    finally:
        engine.close()
    return [check_schema(settings, version), check_index(data_dir, revisions)]


def _revisions(tx: Any) -> tuple[set[str], set[str]]:
    """Every revision's kref, and those whose index row is missing or stale (the outbox flag)."""
    from appliance.graph._support import to_kref

    every = {to_kref(r[0]) for r in tx.rows("MATCH (r:Revision) RETURN r.id")}
    waiting = {to_kref(r[0]) for r in tx.rows("MATCH (r:Revision) WHERE NOT r.indexed RETURN r.id")}
    return every, waiting


def check_schema(settings: Settings, version: int) -> Check:
    from appliance.backup.store import backup_directory

    latest = schema.LATEST_VERSION
    if version > latest:
        return Check.fail("database", f"schema version {version} is newer than this kumiho-ce knows ({latest}): a "
                          "newer kumiho-ce wrote this data directory, and this one refuses to open it",
                          "install that newer kumiho-ce again, or restore a backup made by this version "
                          "(kumiho-ce restore <file>)")
    if version < latest:
        # the start snapshots the data directory before it migrates (appliance/backup/snapshots.py), and
        # refuses to migrate when it cannot: the operator needs to know where that copy goes, not to make one
        return Check.warn("database", f"schema version {version}; the next start upgrades it to {latest}, after "
                          f"saving a snapshot of the data directory in {backup_directory(settings)}",
                          "none needed; to go back afterwards: stop the appliance and `kumiho-ce restore` that "
                          "snapshot with the previous kumiho-ce")
    return Check.ok("database", f"opens cleanly; schema version {version} (current)")


def check_index(data_dir: DataDir, revisions: tuple[set[str], set[str]] | None) -> Check:
    """The index opens and every file reads (appliance/search/repair.py); with the graph's revisions: how many
    are not searchable yet, and how many rows belong to revisions that no longer exist."""
    from appliance.search import repair

    path = data_dir.root / "index"
    health = repair.check(path)
    copies = repair.damaged_copies(path)
    kept = (f"; {len(copies)} damaged cop{'y' if len(copies) == 1 else 'ies'} kept from earlier repairs "
            f"({', '.join(c.name for c in copies)}): delete them when no longer needed") if copies else ""
    if health.damaged:
        return Check.warn("index", f"the search index is damaged ({health.detail}); no memory is lost: the graph "
                          f"holds them all{kept}", "none needed: the next kumiho-ce serve moves it aside and "
                          "rebuilds it from the graph; to do it now: kumiho-ce reindex")
    every, waiting = revisions or (set(), set())
    unsearchable = len(waiting | (every - health.revision_krefs))
    orphans = len(health.revision_krefs - every)
    if health.state == "missing":
        if unsearchable:
            return Check.warn("index", f"no search index yet, so {unsearchable} revisions are not searchable{kept}",
                              REPAIR_FIX)
        return Check.ok("index", f"not built yet; kumiho-ce serve builds it from the graph{kept}")
    if revisions is None:
        return Check.ok("index", f"{path}: {health.detail} (not compared with the graph, which could not be "
                        f"read){kept}")
    findings = []
    if unsearchable:
        findings.append(f"{unsearchable} revision{'s are' if unsearchable != 1 else ' is'} not searchable yet "
                        "(new or changed since the index last saw them)")
    if orphans:
        findings.append(f"{orphans} index row{'s belong' if orphans != 1 else ' belongs'} to revisions the graph "
                        "no longer has (hidden from search)")
    if findings:
        return Check.warn("index", f"{path}: {health.detail}; {'; '.join(findings)}{kept}", REPAIR_FIX)
    return Check.ok("index", f"{path}: {health.detail}; every revision searchable, every row's revision in the "
                    f"graph{kept}")


# -- appliance running: asked, not opened --------------------------------------------------------------------

def running_address(settings: Settings, data_dir: DataDir) -> tuple[str, int]:
    """Where the owner of the data directory listens (``server.json``, else the configuration)."""
    runtime = data_dir.live_runtime() or {}
    host, port = str(runtime.get("host", settings.host)), runtime.get("port")
    return "127.0.0.1" if host in ("0.0.0.0", "::") else host, port if isinstance(port, int) else settings.port


def base_url(host: str, port: int) -> str:
    return f"http://{'[' + host + ']' if ':' in host else host}:{port}"


def _get(url: str, token: str | None) -> Any:
    request = urllib.request.Request(url, headers={"authorization": f"Bearer {token}"} if token else {})
    with urllib.request.urlopen(request, timeout=5) as response:  # loopback or the configured host only
        return json.load(response)


def check_running_store(settings: Settings, data_dir: DataDir, pid: int) -> list[Check]:
    """The graph and index of a running appliance, from its readiness answer (``GET /api/_ready``)."""
    from appliance.cli_connect import token_for

    url = base_url(*running_address(settings, data_dir))
    skipped = (f"skipped: the running appliance ({holder_text(pid)}) holds the store, and checks and repairs its "
               "index itself")
    try:
        live = _get(url + "/api/_live", None)
    except (OSError, ValueError) as exc:
        return [Check.warn("database", f"the owning process ({holder_text(pid)}) does not answer {url}/api/_live "
                           f"({exc})", "wait if it is starting; otherwise see its log (journalctl -u kumiho-ce), "
                           "or stop it and run kumiho-ce doctor again"), Check.ok("index", skipped)]
    database = f"owned by the running appliance, which answers {url}/api/_live (version {live.get('version')})"
    try:
        ready = _get(url + "/api/_ready", token_for(data_dir, settings))
        search = ready.get("search") or {}
        database += f"; schema version {ready.get('schema_version')}"
        skipped += f"; it reports {search.get('rows')} rows and {search.get('pending')} revisions waiting"
    except (OSError, ValueError, AttributeError):
        pass  # readiness needs the token beyond loopback; the liveness answer is enough to say it runs
    return [Check.ok("database", database), Check.ok("index", skipped)]


def check_runtime_file(data_dir: DataDir, holder: int | None) -> list[Check]:
    """A ``server.json`` that no running owner wrote (``kill -9`` leaves it): said, as it is harmless."""
    runtime = data_dir.read_runtime()
    if runtime is None:
        return []
    reason = "the data-directory lock is free" if holder is None else data_dir.stale_reason(runtime)
    if reason is None:
        return []
    return [Check.warn("server", f"{data_dir.runtime_path} is stale ({reason}; a killed appliance left it)",
                       "none needed: kumiho-ce mcp ignores it and the next start replaces it")]


def running_pid_uses(pid: int) -> str:
    """The resident memory of process ``pid`` in words, when this user may read it."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return f"{int(line.split()[1]) / 1024:,.0f} MiB resident"
    except (OSError, ValueError, IndexError):
        pass
    return "its memory use is not readable by this user" if os.path.exists("/proc") else ""
