"""The SDK side of benchmarks/grpc_bench.py, run by ``.venv-kumiho``'s python (the public Kumiho SDK): times
``kumiho.search`` (gRPC Search) and ``Item.create_revision`` (gRPC CreateRevision) per call, client-side round trip,
through the client the SDK's local-CE probe configures. Reads a JSON plan on stdin, prints the latencies (ms)."""

from __future__ import annotations

import json
import sys
import time

import kumiho


def main() -> None:
    plan = json.load(sys.stdin)
    kumiho.auto_configure_from_discovery()
    items = [kumiho.get_item(kref) for kref in plan["items"]]
    queries, context, warmup = plan["queries"], plan["context"], plan["warmup"]

    def timed(calls: int, one: object) -> list[float]:
        latencies = []
        for i in range(warmup + calls):
            started = time.perf_counter()
            one(i)  # type: ignore[operator]
            if i >= warmup:
                latencies.append((time.perf_counter() - started) * 1000)
        return latencies

    hits = []
    search = timed(plan["calls"], lambda i: hits.append(len(kumiho.search(queries[i % len(queries)],
                                                                          context=context))))
    create = timed(plan["calls"], lambda i: items[i % len(items)].create_revision(
        metadata={"title": f"sdk bench {i}", "summary": "a revision written by the benchmark"}))
    print(json.dumps({"Search": search, "CreateRevision": create, "search_hits_mean": sum(hits) / len(hits)}))


if __name__ == "__main__":
    main()
