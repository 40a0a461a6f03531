"""``kumiho-ce doctor``: check the data directory, the database and the machine, changing nothing."""

from __future__ import annotations

import json
import os
import shutil
import stat
import urllib.request
from dataclasses import dataclass
from typing import Literal

from appliance.config import Settings
from appliance.datadir import DataDir
from appliance.errors import KumihoError
from appliance.graph import schema

Status = Literal["ok", "warn", "fail"]
MIN_FREE_BYTES = 100 * 1024 * 1024
LOW_FREE_BYTES = 1024 * 1024 * 1024


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    detail: str


def run_checks(settings: Settings) -> list[Check]:
    data_dir = DataDir(settings.data_dir)
    checks = [_check_data_dir(data_dir)]
    if checks[0].status == "fail":
        return checks
    holder = data_dir.holder_pid()
    if holder is not None:
        checks.append(Check("lock", "ok", f"held by a running kumiho-ce (pid {holder})"))
        checks.append(_check_running(settings, data_dir))
        checks.extend(_check_doors(settings, data_dir))
    else:
        checks.append(Check("lock", "ok", "free: no kumiho-ce process owns this data directory"))
        checks.append(_check_database(settings, data_dir))
        checks.append(_check_index(data_dir))  # while running, the appliance checks (and repairs) it itself
    checks.extend(_check_runtime_file(data_dir, holder))
    checks.append(_check_disk(data_dir))
    checks.append(_check_embedding_model(settings))
    checks.append(_check_chat_model(settings))
    return checks


def _check_chat_model(settings: Settings) -> Check:
    """The configured chat model is there, is the file the manifest (or the configuration) pins, and
    llama-cpp-python is installed; without one the appliance still works, so absence is a warning."""
    import importlib.util

    from appliance.inference.install import configured_chat_model, verify_installed

    conf = settings.inference
    if conf.chat_model == "none":
        return Check("chat_model", "warn", "no chat model (inference.chat_model = \"none\"): consolidate, "
                     "discover_edges, graph-augmented recall and dream_state say they are unavailable")
    if conf.chat_model == "endpoint":  # checked by its URL only: doctor opens no connection
        from appliance.inference.remote import is_loopback_url

        if not conf.endpoint_url:
            return Check("chat_model", "fail", "inference.chat_model = \"endpoint\" needs inference.endpoint_url")
        if not is_loopback_url(conf.endpoint_url) and not conf.allow_remote_endpoints:
            return Check("chat_model", "fail", f"inference.endpoint_url {conf.endpoint_url} is beyond loopback: set "
                         "inference.allow_remote_endpoints = true to allow it (D6)")
        return Check("chat_model", "ok", f"OpenAI-compatible endpoint {conf.endpoint_url}, model "
                     f"{conf.endpoint_model} (not contacted by doctor)")
    if importlib.util.find_spec("llama_cpp") is None:
        return Check("chat_model", "warn", "llama-cpp-python is not installed, so no chat model can load: run "
                     "`make install`")
    try:
        if conf.chat_model == "gguf":
            if conf.model_path is None:
                return Check("chat_model", "fail", "inference.chat_model = \"gguf\" needs inference.model_path")
            from appliance.inference.models import verified

            path = verified(conf.model_path, conf.model_sha256)
            pinned = "sha256 verified" if conf.model_sha256 else "no model_sha256 set, so not verified"
            return Check("chat_model", "ok", f"{path} ({path.stat().st_size / 1e6:,.0f} MB, {pinned})")
        name = configured_chat_model(conf)
        path = verify_installed(settings, name)
    except KumihoError as exc:
        return Check("chat_model", "warn" if "not installed" in exc.message else "fail", exc.message)
    return Check("chat_model", "ok", f"{name}: {path} ({path.stat().st_size / 1e6:,.0f} MB), sha256 verified")


def _check_embedding_model(settings: Settings) -> Check:
    if settings.search.embedder == "hashing":
        return Check("models", "warn", "search uses the tiny hashing embedder (search.embedder = \"hashing\"): "
                     "fine for tests, poor recall for real use")
    from appliance.inference.models import manifest, model_file, verified

    entry = manifest()["embedding"]["minilm-int8"]
    try:
        for part in (model_file(entry), model_file(entry["tokenizer"])):
            verified(part.locate(), part.sha256, part.size)
    except KumihoError as exc:
        return Check("models", "fail", exc.message)
    return Check("models", "ok", f"embedding model {entry['package']} {entry['package_version']} and its "
                 "tokenizer present, sha256 verified")


def _check_data_dir(data_dir: DataDir) -> Check:
    root = data_dir.root
    if not root.exists():
        return Check("data_dir", "warn", f"{root} does not exist yet; `kumiho-ce serve` creates it")
    if not root.is_dir():
        return Check("data_dir", "fail", f"{root} is not a directory; point KUMIHO_CE_DATA_DIR elsewhere")
    try:
        mode = root.stat().st_mode
    except OSError as exc:
        return Check("data_dir", "fail", f"{root} cannot be read: {exc.strerror}")
    if not os.access(root, os.R_OK | os.W_OK | os.X_OK):
        return Check("data_dir", "fail", f"{root} is not readable and writable by this user; fix its owner")
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        return Check("data_dir", "warn", f"{root} is open to other users (mode {stat.S_IMODE(mode):o}); "
                     f"memories are private: chmod 700 {root}")
    return Check("data_dir", "ok", f"{root} (mode {stat.S_IMODE(mode):o})")


