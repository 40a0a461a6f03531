"""The embedder's memory and latency under onnxruntime session options: prints one JSON object.

    python benchmarks/embedder_bench.py [--queries 500] [--batches 20] [--rounds 2] [--variants a,b,...]

Each variant runs in its own process (a clean RSS): the bundled MiniLM loads with ``session_options()`` changed
as the variant says, embeds ``--queries`` single LoCoMo questions one at a time (what engage and a store do)
and then ``--batches`` batches of 32 conversation turns (what the index sync and bulk writes do). Reported:
RSS after the load, after the queries, after the batches, the peak (VmHWM), and query/batch p50/p95 in ms.
Variants run in turn, ``--rounds`` times, so that a busy machine weighs on each alike.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

VARIANTS: dict[str, dict[str, Any]] = {
    "shipped": {},
    "arena": {"enable_cpu_mem_arena": True},
    "no_mem_pattern": {"enable_mem_pattern": False},
    "no_spinning": {"config": {"session.intra_op.allow_spinning": "0"}},
    "no_mem_pattern_no_spinning": {"enable_mem_pattern": False, "config": {"session.intra_op.allow_spinning": "0"}},
    "one_thread": {"intra_op_num_threads": 1},
}


def status(field: str) -> float:
    with open("/proc/self/status") as lines:
        for line in lines:
            if line.startswith(field + ":"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def pick(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50": round(ordered[len(ordered) // 2], 2), "p95": round(ordered[int(0.95 * len(ordered))], 2)}


def one(variant: str, queries: int, batches: int) -> dict[str, Any]:
    """In this process: the variant's session, then the workload."""
    from appliance.inference import embedding
    from benchmarks.mcp_bench import corpus
    from benchmarks.scale_bench import LOCOMO

    change = VARIANTS[variant]
    shipped = embedding.session_options

    def options(threads: int = 0) -> Any:
        chosen = shipped(threads)
        for name, value in change.items():
            if name == "config":
                for key, entry in value.items():
                    chosen.add_session_config_entry(key, entry)
            else:
                setattr(chosen, name, value)
        return chosen

    embedding.session_options = options  # type: ignore[assignment]
    turns, questions = corpus(LOCOMO)
    start = status("VmRSS")
    embedder = embedding.default_embedder()
    loaded = status("VmRSS")
    single = []
    for q in questions[:queries]:
        began = time.perf_counter()
        embedder.embed([q])
        single.append((time.perf_counter() - began) * 1000)
    after_queries = status("VmRSS")
    texts = [t["text"] for t in turns]
    batch = []
    for b in range(batches):
        began = time.perf_counter()
        embedder.embed(texts[b * 32: (b + 1) * 32])
        batch.append((time.perf_counter() - began) * 1000)
    return {"variant": variant, "rss_mb": {"before": start, "loaded": loaded, "after_queries": after_queries,
                                           "after_batches": status("VmRSS"), "peak": status("VmHWM")},
            "query_ms": pick(single), "batch_of_32_ms": pick(batch)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--one", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.queries, args.batches)))
        return
    runs: dict[str, list[dict[str, Any]]] = {}
    for _ in range(args.rounds):
        for variant in args.variants.split(","):
            output = subprocess.run([sys.executable, __file__, "--one", variant, "--queries", str(args.queries),
                                     "--batches", str(args.batches)], check=True, capture_output=True, text=True)
            runs.setdefault(variant, []).append(json.loads(output.stdout))
    print(json.dumps({"benchmark": "embedder", "cpu_count": os.cpu_count(), "queries": args.queries,
                      "batches": args.batches, "runs": runs}))


if __name__ == "__main__":
    main()
