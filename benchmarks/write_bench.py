"""The write path in-process: store latency (1 and 8 threads), statements per memory, bulk rates; prints JSON.

    python benchmarks/write_bench.py [--memories 3000] [--stores 200] [--embedder minilm|hashing]

Opens the appliance's services in this process (real Kùzu and LanceDB in a temporary data directory, the chat
model off), fills the graph with N memories offline (LoCoMo turns, as benchmarks/mcp_bench.py prepares them)
and indexes them, then times, through the same typed operations the MCP tools run:

* ``store_1_thread_ms`` / ``store_8_threads_ms``: ``kumiho_memory_store`` per call (stacking on, space
  "bench"), p50/p95; ``statements_per_store``: graph statements the writer connection ran per store
  (BEGIN and COMMIT included; ``Connection.executed``);
* ``reflect_10``: ``kumiho_memory_reflect`` with 10 captures per call: memories/s committed;
* ``memory_api_batch``: the Memory API's batch store (``MemoryApi.store_many``, when it exists): entries/s
  committed, in batches of ``--batch``, and the seconds until the index had them all (searchable rate).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from appliance.app import open_services
from appliance.config import load_settings
from benchmarks.mcp_bench import DATA, corpus, prepare, stats, store_args

WARMUP = 10


def timed_stores(perform: Callable[..., dict[str, Any]], texts: list[str], threads: int, tag: str
                 ) -> tuple[list[float], float, int]:
    """Each thread stores its share of ``texts``; per-call milliseconds, wall seconds, how many stacked."""
    samples: list[float] = []
    stacked = [0]
    lock = threading.Lock()

    def work(part: list[tuple[int, str]]) -> None:
        for n, text in part:
            start = time.perf_counter()
            result = perform("kumiho_memory_store", store_args(text, f"{tag}-{n}"))
            elapsed = (time.perf_counter() - start) * 1000
            with lock:
                samples.append(elapsed)
                stacked[0] += bool(result.get("stacked"))

    numbered = list(enumerate(texts))
    parts = [numbered[i::threads] for i in range(threads)]
    began = time.perf_counter()
    workers = [threading.Thread(target=work, args=(part,)) for part in parts]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return samples, time.perf_counter() - began, stacked[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--memories", type=int, default=3000)
    parser.add_argument("--stores", type=int, default=200)
    parser.add_argument("--reflects", type=int, default=20, help="reflect calls of 10 captures")
    parser.add_argument("--bulk", type=int, default=2000, help="entries written through the Memory API batch")
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--embedder", default="minilm", choices=("minilm", "hashing"))
    parser.add_argument("--data", type=Path, default=DATA, help="LoCoMo dev JSON (../shared/bench/locomo-dev.json)")
    args = parser.parse_args()
    turns, _ = corpus(args.data)
    texts = [f"{t['speaker']} ({t['date']}): {t['text']}" for t in turns[::-1]]  # not the first memories' turns
    report: dict[str, Any] = {"benchmark": "write", "memories": args.memories, "embedder": args.embedder}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "data"
        prepare(root, args.memories, args.embedder, turns)
        settings = load_settings(data_dir=root, search={"embedder": args.embedder},
                                 inference={"chat_model": "none"})
        with open_services(settings) as services:
            services.index_worker.wait_idle(600)
            perform = services.perform
            counter = services.graph._engine.connections[0]  # the writer's connection
            timed_stores(perform, texts[:WARMUP], 1, "warm")
            before = counter.executed
            one, wall, stacked = timed_stores(perform, texts[WARMUP:WARMUP + args.stores], 1, "one")
            print(json.dumps(report), file=sys.stderr)  # each phase as it ends: a failure later keeps these
            report["statements_per_store"] = round((counter.executed - before) / args.stores, 1)
            report["store_1_thread_ms"] = {**stats(one), "stacked": stacked}
            offset = WARMUP + args.stores
            eight, wall, stacked = timed_stores(perform, texts[offset:offset + 2 * args.stores], 8, "eight")
            report["store_8_threads_ms"] = {**stats(eight), "stacked": stacked,
                                            "stores_per_s": round(len(eight) / wall, 1)}
            offset += 2 * args.stores
            print(json.dumps(report), file=sys.stderr)
            report["reflect_10"] = reflect_rate(perform, texts[offset:offset + 10 * args.reflects], counter)
            offset += 10 * args.reflects
            print(json.dumps(report), file=sys.stderr)
            report["memory_api_batch"] = memory_api_rate(services, texts[offset:offset + args.bulk], args.batch)
            report["stacking_query_vector"] = stacking_vectors(services.search.embedder, texts[:300])
    print(json.dumps(report, indent=2))


def stacking_vectors(embedder: Any, texts: list[str]) -> dict[str, Any]:
    """How far the stacking search's query vector moved: it was the embedding of the title and summary clipped
    to 180 characters (``_stack_query``) and is now the memory's own searchable text (what its index row embeds).
    For each memory, both vectors' cosine with the row of a near-duplicate stored before it (one word changed),
    as the stacking search's vector leg sees it (0..1 scale)."""
    from appliance.core import scoring
    from appliance.core.search import searchable_text
    from appliance.memory.writer import _stack_query

    def row_text(text: str) -> tuple[str, str]:
        args = store_args(text, "x")
        return _stack_query(args["title"], args["summary"]), searchable_text(
            "x", {"title": args["title"], "summary": args["summary"]}, [])

    pairs = [(row_text(t), row_text(t.replace(" the ", " a ", 1) + " indeed")) for t in texts]
    stored = embedder.embed([p[0][1] for p in pairs])
    old_query = embedder.embed([p[1][0] for p in pairs])
    new_query = embedder.embed([p[1][1] for p in pairs])
    old = [scoring.vector_score(float(a @ b)) for a, b in zip(old_query, stored, strict=True)]
    new = [scoring.vector_score(float(a @ b)) for a, b in zip(new_query, stored, strict=True)]
    moved = [abs(a - b) for a, b in zip(old, new, strict=True)]
    bands = (0.55, 0.75)
    crossed = sum(1 for a, b in zip(old, new, strict=True) if any((a >= t) != (b >= t) for t in bands))
    longer = sum(1 for (_, (q, row)) in pairs if q.replace("\n", " ") != row.replace("\n", " "))
    return {"memories": len(texts), "query_text_differs": longer,
            "vector_score_old_mean": round(statistics.fmean(old), 4),
            "vector_score_new_mean": round(statistics.fmean(new), 4),
            "abs_change_mean": round(statistics.fmean(moved), 4), "abs_change_max": round(max(moved), 4),
            "crossed_a_stacking_band": crossed}


