"""Revka's calls to Kumiho's REST API, timed on a real appliance: prints one JSON object.

    python benchmarks/kumiho_rest_bench.py [--entries 500]

Loads ``entries`` memories (an item and one revision each, Revka's CLI metadata; a DEPENDS_ON edge from each
to the one before) into the Memory space of a project, starts `kumiho-ce serve`, then replays over HTTP, with
``X-Kumiho-Token:`` empty, what Revka does:

* ``revka memory list --limit N``: one GET /items, then GET /revisions/latest per item;
* ``revka memory stats``: GET /spaces (recursive), then GET /items (limit 500) per space;
* the dashboard's memory-graph fallback at its widest (500 nodes): spaces, items per space (limit 200), one
  POST /revisions/batch, then GET /edges (direction 2) per revision;
* GET /items at its bound (5000), POST /revisions/batch at its bound (1000 krefs), GET /items at a deep offset.

Per sequence: total seconds, calls, and the per-call p50/p95 in ms.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from appliance.datadir import DataDir
from appliance.graph import GraphStore
from appliance.graph.links import NewEdge
from appliance.graph.revisions import NewRevision
from tests.appliance_process import serve

API = "/api/v1"
PROJECT = "RevkaMemory"
SPACE = f"/{PROJECT}/Memory"
HEADERS = {"X-Kumiho-Token": "", "Accept": "application/json"}


def load(data_dir: Path, entries: int) -> None:
    graph = GraphStore.open(DataDir(data_dir).graph_path, buffer_pool_mb=256, readers=2)
    try:
        graph.ensure_space(SPACE)
        rows = [NewRevision(f"kref://{PROJECT}/Memory/entry-{i:05d}.memory",
                            {"key": f"entry-{i}", "content": f"memory number {i} about topic {i % 17}",
                             "category": "core" if i % 3 else "daily", "title": f"Entry {i}",
                             "summary": f"summary {i}"}) for i in range(entries)]
        graph.create_revisions(rows)
        graph.create_edges([NewEdge(f"{rows[i].item_kref}?r=1", f"{rows[i - 1].item_kref}?r=1", "DEPENDS_ON")
                            for i in range(1, entries)])
    finally:
        graph.close()


class Timer:
    def __init__(self, http: httpx.Client) -> None:
        self.http = http
        self.calls: list[float] = []
        self.slowest = ""

    def __call__(self, method: str, path: str, **kwargs: Any) -> Any:
        started = time.perf_counter()
        response = self.http.request(method, API + path, headers=HEADERS, **kwargs)
        self.calls.append(time.perf_counter() - started)
        if self.calls[-1] == max(self.calls):
            self.slowest = f"{method} {path}"
        assert response.status_code < 300, response.text
        return response.json()

    def report(self, started: float) -> dict[str, Any]:
        ms = sorted(c * 1000 for c in self.calls)
        return {"seconds": round(time.perf_counter() - started, 3), "calls": len(ms),
                "p50_ms": round(statistics.median(ms), 2), "p95_ms": round(ms[max(0, int(len(ms) * 0.95) - 1)], 2),
                "slowest_ms": round(ms[-1], 2), "slowest": self.slowest}


def sequence(http: httpx.Client, run: Any) -> dict[str, Any]:
    timer = Timer(http)
    started = time.perf_counter()
    run(timer)
    return timer.report(started)


def memory_list(limit: int) -> Any:
    def run(call: Timer) -> None:
        items = call("GET", "/items", params={"space_path": SPACE, "include_deprecated": "false",
                                              "limit": str(min(5000, max(50, limit * 2))), "offset": "0"})
        for item in items[:limit]:
            call("GET", "/revisions/latest", params={"item_kref": item["kref"]})
    return run


def memory_stats(call: Timer) -> None:
    spaces = call("GET", "/spaces", params={"parent_path": f"/{PROJECT}", "recursive": "true"})
    for path in [f"/{PROJECT}"] + [s["path"] for s in spaces]:
        call("GET", "/items", params={"space_path": path, "include_deprecated": "false", "limit": "500",
                                      "offset": "0"})


def dashboard_graph(call: Timer) -> None:
    spaces = call("GET", "/spaces", params={"parent_path": f"/{PROJECT}", "recursive": "true"})
    items: list[dict[str, Any]] = []
    for path in [f"/{PROJECT}"] + [s["path"] for s in spaces]:
        offset = 0
        while len(items) < 500:  # Revka pages 200 at a time per space until it has enough
            page = call("GET", "/items", params={"space_path": path, "include_deprecated": "false", "limit": "200",
                                                 "offset": str(offset)})
            items += page
            offset += 200
            if len(page) < 200:
                break
    batch = call("POST", "/revisions/batch", json={"item_krefs": [i["kref"] for i in items[:500]],
                                                   "tag": "latest", "allow_partial": True})
    for revision in batch["revisions"]:
        call("GET", "/edges", params={"kref": revision["kref"], "direction": "2"})


def at_bounds(call: Timer) -> None:
    items = call("GET", "/items", params={"space_path": SPACE, "limit": "5000"})
    krefs = [i["kref"] for i in items]
    call("POST", "/revisions/batch", json={"item_krefs": (krefs * (1 + 1000 // len(krefs)))[:1000]})
    call("GET", "/items", params={"space_path": SPACE, "limit": "100", "offset": str(max(0, len(items) - 100))})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="kumiho-rest-bench-") as tmp:
        data_dir = Path(tmp) / "data"
        started = time.perf_counter()
        load(data_dir, args.entries)
        loaded = round(time.perf_counter() - started, 2)
        with serve(data_dir) as running, httpx.Client(base_url=running.base_url, timeout=60) as http:
            result = {"entries": args.entries, "load_seconds": loaded,
                      "memory_list_50": sequence(http, memory_list(50)),
                      "memory_list_all": sequence(http, memory_list(args.entries)),
                      "memory_stats": sequence(http, memory_stats),
                      "dashboard_graph_500": sequence(http, dashboard_graph),
                      "at_bounds": sequence(http, at_bounds)}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
