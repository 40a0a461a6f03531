"""Console API benchmark: prints one JSON object.

    python benchmarks/console_bench.py [--items 10000] [--repeat 5]

Seeds ``--items`` memories (one revision each, titles, summaries of ~400 characters and memory types in their
metadata, spread over 20 spaces of one project, with two DERIVED_FROM edges each to earlier memories) through
the graph's bulk writes in a temporary data directory, then times the console's reads through Litestar's test
client on the real app: ``GET /api/v1/graph`` at the default limit (2000), at the maximum (10000) and filtered by memory
type, ``GET /api/v1/stats``, ``GET /api/v1/inspect`` and ``GET /api/v1/search`` with its per-hit item
details. Each timing is the median (and worst) of ``--repeat`` calls, in ms, with the answer's size.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from litestar.testing import TestClient

from appliance.app import build_app, open_services
from appliance.config import load_settings
from appliance.graph import NewEdge, NewRevision

PROJECT = "Bench"
SPACES = 20
TYPES = ("fact", "decision", "preference", "summary", "reflection")
BATCH = 5000
FILLER = "A sentence of the kind a stored summary holds, repeated to a typical summary's length. " * 4  # ~350 chars


def seed(graph: Any, items: int, rng: random.Random) -> float:
    start = time.perf_counter()
    for s in range(SPACES):
        graph.ensure_space(f"/{PROJECT}/s{s}")
    krefs = [f"kref://{PROJECT}/s{i % SPACES}/m{i}.note" for i in range(items)]
    for first in range(0, items, BATCH):
        rows = [NewRevision(krefs[i], {"title": f"Memory {i}", "summary": f"Memory {i} is about topic {i % 97}. "
                                       + FILLER, "memory_type": TYPES[i % len(TYPES)]})
                for i in range(first, min(items, first + BATCH))]
        result = graph.create_revisions(rows)
        assert not result.failures, result.failures
    edges = [NewEdge(f"{krefs[i]}?r=1", f"{krefs[rng.randrange(i)]}?r=1", "DERIVED_FROM")
             for i in range(1, items) for _ in range(2)]
    for first in range(0, len(edges), BATCH * 4):
        graph.create_edges(edges[first: first + BATCH * 4])
    return time.perf_counter() - start


def timed(http: TestClient[Any], path: str, params: dict[str, Any], repeat: int) -> dict[str, Any]:
    samples, size, body = [], 0, None
    for _ in range(repeat):
        start = time.perf_counter()
        answer = http.get(path, params=params)
        samples.append(time.perf_counter() - start)
        assert answer.status_code == 200, answer.text[:500]
        size, body = len(answer.content), answer.json()
    found: dict[str, Any] = {"median_ms": round(statistics.median(samples) * 1000, 1),
                             "max_ms": round(max(samples) * 1000, 1), "bytes": size}
    if body and "nodes" in body:
        found.update(nodes=len(body["nodes"]), edges=len(body["edges"]), total_nodes=body["total_nodes"],
                     truncated=body["truncated"])
    return found


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    rng = random.Random(7)
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(data_dir=Path(tmp), search={"embedder": "hashing"},
                                 inference={"chat_model": "none", "pii_ner": False},
                                 maintenance={"dream_state_time": "", "idle_consolidation_minutes": 0})
        with open_services(settings) as services:
            seconds = seed(services.graph, args.items, rng)
            indexed = services.index_worker.wait_idle(600)
            with TestClient(build_app(services), base_url="http://127.0.0.1:9190") as http:
                middle = f"kref://{PROJECT}/s{(args.items // 2) % SPACES}/m{args.items // 2}.note"
                report = {
                    "items": args.items, "edges": 2 * (args.items - 1), "seed_seconds": round(seconds, 2),
                    "index_caught_up": indexed,
                    "graph_default": timed(http, "/api/v1/graph", {"project": PROJECT}, args.repeat),
                    "graph_max": timed(http, "/api/v1/graph", {"project": PROJECT, "limit": 10_000}, args.repeat),
                    "graph_one_type": timed(http, "/api/v1/graph", {"project": PROJECT, "memory_type": "fact",
                                                                    "limit": 10_000}, args.repeat),
                    "graph_one_space": timed(http, "/api/v1/graph", {"space": f"/{PROJECT}/s3"}, args.repeat),
                    "stats": timed(http, "/api/v1/stats", {}, args.repeat),
                    "inspect": timed(http, "/api/v1/inspect", {"kref": middle}, args.repeat),
                    "search_with_items": timed(http, "/api/v1/search", {"q": "topic 42", "limit": 100},
                                               args.repeat),
                }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
