"""``kumiho-ce hygiene`` end to end: the real command on a data directory whose entries were stored 40 days ago
(the graph opened with a clock set back), no appliance running, so the command serves the route itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from appliance.datadir import DataDir
from appliance.graph import GraphStore
from tests.hygiene.entries import state_of, store_entry

ROOT = Path(__file__).resolve().parents[2]


def kumiho_ce(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "KUMIHO_CE_SEARCH__EMBEDDER": "hashing",
           "KUMIHO_CE_INFERENCE__CHAT_MODEL": "none", "KUMIHO_CE_MEMORY__POLICY__READ_ONLY_NAMESPACES": '["frozen"]'}
    return subprocess.run([sys.executable, "-m", "appliance", "--data-dir", str(data), *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=240)


def test_the_hygiene_command_dry_runs_then_runs_a_pass(tmp_path: Path) -> None:
    data = DataDir(tmp_path / "data")
    data.ensure()
    then = datetime.now(UTC) - timedelta(days=40)
    with GraphStore.open(data.graph_path, buffer_pool_mb=64, readers=1, clock=lambda: then) as graph:
        daily = store_entry(graph, "standup", "daily")
        talk = store_entry(graph, "chat turn", "conversation")
        core = store_entry(graph, "user name", "core")
        frozen = store_entry(graph, "standup", "daily", namespace="frozen")

    dry = kumiho_ce(data.root, "hygiene", "--dry-run")
    assert dry.returncode == 0, dry.stderr[-2000:]
    assert "would archive 1, would purge 1, skipped 1 in read-only namespaces" in dry.stdout
    assert f"archive {daily}" in dry.stdout and f"purge   {talk}" in dry.stdout

    done = kumiho_ce(data.root, "hygiene", "--json")
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout)
    assert (result["archived"], result["purged"], result["skipped_read_only"]) == (1, 1, 1)
    with GraphStore.open(data.graph_path, buffer_pool_mb=64, readers=1) as graph:
        assert [state_of(graph, k) for k in (daily, talk, core, frozen)] == ["archived", "gone", "live", "live"]
