"""Where an engage's time goes at N memories, in-process: prints one JSON object.

    python benchmarks/engage_profile.py [--memories 100000] [--queries 200] [--keep DIR] [--embedder hashing]

Prepares a data directory as benchmarks/mcp_bench.py does (graph written offline, index built offline), opens
the appliance's services in this process, and runs ``kumiho_memory_engage`` through the operations layer (the
MCP tool's handler, without HTTP) for distinct LoCoMo questions. Reports the server's own stage timings
(``timing_ms``: search, current revisions, ranking, context), the search's legs timed separately (query
embedding, vector leg, text leg, fusion), the JSON serialisation of the answer, and the functions that took
the most time under cProfile. The default embedder here is the hashing one (building the index with MiniLM at
100k takes most of an hour on 2 cores); the query embedding with MiniLM is timed on its own
(``minilm_query_ms``) — add it to the totals for the real appliance, or pass ``--embedder minilm``.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from appliance.app import open_services
from appliance.config import load_settings
from appliance.core.search import SearchFilter, SearchRequest
from appliance.inference.embedding import default_embedder
from appliance.search.service import POOL
from benchmarks.mcp_bench import DATA, MARKER, PROJECT, corpus, prepare, stats


def timed(run: Any) -> float:
    start = time.perf_counter()
    run()
    return (time.perf_counter() - start) * 1000


def legs(services: Any, questions: list[str]) -> dict[str, Any]:
    """The search's parts one by one, as SearchService runs them for a project-wide engage."""
    search, index = services.search, services.index
    where = SearchFilter(project=PROJECT, kinds=("conversation",))
    embed, vector, text, whole = [], [], [], []
    for q in questions:
        vectors = search.embedder.embed([q])
        embed.append(timed(lambda q=q: search.embedder.embed([q])))
        vector.append(timed(lambda: index.vector_search(vectors[0], where, POOL)))  # noqa: B023
        text.append(timed(lambda q=q: index.text_search(q, where, POOL, True)))
        whole.append(timed(lambda q=q: search.search(SearchRequest(q, where, "hybrid", POOL),
                                                     query_vector=vectors[0])))  # noqa: B023
    return {"embed_query": stats(embed), "vector_leg": stats(vector), "text_leg": stats(text),
            "search_given_vector": stats(whole)}


def current_read(services: Any, trials: int, size: int = 40) -> dict[str, Any]:
    """The current-revision read of ``size`` random items, the graph's tag join (``current_revisions``, the old
    path) against recall's read (the resident index's choice, then primary-key reads), interleaved on the same
    samples; ``differ`` counts samples where the two disagree (it must be 0)."""
    recaller = next(f for f in services.families if hasattr(f, "recaller")).recaller
    items = sorted({k.rsplit("?r=", 1)[0] for k in services.index.resident().krefs()})
    rng = random.Random(15)
    old, new, differ = [], [], 0
    for _ in range(trials):
        pick = rng.sample(items, min(size, len(items)))
        start = time.perf_counter()
        before = services.graph.current_revisions(pick)
        old.append((time.perf_counter() - start) * 1000)
        start = time.perf_counter()
        after = recaller._current(pick)
        new.append((time.perf_counter() - start) * 1000)
        differ += before != after
    return {"items": size, "graph_tag_join_ms": stats(old), "index_then_key_reads_ms": stats(new),
            "samples_that_differ": differ}


def engage_ab(services: Any, questions: list[str]) -> dict[str, Any]:
    """Whole engages with recall's current read the old way (the graph's tag join) and the new way, interleaved
    per question (the recall cache is emptied before each call, so both really run)."""
    family = next(f for f in services.families if hasattr(f, "recaller"))
    recaller = family.recaller
    runs: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
    for q in questions:
        for way in ("old", "new"):
            if way == "old":
                recaller._current = recaller.graph.current_revisions  # the read before this change
            family.cache.invalidate()
            try:
                result = services.perform("kumiho_memory_engage", {"query": q})
            finally:
                recaller.__dict__.pop("_current", None)
            for stage, ms in result["timing_ms"].items():
                runs[way].setdefault(stage, []).append(ms)
    return {way: {stage: stats(values) for stage, values in stages.items()} for way, stages in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--embedder", choices=("minilm", "hashing"), default="hashing")
    parser.add_argument("--keep", type=Path, help="prepare this data directory once and reuse it")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    turns, questions = corpus(args.data)
    questions = questions[: args.queries]
    with tempfile.TemporaryDirectory() as scratch:
        root = (args.keep or Path(scratch) / "data").resolve()
        if not (root / MARKER).exists():
            prepare(root, args.memories, args.embedder, turns)
        settings = load_settings(data_dir=root, search={"embedder": args.embedder})
        with open_services(settings) as services:
            start = time.perf_counter()
            services.index.resident()
            load_s = time.perf_counter() - start
            for q in questions[:5]:  # warm-up (caches of the analyzer, the graph's buffer pool)
                services.perform("kumiho_memory_engage", {"query": q + " warm"})
            stages: dict[str, list[float]] = {}
            serialise = []
            profile = cProfile.Profile()
            for q in questions:
                profile.enable()
                result = services.perform("kumiho_memory_engage", {"query": q})
                profile.disable()
                serialise.append(timed(lambda result=result: json.dumps(result, ensure_ascii=False, default=str)))
                for stage, ms in result["timing_ms"].items():
                    stages.setdefault(stage, []).append(ms)
            parts = legs(services, questions)
            current = current_read(services, len(questions))
            ab = engage_ab(services, questions)
            rows = len(services.index.resident())
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(25)
    minilm = default_embedder()
    minilm.embed(["warm up"])
    report = {"benchmark": "engage_profile", "memories": args.memories, "index_rows": rows,
              "embedder": args.embedder, "resident_load_seconds": round(load_s, 1),
              "timing_ms": {stage: stats(values) for stage, values in stages.items()},
              "serialise_json_ms": stats(serialise),
              "current_read": current, "engage_current_read_ab": ab, "search_parts_ms": parts,
              "minilm_query_ms": stats([timed(lambda q=q: minilm.embed([q])) for q in questions[:100]]),
              "profile_top_tottime": [line for line in out.getvalue().splitlines() if line.strip()][:40]}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