def _check_runtime_file(data_dir: DataDir, holder: int | None) -> list[Check]:
    """A ``server.json`` that no running owner wrote (``kill -9`` leaves it): said, as it is harmless."""
    runtime = data_dir.read_runtime()
    if runtime is None:
        return []
    reason = "the data-directory lock is free" if holder is None else data_dir.stale_reason(runtime)
    if reason is None:
        return []
    return [Check("server", "warn", f"{data_dir.runtime_path} is stale ({reason}; a killed appliance left it): "
                  "kumiho-ce mcp ignores it and the next start replaces it")]


def _check_database(settings: Settings, data_dir: DataDir) -> Check:
    from appliance.backup.store import backup_directory

    path = data_dir.graph_path
    if not path.exists():
        return Check("database", "warn", f"{path} not created yet; `kumiho-ce serve` creates it")
    try:
        version = schema.read_version(path)
    except KumihoError as exc:
        return Check("database", "fail", exc.message)
    if version > schema.LATEST_VERSION:
        return Check("database", "fail", f"schema version {version} is newer than this kumiho-ce "
                     f"({schema.LATEST_VERSION}); upgrade kumiho-ce")
    if version < schema.LATEST_VERSION:
        # the start snapshots the data directory before it migrates (appliance/backup/snapshots.py), and
        # refuses to migrate when it cannot: the operator needs to know where that copy goes, not to make one
        return Check("database", "warn", f"schema version {version}; the next start upgrades it to "
                     f"{schema.LATEST_VERSION}, after saving a snapshot of the data directory in "
                     f"{backup_directory(settings)} (to go back: `kumiho-ce restore` that file)")
    return Check("database", "ok", f"opens cleanly; schema version {version} (current)")


def _check_index(data_dir: DataDir) -> Check:
    """The search index opens and every one of its files reads (a cheap scan, appliance/search/repair.py)."""
    from appliance.search import repair

    path = data_dir.root / "index"
    health = repair.check(path)
    copies = repair.damaged_copies(path)
    kept = f"; {len(copies)} damaged cop{'y' if len(copies) == 1 else 'ies'} kept from earlier repairs " \
           f"({', '.join(c.name for c in copies)}): delete them when no longer needed" if copies else ""
    if health.damaged:
        return Check("index", "warn", f"the search index is damaged ({health.detail}); no memory is lost (the "
                     "graph holds them all): the next `kumiho-ce serve` moves it aside and rebuilds it, or "
                     f"run `kumiho-ce reindex` now{kept}")
    if health.state == "missing":
        return Check("index", "ok", f"not built yet; `kumiho-ce serve` builds it from the graph{kept}")
    return Check("index", "ok", f"{path}: {health.detail}{kept}")


def _running_address(settings: Settings, data_dir: DataDir) -> tuple[str, int]:
    """Where the owner of the data directory listens (``server.json``, else the configuration)."""
    runtime = data_dir.live_runtime() or {}
    host, port = str(runtime.get("host", settings.host)), runtime.get("port")
    return "127.0.0.1" if host in ("0.0.0.0", "::") else host, port if isinstance(port, int) else settings.port


def _check_doors(settings: Settings, data_dir: DataDir) -> list[Check]:
    from appliance.cli_connect import token_for
    from appliance.doctor_doors import check_doors

    return check_doors(settings, *_running_address(settings, data_dir), token_for(data_dir, settings))


def _check_running(settings: Settings, data_dir: DataDir) -> Check:
    host, port = _running_address(settings, data_dir)
    url = f"http://{'[' + host + ']' if ':' in host else host}:{port}/api/_live"
    try:
        with urllib.request.urlopen(url, timeout=2) as response:  # loopback or the configured host only
            body = json.load(response)
        return Check("database", "ok", f"owned by the running appliance, which answers {url} "
                     f"(version {body.get('version')})")
    except (OSError, ValueError) as exc:
        return Check("database", "warn", f"the owning process does not answer {url} ({exc}); is it "
                     "starting, or bound to another address?")


def _check_disk(data_dir: DataDir) -> Check:
    existing = next(p for p in (data_dir.root, *data_dir.root.parents) if p.exists())
    free = shutil.disk_usage(existing).free
    text = f"{free / 1024**3:.1f} GiB free"
    if free < MIN_FREE_BYTES:
        return Check("disk", "fail", text + "; writes will fail: free some space")
    if free < LOW_FREE_BYTES:
        return Check("disk", "warn", text + "; running low")
    return Check("disk", "ok", text)


def render(checks: list[Check]) -> str:
    marks = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}
    return "\n".join(f"[{marks[c.status]}] {c.name:<9} {c.detail}" for c in checks)
