"""Search latency and embedding throughput: prints one JSON object.

    python benchmarks/search_bench.py [--sizes 10000,100000] [--queries 200]

Builds an index of N memories (LoCoMo turns repeated with their index appended, so the text is real) with
the bundled model's vectors (a repeated turn's vector perturbed by a little noise, so that rows stay distinct),
then times hybrid, vector and full-text searches end to end (query embedding
included) with a space filter, as the recall path runs them, after loading the resident copy of the rows
(its load time and memory are reported). Embedding throughput is measured on the same text. Rows are
written straight to the index (the graph path is measured by graph_bench.py).

Per size also: ``vector_storage`` — the vector leg over the whole table (no filter) exact in float32 against
the 8-bit scan with exact rescoring of a shortlist (resident.py), its ms, recall@10 against the exact scan
and MB per 100k rows; ``query_cache`` — the hybrid queries asked twice, the second time from the cache of
query embeddings (hits counted). Once: ``names`` — the name leg (appliance/search/names.py) at 3k and 100k
item names, the first call on a list (it indexes the list) and the next calls (the kept index).
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
from appliance.search import names as names_module
from appliance.search import resident as resident_module
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


def perturbed(vectors: np.ndarray, size: int) -> np.ndarray:
    """``size`` rows: the turns' vectors, repeats with a little noise (cosine ~0.95 to their original)."""
    rng = np.random.default_rng(15)
    rows = vectors[np.arange(size) % len(vectors)].astype(np.float32)
    repeats = np.arange(size) >= len(vectors)
    rows[repeats] += rng.normal(0, 0.012, (int(repeats.sum()), vectors.shape[1])).astype(np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def vector_storage(index: SearchIndex, queries: np.ndarray) -> dict[str, object]:
    """Exact float32 scan against the 8-bit scan + exact rescoring (shortlists of 256, 512, 1024), no filter."""
    table = index.resident()
    where = SearchFilter()
    saved = resident_module.QUANTIZED_FROM, resident_module.SHORTLIST
    report: dict[str, object] = {}
    try:
        resident_module.QUANTIZED_FROM = 1 << 40
        exact = [[k for k, _ in table.search(q, where, 10)] for q in queries]
        report["float32"] = percentiles(timed(lambda q: table.search(q, where, 50), queries))
        resident_module.QUANTIZED_FROM = 0
        for shortlist in (256, 512, 1024):
            resident_module.SHORTLIST = shortlist
            found = [[k for k, _ in table.search(q, where, 10)] for q in queries]
            recall = statistics.fmean(len(set(a) & set(b)) / 10 for a, b in zip(exact, found, strict=True))
            report[f"int8_shortlist_{shortlist}"] = {**percentiles(timed(lambda q: table.search(q, where, 50),
                                                                         queries)),
                                                     "recall_at_10_vs_float32": round(recall, 4)}
    finally:
        resident_module.QUANTIZED_FROM, resident_module.SHORTLIST = saved
    rows = len(table)
    report["mb_per_100k_rows"] = {"float32": round(384 * 4 * 100_000 / 2**20, 1),
                                  "int8_codes_and_scales": round((384 + 4) * 100_000 / 2**20, 1)}
    report["rows"] = rows
    return report


def timed(run: object, queries: np.ndarray) -> list[float]:
    samples = []
    for q in queries:
        t0 = time.perf_counter()
        run(q)  # type: ignore[operator]
        samples.append(time.perf_counter() - t0)
    return samples


def build(index: SearchIndex, texts: list[str], vectors: np.ndarray, size: int) -> float:
    vectors = perturbed(vectors, size)
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
                text_hash=hashlib.sha1(text.encode()).hexdigest(), vector=vectors[i]))
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


def query_cache(service: SearchService, questions: list[str]) -> dict[str, object]:
    """Hybrid searches asked twice: the second pass takes every query embedding from the cache."""
    passes = []
    for _ in range(2):
        samples = []
        for q in questions:
            t0 = time.perf_counter()
            service.search(SearchRequest(q, SearchFilter(spaces=("/CognitiveMemory",)), "hybrid", 10))
            samples.append(time.perf_counter() - t0)
        passes.append(percentiles(samples))
    return {"first_pass": passes[0], "repeated_pass": passes[1], "hits": service.queries.hits,
            "misses": service.queries.misses}


def name_leg(texts: list[str], questions: list[str], sizes: tuple[int, ...] = (3000, 100_000)
             ) -> dict[str, object]:
    """name_scores over N item names shaped like the memory tools' (a slug of the title, a short hash)."""
    report: dict[str, object] = {}
    for size in sizes:
        names = []
        for i in range(size):
            slug = "-".join(re.findall(r"[a-z]+", texts[i % len(texts)].lower())[1:5]) or "memory"
            names.append((f"kref://P/s/{slug}-{i:08x}.conversation", f"{slug}-{i:08x}", "conversation"))
        names_module._indexes.clear()
        t0 = time.perf_counter()
        names_module.name_scores(questions[0], names)
        first = time.perf_counter() - t0
        samples = []
        for q in questions[1:101]:
            again = [("".join([k]), "".join([n]), "".join([c])) for k, n, c in names]  # new strings, as a graph read
            t0 = time.perf_counter()
            names_module.name_scores(q, again)
            samples.append(time.perf_counter() - t0)
        report[str(size)] = {"first_call_ms": round(first * 1000, 1), "kept_index": percentiles(samples)}
    return report


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
    query_vectors = embedder.embed(questions[: args.queries])
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
            entry["vector_storage"] = vector_storage(index, query_vectors[: args.queries])
            entry["query_cache"] = query_cache(SearchService(index, embedder), questions[: args.queries])
            sizes[str(size)] = entry
    report["sizes"] = sizes
    report["names"] = name_leg(texts, questions)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
