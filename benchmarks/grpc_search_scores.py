"""Kumiho's gRPC Search on a real appliance with the bundled embedding model: the scores of an item's own
title, of duplicates and same-subject updates worded differently, of other memories and of unrelated queries
(the bands Kumiho's clients' thresholds assume), and the time the name leg takes per item. Prints JSON.

    .venv/bin/python benchmarks/grpc_search_scores.py [--items 3000]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import grpc

from tests.appliance_process import serve
from tests.grpc_api.conftest import Stub, msg
from tests.grpc_api.test_search import MEMORIES, remember, scores, search

QUERIES = {  # label → (query, the memory it repeats or None)
    "own_title": [("Alice's coffee habit", "coffee-habit"), ("Database migration", "db-migration"),
                  ("Hiking trip", "hiking-trip")],
    "duplicate_other_title": [
        ("Morning coffee routine: every morning before work Alice has a flat white.", "coffee-habit"),
        ("Alice's morning drink: before she starts work Alice always has a flat white coffee.", "coffee-habit"),
        ("Orders table moved to Postgres: the orders data was migrated off MySQL this summer.", "db-migration"),
        ("No Friday releases: production deploys wait until Monday.", "deploy-rule"),
        ("Summer mountain walk: Bob and Alice want to go hiking in the Alps.", "hiking-trip"),
        ("Rex at the vet: the dog sees the vet on Friday morning.", "dog-vet")],
    "same_subject_update": [
        ("Alice switched to oat milk: Alice now takes oat milk in her morning coffee.", "coffee-habit"),
        ("Migration follow-up: the PostgreSQL orders table needs a new index.", "db-migration"),
        ("Hiking gear: Alice and Bob need boots and a tent for the Alps.", "hiking-trip"),
        ("Rex vet visit result: the vet says Rex is healthy.", "dog-vet")],
    "unrelated": [("quantum chromodynamics lecture notes", None), ("Kubernetes pod autoscaling thresholds", None),
                  ("The recipe needs two eggs and a cup of flour.", None)],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--items", type=int, default=3000, help="items for the name-leg timing")
    items = parser.parse_args().items
    data_dir = Path(tempfile.mkdtemp(prefix="grpc-scores-")) / "data"
    with serve(data_dir, KUMIHO_CE_SEARCH__EMBEDDER="minilm") as running:
        with grpc.insecure_channel(running.base_url.removeprefix("http://")) as channel:
            stub = Stub(channel)
            remember(stub, running, "Films", "mem", MEMORIES)
            deep = {"context_filter": "Films/mem", "kind_filter": "conversation", "include_revision_metadata": True}
            bands: dict[str, dict[str, list[float]]] = {}
            for label, cases in QUERIES.items():
                band = bands.setdefault(label, {"target": [], "other_memories": []})
                for query, target in cases:
                    found = scores(search(stub, query, **deep))
                    if target:
                        band["target"].append(round(found.get(target, 0.0), 3))
                    band["other_memories"].append(round(max([s for n, s in found.items() if n != target] or [0]), 3))
            stub.CreateSpace(msg("CreateSpaceRequest", parent_path="/Films", space_name="many"), timeout=30)
            for i in range(items):
                stub.CreateItem(msg("CreateItemRequest", parent_path="/Films/many", item_name=f"note-{i}-topic",
                                    kind="note"), timeout=30)
            times = []
            for _ in range(20):
                start = time.perf_counter()
                search(stub, "topic notte", context_filter="Films/many")
                times.append((time.perf_counter() - start) * 1000)
            times.sort()
        running.stop()
    print(json.dumps({"memories": len(MEMORIES), "scores": bands,
                      "name_search": {"items": items, "p50_ms": round(statistics.median(times), 1),
                                      "p95_ms": round(times[int(len(times) * 0.95) - 1], 1)}}, indent=1))


if __name__ == "__main__":
    main()
