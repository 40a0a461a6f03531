"""The load suite, short: MCP clients over streamable HTTP and through the stdio shim plus admin API clients
against a real ``kumiho-ce serve`` for a few seconds; no call fails and every acknowledged write is found
again afterwards. ``make test-load`` and ``make soak`` run it longer and print the figures
(benchmarks/load_test.py); latencies are reported there, never asserted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.appliance_process import serve
from tests.load.driver import run_load


def check(report: dict[str, object]) -> None:
    assert report["errors"] == 0, json.dumps(report["error_samples"], indent=1)
    assert report["acknowledged_writes"], "no write was acknowledged: the run did nothing"
    assert report["missing_writes"] == 0, report["missing_samples"]


def test_mixed_clients_for_ten_seconds_lose_nothing_and_fail_nothing(tmp_path: Path) -> None:
    with serve(tmp_path / "data") as app:
        report = run_load(app.base_url, app.process.pid, app.data_dir, seconds=10, http_clients=5,
                          stdio_clients=2, admin_clients=1)
    check(report)
    assert {"engage", "store", "recall", "reflect", "ingest", "api_search"} <= set(report["latency_ms"])


@pytest.mark.long
def test_sixteen_clients_for_a_minute_lose_nothing_and_fail_nothing(tmp_path: Path) -> None:
    with serve(tmp_path / "data") as app:
        report = run_load(app.base_url, app.process.pid, app.data_dir, seconds=60, http_clients=12,
                          stdio_clients=4, admin_clients=2)
    check(report)
