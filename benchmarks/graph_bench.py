"""Graph store benchmark: prints one JSON object.

    python benchmarks/graph_bench.py [--sizes 10000,100000] [--writes 300] [--lookups 500]

Measures, on a real Kùzu database in a temporary directory:
* single write latency (create_revision on an existing item, one transaction each): p50/p95 ms
* bulk insert throughput (create_revisions and create_edges, 5,000 rows per transaction): rows/s
* item lookup by kref (get_item) and revision resolution (get_revision of an item kref → latest): p50/p95 ms
* 3-hop outgoing traversal (each revision has 3 edges to random earlier ones) at each size, without and
  with the paths: p50/p95 ms
* resident memory and database size after loading
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from appliance.graph import GraphStore, NewEdge, NewRevision

SPACES = 20
EDGES_PER_REVISION = 3
BATCH = 5000


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"p50_ms": round(pick(0.50) * 1000, 3), "p95_ms": round(pick(0.95) * 1000, 3),
            "mean_ms": round(statistics.fmean(ordered) * 1000, 3), "n": len(ordered)}


def timed(fn: Callable[[str], object], args: list[str]) -> list[float]:
    samples = []
    for arg in args:
        start = time.perf_counter()
        fn(arg)
        samples.append(time.perf_counter() - start)
    return samples


def item_kref(i: int) -> str:
    return f"kref://Bench/s{i % SPACES}/m{i}.conversation"


def load(store: GraphStore, size: int, rng: random.Random) -> dict[str, float]:
    """``size`` revisions (one per item) and ``EDGES_PER_REVISION`` edges each to earlier revisions."""
    for s in range(SPACES):
        store.ensure_space(f"/Bench/s{s}")
    start = time.perf_counter()
    for first in range(0, size, BATCH):
        rows = [NewRevision(item_kref(i), {"title": f"memory {i}", "summary": "bench " * 20})
                for i in range(first, min(size, first + BATCH))]
        result = store.create_revisions(rows)
        assert not result.failures, result.failures
    revisions_s = time.perf_counter() - start
    start = time.perf_counter()
    edges = []
    for i in range(1, size):
        for target in {rng.randrange(i) for _ in range(EDGES_PER_REVISION)}:
            edges.append(NewEdge(item_kref(i) + "?r=1", item_kref(target) + "?r=1", "DERIVED_FROM"))
        if len(edges) >= 20_000:
            store.create_edges(edges)
            edges = []
    if edges:
        store.create_edges(edges)
    edges_s = time.perf_counter() - start
    return {"bulk_revisions_per_s": round(size / revisions_s), "bulk_edges_per_s":
            round((size - 1) * EDGES_PER_REVISION / edges_s), "load_seconds": round(revisions_s + edges_s, 1)}


def measure(store: GraphStore, size: int, rng: random.Random, writes: int, lookups: int) -> dict[str, object]:
    entry: dict[str, object] = {}
    targets = [item_kref(rng.randrange(size)) for _ in range(lookups)]
    entry["get_item"] = percentiles(timed(store.get_item, targets))
    entry["get_revision_latest"] = percentiles(timed(store.get_revision, targets))
    origins = [item_kref(rng.randrange(size // 2, size)) + "?r=1" for _ in range(lookups)]
    reached = [len(store.traverse(o, "outgoing", max_depth=3, limit=1000).reached) for o in origins[:50]]
    entry["traverse_3_hops"] = {
        **percentiles(timed(lambda o: store.traverse(o, "outgoing", max_depth=3, limit=1000), origins)),
        "mean_reached": round(statistics.fmean(reached), 1)}
    entry["traverse_3_hops_with_paths"] = percentiles(timed(
        lambda o: store.traverse(o, "outgoing", max_depth=3, limit=1000, include_path=True), origins[: lookups // 5]))
    own = [item_kref(rng.randrange(size)) for _ in range(writes)]
    entry["single_write"] = percentiles(timed(lambda k: store.create_revision(k, {"t": "x"}), own))
    return entry


def run(sizes: list[int], writes: int, lookups: int) -> dict[str, object]:
    rng = random.Random(42)
    report: dict[str, object] = {"benchmark": "graph", "kuzu_buffer_pool_mb": 256, "cpu_count": os.cpu_count()}
    by_size = {}
    for size in sizes:
        with tempfile.TemporaryDirectory() as scratch:
            with GraphStore.open(Path(scratch) / "graph.kuzu", buffer_pool_mb=256) as store:
                entry = {**load(store, size, rng), **measure(store, size, rng, writes, lookups)}
            entry["db_mb"] = round(sum(f.stat().st_size for f in Path(scratch).iterdir()) / 2**20, 1)
        entry["max_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
        by_size[str(size)] = entry
    report["sizes"] = by_size
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--writes", type=int, default=300)
    parser.add_argument("--lookups", type=int, default=500)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(json.dumps(run(sizes, args.writes, args.lookups), indent=2))


if __name__ == "__main__":
    main()
