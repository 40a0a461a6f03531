"""Search latency and embedding throughput: prints one JSON object.

    python benchmarks/search_bench.py [--sizes 10000,100000] [--queries 200]

Builds an index of N memories (LoCoMo turns repeated with their index appended, so the text is real) with
the bundled model's vectors, then times hybrid, vector and full-text searches end to end (query embedding
included) with a space filter, as the recall path runs them, after loading the resident copy of the rows
(its load time and memory are reported). Embedding throughput is measured on the same text. Rows are
written straight to the index (the graph path is measured by graph_bench.py).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from appliance.core.search import SearchFilter, SearchRequest, ancestors
from appliance.inference.embedding import default_embedder
from appliance.search.index import IndexRow, SearchIndex
from appliance.search.service import SearchService

DATA = Path(__file__).resolve().parents[2] / "shared" / "bench" / "locomo-dev.json"


def corpus(data: Path) -> tuple[list[str], list[str]]:
    samples = json.loads(data.read_text())
    texts, questions = [], []
    for sample in samples:
        for key, value in sample["conversation"].items():
            if re.fullmatch(r"session_\d+", key) and isinstance(value, list):
                texts += [f"{t['speaker']}: {t['text']}" for t in value]
        questions += [qa["question"] for qa in sample["qa"]]
    return texts, questions


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_ms": round(ordered[len(ordered) // 2] * 1000, 2),
            "p95_ms": round(ordered[int(len(ordered) * 0.95)] * 1000, 2),
            "mean_ms": round(statistics.fmean(ordered) * 1000, 2)}


def build(index: SearchIndex, texts: list[str], vectors: np.ndarray, size: int) -> float:
    start = time.perf_counter()
    for first in range(0, size, 5000):
        rows = []
        for i in range(first, min(size, first + 5000)):
            text = f"{texts[i % len(texts)]} (#{i})"
            space = f"/CognitiveMemory/s{i % 20}"
            rows.append(IndexRow(
                revision_kref=f"kref://CognitiveMemory/s{i % 20}/m{i}.conversation?r=1",
                item_kref=f"kref://CognitiveMemory/s{i % 20}/m{i}.conversation", project="CognitiveMemory",
                space=space, spaces=ancestors(space), kind="conversation", memory_type="conversation", tags=[],
                deprecated=False, created_at="2026-01-01T00:00:00+00:00", title=text[:40], text=text,
                text_hash=hashlib.sha1(text.encode()).hexdigest(), vector=vectors[i % len(texts)]))
        index.upsert(rows)
    index.optimize()
    return time.perf_counter() - start


def resident_mb(path: Path, dim: int, model_id: str) -> float:
    """Memory the in-memory rows keep (vectors, filter columns, postings, vocabulary), by tracemalloc over a
    second load of the same index."""
    other = SearchIndex(path, dim, model_id)
    tracemalloc.start()
    try:
        other.resident()
        return round(tracemalloc.get_traced_memory()[0] / 2**20, 1)
    finally:
        tracemalloc.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    embedder = default_embedder()
    texts, questions = corpus(args.data)
    start = time.perf_counter()
    vectors = embedder.embed(texts)
    throughput = len(texts) / (time.perf_counter() - start)
    single = []
    for q in questions[:100]:
        t0 = time.perf_counter()
        embedder.embed([q])
        single.append(time.perf_counter() - t0)
    report: dict[str, object] = {
        "benchmark": "search", "embedder": embedder.model_id,
        "embedding": {"sentences_per_s": round(throughput, 1), "batch": 32, "sentences": len(texts),
                      "single_query": percentiles(single)},
    }
    sizes = {}
    for size in (int(s) for s in args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as scratch:
            index = SearchIndex(Path(scratch), embedder.dim, embedder.model_id)
            build_s = build(index, texts, vectors, size)
            service = SearchService(index, embedder)
            start = time.perf_counter()
            index.resident()
            entry: dict[str, object] = {"build_seconds": round(build_s, 1),
                                        "resident_load_seconds": round(time.perf_counter() - start, 1),
                                        "resident_mb": resident_mb(Path(scratch), embedder.dim, embedder.model_id),
                                        "indices": [i.index_type for i in index._table.list_indices()]}
            for mode in ("hybrid", "vector", "text"):
                samples = []
                for n, q in enumerate(questions[: args.queries]):
                    request = SearchRequest(q, SearchFilter(spaces=("/CognitiveMemory",) if n % 2 else
                                                            (f"/CognitiveMemory/s{n % 20}",)), mode, 10)
                    t0 = time.perf_counter()
                    service.search(request)
                    samples.append(time.perf_counter() - t0)
                entry[mode] = percentiles(samples)
            sizes[str(size)] = entry
    report["sizes"] = sizes
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
