"""Readiness' ``pending`` (the search-index outbox's size): the count over every revision that ``/api/_ready`` ran
on each poll before, and the count the graph keeps as writes commit. Prints one JSON object.

    python benchmarks/pending_bench.py [--revisions 100000] [--rounds 20]

The graph is written offline (``index_bench.fill_graph``), then updated as a serving appliance's is (its column
of flags is no longer the freshly written one Kùzu can skip), and measured with none, ten and every revision
waiting; the two counts are asserted equal in every round.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from index_bench import fill_graph, stats

from appliance.graph import GraphStore


def measure(graph: GraphStore, rounds: int) -> dict[str, Any]:
    graph._unindexed = None  # read the outbox anew (the first call of a start does)
    graph.pending_count()
    scans, kept = [], []
    for _ in range(rounds):
        started = time.perf_counter()
        counted = graph.count_unindexed()
        scans.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        assert graph.pending_count() == counted
        kept.append((time.perf_counter() - started) * 1000)
    return {"pending": counted, "scan_ms": stats(scans), "kept_ms": stats(kept)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--revisions", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="pending-bench-"))
    result: dict[str, Any] = {"revisions": args.revisions}
    try:
        with GraphStore.open(root / "graph" / "graph.kz") as graph:
            fill_graph(graph, args.revisions)
            graph._engine.write(lambda tx: tx.run("MATCH (r:Revision) SET r.indexed = true"))
            result["none_pending"] = measure(graph, args.rounds)
            ids = [row[0] for row in graph._engine.read(
                lambda tx: tx.rows("MATCH (r:Revision) RETURN r.id LIMIT 1000"))]
            graph.mark_unindexed(["kref://" + revision for revision in ids[::100]])
            result["ten_pending"] = measure(graph, args.rounds)
            graph.mark_all_unindexed()
            result["all_pending"] = measure(graph, args.rounds)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
