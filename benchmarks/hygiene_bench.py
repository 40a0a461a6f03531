"""The hygiene pass over many Memory API entries, timed in process on real stores: prints one JSON object.

    python benchmarks/hygiene_bench.py [--entries 2000]

On a fresh data directory (hashing embedder, no model), ``--entries`` entries (a quarter each daily, conversation,
core and a custom category) are stored through the graph; then, with hygiene's clock 40 days on: a dry run, a pass
(archives the daily and custom entries, purges the conversation ones) and, 31 more days on, a pass that purges
what the first archived. Each is timed as its job (POST /api/v1/hygiene, then until the job is done).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.hygiene.entries import Clock, store_entry
from tests.inprocess import InProcess, serve_in_process, wait_job

CATEGORIES = ("daily", "conversation", "core", "books")


def timed_pass(app: InProcess, dry_run: bool) -> dict[str, Any]:
    started = time.perf_counter()
    answer = httpx.post(app.base_url + "/api/v1/hygiene", json={"dry_run": dry_run}, timeout=60)
    job = wait_job(app, answer.json()["job_id"], timeout=3600)
    result = job["result"]
    return {"seconds": round(time.perf_counter() - started, 2), "archived": result["archived"],
            "purged": result["purged"], "state": job["state"]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--entries", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, serve_in_process(Path(tmp) / "data", None,
                                                               inference={"chat_model": "none"}) as app:
        graph = app.services.graph
        started = time.perf_counter()
        for n in range(args.entries):
            store_entry(graph, f"entry {n}", CATEGORIES[n % 4])
        stored = time.perf_counter() - started
        clock = Clock()
        clock.advance(days=40)
        app.services.hygiene.clock = clock
        report: dict[str, Any] = {"entries": args.entries, "store_seconds": round(stored, 2),
                                  "dry_run": timed_pass(app, True), "archive_and_purge": timed_pass(app, False)}
        clock.advance(days=31)
        report["purge_archived"] = timed_pass(app, False)
        print(json.dumps(report))


if __name__ == "__main__":
    main()
