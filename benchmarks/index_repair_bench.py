"""What a damaged search index costs: the health check, and the rebuild from the graph. Prints one JSON object.

    python benchmarks/index_repair_bench.py [--size 10000] [--embedder hashing|minilm]

Writes ``size`` memories to a real graph, indexes them as the appliance does (batches of 128, so the table
holds one file per batch until it is compacted), times ``repair.check`` on that table and after compaction,
deletes one data file, checks again (it must say damaged), then times the repair: the move aside plus the
rebuild of every row from the graph. With the hashing embedder the rebuild measures the machinery (graph
reads, LanceDB writes); with ``minilm`` it includes embedding every text again, which dominates.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from appliance.core.ports import Embedder
from appliance.graph import GraphStore
from appliance.inference.embedding import HashingEmbedder, default_embedder
from appliance.search import repair
from appliance.search.index import SearchIndex
from appliance.search.sync import IndexSync

WORDS = ["harbour", "ledger", "violet", "engine", "quarry", "pilot", "saffron", "tundra", "lantern", "orchard",
         "copper", "meadow"]


def timed_check(path: Path, runs: int = 7) -> dict[str, float | str]:
    times, health = [], None
    for _ in range(runs):
        start = time.perf_counter()
        health = repair.check(path)
        times.append(time.perf_counter() - start)
    assert health is not None
    return {"state": health.state, "median_ms": round(statistics.median(times) * 1000, 1),
            "max_ms": round(max(times) * 1000, 1)}


def fill(graph: GraphStore, size: int) -> None:
    for space in range(10):
        graph.ensure_space(f"/P/s{space}")

    def memory(n: int) -> None:
        item = graph.create_item(f"/P/s{n % 10}", f"m{n}", "conversation").kref
        text = " ".join(WORDS[(n * k) % len(WORDS)] for k in range(1, 9))
        graph.create_revision(item, {"title": f"note {n}", "summary": f"{text} number {n}", "memory_type": "fact"})

    for first in range(0, size, 500):  # 500 memories a transaction: the fill is not what is measured
        graph.atomic(lambda first=first: [memory(n) for n in range(first, min(size, first + 500))])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--embedder", choices=["hashing", "minilm"], default="hashing")
    args = parser.parse_args()
    embedder: Embedder = HashingEmbedder() if args.embedder == "hashing" else default_embedder(2)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with GraphStore.open(root / "graph.kuzu", buffer_pool_mb=256, readers=2) as graph:
            start = time.perf_counter()
            fill(graph, args.size)
            filled = time.perf_counter() - start
            index = SearchIndex(root / "index", embedder.dim, embedder.model_id)
            sync = IndexSync(graph, index, embedder)
            start = time.perf_counter()
            sync.run_pending()
            first_build = time.perf_counter() - start
            fragments = index._table.stats()["fragment_stats"]["num_fragments"]
            as_written = timed_check(index.path)
            index.optimize()
            compacted = timed_check(index.path)
            # the newest data file: the compacted one, which the latest version reads
            max((index.path / "revisions.lance" / "data").glob("*.lance"), key=lambda f: f.stat().st_mtime_ns).unlink()
            damaged = timed_check(index.path, runs=3)
            start = time.perf_counter()
            moved = repair.replace_damaged(index, graph, "a data file is missing")
            moved_at = time.perf_counter() - start
            sync.run_pending()
            rebuilt = time.perf_counter() - start
            after = repair.check(index.path)
            print(json.dumps({
                "size": args.size, "embedder": embedder.model_id, "graph_fill_s": round(filled, 1),
                "first_index_s": round(first_build, 1),
                "check_as_written": {**as_written, "fragments": fragments}, "check_compacted": compacted,
                "check_with_a_data_file_deleted": damaged,
                "repair": {"move_aside_and_requeue_s": round(moved_at, 2), "rebuild_s": round(rebuilt, 1),
                           "rows_after": index.count(), "state_after": after.state,
                           "damaged_copy_kept": moved.aside.is_dir()},
            }, indent=2))


if __name__ == "__main__":
    main()
