"""Provenance walks at their bounds: prints one JSON object.

    python benchmarks/provenance_bench.py [--size 10000] [--calls 30]

Loads ``size`` revisions with three edges each to random earlier ones (as graph_bench does: the oldest
revisions end up with thousands of transitive dependents), then times the provenance tools' service calls
at their widest settings: dependencies of the newest revisions and dependents / impact of the oldest, each at
``max_depth`` 20 (the walk reaches most of the graph; the answer stops at its bound and says
``truncated``), find_path from a new revision to an old one, and the provenance summary. Per call p50/p95 ms
and how many revisions the walks could reach (before the bound cut them).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from appliance.graph import GraphStore
from appliance.memory.client import Client
from appliance.operations import provenance as ops
from appliance.services.provenance import MAX_REACHED, ProvenanceService
from benchmarks.graph_bench import item_kref, load, percentiles, timed

DEPTH = ops.MAX_DEPTH


def run(size: int, calls: int) -> dict[str, Any]:
    rng = random.Random(7)
    client = Client(project="Bench")
    report: dict[str, Any] = {"benchmark": "provenance", "revisions": size, "max_depth": DEPTH,
                              "max_reached": MAX_REACHED, "cpu_count": os.cpu_count()}
    with tempfile.TemporaryDirectory() as scratch, GraphStore.open(Path(scratch) / "graph.kuzu") as store:
        report.update(load(store, size, rng))
        service = ProvenanceService(store)
        new = [item_kref(rng.randrange(size - size // 10, size)) + "?r=1" for _ in range(calls)]
        old = [item_kref(rng.randrange(0, 10)) + "?r=1" for _ in range(calls)]
        wide = {"max_depth": DEPTH}
        cases = {
            "dependencies": (service.dependencies, lambda k: ops.NearInput(revision_kref=k, **wide), new),
            "dependents": (service.dependents, lambda k: ops.NearInput(revision_kref=k, **wide), old),
            "analyze_impact": (service.analyze_impact, lambda k: ops.ImpactInput(revision_kref=k, **wide), old),
            "provenance_summary": (service.provenance_summary,
                                   lambda k: ops.ProvenanceSummaryInput(revision_kref=k, **wide), new),
        }
        for name, (method, make, krefs) in cases.items():
            answers = [method(make(k), client) for k in krefs[:3]]
            report[name] = {**percentiles(timed(lambda k, m=method, f=make: m(f(k), client), krefs)),
                            "truncated": sum(bool(a["truncated"]) for a in answers), "of": len(answers)}
        pairs = list(zip(new, old, strict=True))
        found = sum(service.find_path(ops.FindPathInput(source_kref=a, target_kref=b, **wide), client)["path_found"]
                    for a, b in pairs[:5])
        report["find_path"] = {**percentiles(timed(lambda p: service.find_path(
            ops.FindPathInput(source_kref=p[0], target_kref=p[1], **wide), client), pairs)),  # type: ignore[arg-type]
            "path_found": found, "of": 5}
        reach = store.traverse(old[0], "incoming", max_depth=DEPTH, limit=1000)
        report["reachable_from_an_old_revision_at_least"] = len(reach.reached)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    print(json.dumps(run(args.size, args.calls), indent=2))


if __name__ == "__main__":
    main()