def reflect_rate(perform: Callable[..., dict[str, Any]], texts: list[str], counter: Any) -> dict[str, Any]:
    calls = [texts[i:i + 10] for i in range(0, len(texts), 10)]
    samples = []
    before = counter.executed
    began = time.perf_counter()
    for n, chunk in enumerate(calls):
        captures = [{"type": "fact", "title": f"{' '.join(t.split()[:8])} [r{n}-{i}]", "content": t}
                    for i, t in enumerate(chunk)]
        start = time.perf_counter()
        perform("kumiho_memory_reflect", {"session_id": "bench", "response": "", "captures": captures,
                                          "space_path": "reflected"})
        samples.append((time.perf_counter() - start) * 1000)
    wall = time.perf_counter() - began
    return {"call_ms": stats(samples), "memories_per_s": round(len(texts) / wall, 1),
            "statements_per_memory": round((counter.executed - before) / max(1, len(texts)), 1)}


def memory_api_rate(services: Any, texts: list[str], batch: int) -> dict[str, Any]:
    api = services.memory_api
    if not hasattr(api, "store_many"):
        return {"available": False}
    began = time.perf_counter()
    for first in range(0, len(texts), batch):
        api.store_many([{"key": f"bulk-{i}", "content": texts[i], "category": "conversation"}
                        for i in range(first, min(len(texts), first + batch))])
    committed = time.perf_counter() - began
    services.index_worker.wait_idle(600)
    searchable = time.perf_counter() - began
    return {"entries": len(texts), "batch": batch, "committed_per_s": round(len(texts) / committed, 1),
            "searchable_per_s": round(len(texts) / searchable, 1)}


if __name__ == "__main__":
    main()
