"""Memory API latency at a few thousand entries, over real HTTP: prints one JSON object.

    python benchmarks/memory_api_bench.py [--entries 3000] [--samples 30] [--embedder hashing|minilm]

Starts `kumiho-ce serve` on a fresh data directory and fills one namespace through `POST /api/v1/memories`
(one entry per request, as an agent stores them), timing every store; then times, at that size, `GET` of one
key, a page of `GET /api/v1/memories` (100 entries), `POST /api/v1/memories/recall` (limit 5), `GET
/api/v1/memories/count` and a whole `export`. Each figure is milliseconds: p50, p95 and max of the samples.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.appliance_process import serve

WORDS = ("deploy", "staging", "database", "backup", "review", "invoice", "travel", "garden", "recipe", "budget",
         "meeting", "release", "cache", "kernel", "printer", "router", "laptop", "vacation", "dentist", "birthday",
         "report")


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50": round(statistics.median(ordered), 1),
            "p95": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))], 1),
            "max": round(ordered[-1], 1), "n": len(ordered)}


def timed(call: Callable[[], httpx.Response]) -> float:
    start = time.perf_counter()
    response = call()
    elapsed = (time.perf_counter() - start) * 1000
    response.raise_for_status()
    return elapsed


def content(i: int) -> str:
    return " ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(12)) + f" note {i}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=3000)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--embedder", default="hashing", choices=("hashing", "minilm"))
    args = parser.parse_args()
    env = {} if args.embedder == "minilm" else {"KUMIHO_CE_SEARCH__EMBEDDER": "hashing"}
    out: dict[str, Any] = {"entries": args.entries, "embedder": args.embedder}
    with tempfile.TemporaryDirectory() as tmp, serve(Path(tmp) / "data", **env) as running, \
            httpx.Client(base_url=running.base_url + "/api/v1/memories", timeout=120) as http:
        stores = []
        for i in range(args.entries):
            body = {"key": f"note-{i}", "content": content(i), "category": ("core", "daily", "conversation")[i % 3],
                    "session_id": f"s{i % 50}", "importance": (i % 10) / 10}
            stores.append(timed(lambda body=body: http.post("", json=body)))
        out["store_ms"] = summary(stores)
        out["store_ms_last_500"] = summary(stores[-500:])
        n = args.samples
        out["get_ms"] = summary([timed(lambda i=i: http.get(f"/note-{(i * 97) % args.entries}")) for i in range(n)])
        out["list_page_100_ms"] = summary([timed(lambda i=i: http.get("", params={"limit": 100, "offset": i * 10}))
                                           for i in range(n)])
        out["list_category_ms"] = summary([timed(lambda: http.get("", params={"category": "daily", "limit": 100}))
                                           for _ in range(n)])
        out["recall_ms"] = summary([timed(lambda i=i: http.post("/recall", json={
            "query": f"{WORDS[i % len(WORDS)]} {WORDS[(i * 5) % len(WORDS)]}", "limit": 5})) for i in range(n)])
        out["count_ms"] = summary([timed(lambda: http.get("/count")) for _ in range(n)])
        start = time.perf_counter()
        exported = http.get("/export")
        out["export_all_ms"] = round((time.perf_counter() - start) * 1000, 1)
        out["export_lines"] = len(exported.text.splitlines())
        running.stop()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
