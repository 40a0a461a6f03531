"""The current-revision read recall does, at N items: prints one JSON object.

    python benchmarks/current_read_bench.py [--items 100000] [--trials 40] [--keep DIR]

Writes a graph offline (N items, every 10th with a second revision, every 50th with its first revision tagged
``published``), fills a resident table with each revision's kref and current tags (tiny vectors: only the
tags matter here), then times, interleaved on the same 40 random items per trial, the graph's tag join
(``GraphStore.current_revisions``) and recall's read (``ResidentTable.current_of`` + ``revisions_by_kref``),
and checks that both give the same revisions.
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

from appliance.graph import GraphStore
from appliance.graph.revisions import NewRevision
from appliance.search.resident import ResidentTable

PROJECT, SPACES, BATCH = "Bench", ("a", "b", "c", "d"), 5000


def stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"p50": round(statistics.median(ordered), 2),
            "p95": round(ordered[max(0, int(len(ordered) * 0.95) - 1)], 2), "n": len(ordered)}


def build(graph: GraphStore, items: int) -> list[str]:
    for space in SPACES:
        graph.ensure_space(f"/{PROJECT}/{space}")
    krefs = [f"kref://{PROJECT}/{SPACES[i % len(SPACES)]}/m{i}.conversation" for i in range(items)]
    rows = [NewRevision(k, {"summary": f"memory {i}", "memory_type": "fact"}) for i, k in enumerate(krefs)]
    rows += [NewRevision(k, {"summary": f"memory {i} again", "memory_type": "fact"})
             for i, k in enumerate(krefs) if i % 10 == 0]
    for first in range(0, len(rows), BATCH):
        assert not graph.create_revisions(rows[first:first + BATCH]).failures
    for i in range(0, items, 50):
        graph.tag_revision(krefs[i] + "?r=1", "published")
    return krefs


def resident_of(graph: GraphStore) -> ResidentTable:
    tags: dict[str, list[str]] = {}
    for revision, tag in graph._engine.read(lambda tx: tx.rows(
            "MATCH (:Item)-[t:TAGGED]->(r:Revision) WHERE t.until = '' RETURN r.id, t.tag")):
        tags.setdefault("kref://" + revision, []).append(tag)
    every = graph._engine.read(lambda tx: tx.rows("MATCH (r:Revision) RETURN r.id"))
    table = ResidentTable(4)
    table.upsert({"revision_kref": "kref://" + r, "project": PROJECT, "space": "", "kind": "conversation",
                  "memory_type": "fact", "tags": tags.get("kref://" + r, []), "deprecated": False,
                  "vector": [1.0, 0.0, 0.0, 0.0]} for (r,) in every)
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--trials", type=int, default=40)
    parser.add_argument("--keep", type=Path, help="write the graph here once and reuse it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        path = (args.keep or Path(scratch)) / "graph.kuzu"
        fresh = not path.exists()
        with GraphStore.open(path) as graph:
            start = time.perf_counter()
            krefs = build(graph, args.items) if fresh else [
                "kref://" + i for (i,) in graph._engine.read(lambda tx: tx.rows("MATCH (i:Item) RETURN i.id"))]
            built = time.perf_counter() - start
            table = resident_of(graph)
            rng = random.Random(15)
            old: list[float] = []
            new: list[float] = []
            differ = 0
            for _ in range(args.trials):
                pick = rng.sample(krefs, 40)
                start = time.perf_counter()
                before = graph.current_revisions(pick)
                old.append((time.perf_counter() - start) * 1000)
                start = time.perf_counter()
                chosen = table.current_of(pick)
                after = {r.item_kref: r for r in graph.revisions_by_kref(dict(chosen.values())).values()}
                new.append((time.perf_counter() - start) * 1000)
                differ += before != after
    report: dict[str, Any] = {"benchmark": "current_read", "items": args.items, "revisions": len(table),
                              "graph_written_s": round(built, 1) if fresh else None,
                              "graph_tag_join_ms": stats(old), "index_then_key_reads_ms": stats(new),
                              "samples_that_differ": differ}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
