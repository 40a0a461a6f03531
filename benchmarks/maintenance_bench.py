"""The keyless maintenance tools at their bounds, timed in process over real HTTP (the official MCP client):
prints one JSON object.

    python benchmarks/maintenance_bench.py [--spaces 20] [--items 10] [--decompositions 10]

On a fresh data directory (hashing embedder, no model): the largest valid ``kumiho_memory_decompose``
(50 entities with 8 aliases, 50 facts about 8 entities, 50 relations, 20 supersedes, 20 contradicts) N times;
``kumiho_memory_space_profile`` over ``--spaces`` spaces of ``--items`` memories (dry run and real run);
then Dream State's graph maintenance (``maintain_graph``, no model) over everything decompose wrote.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.inprocess import serve_in_process
from tests.mcp_api.clients import call, in_http_session


def largest_decomposition(round_: int) -> dict[str, Any]:
    names = [f"Entity {round_}-{i}" for i in range(50)]
    return {
        "entities": [{"name": n, "type": "thing", "aliases": [f"{n} alias {a}" for a in range(8)]} for n in names],
        "facts": [{"statement": f"Fact {round_}-{i}: " + "x" * 100, "about": names[i % 42: i % 42 + 8]}
                  for i in range(50)],
        "relations": [{"subject": names[i], "predicate": "part of", "object": names[(i + 1) % 50]} for i in range(50)],
        "supersedes": [{"statement": f"New {round_}-{i}", "replaces": f"Old {round_}-{i}"} for i in range(20)],
        "contradicts": [{"statement": f"Claim {round_}-{i}", "conflicts_with": f"Counter {round_}-{i}"}
                        for i in range(20)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--spaces", type=int, default=20)
    parser.add_argument("--items", type=int, default=10)
    parser.add_argument("--decompositions", type=int, default=10)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, serve_in_process(Path(tmp) / "data", None,
                                                                maintenance={"idle_consolidation_minutes": 0}) as app:
        async def steps(session: Any) -> dict[str, Any]:
            anchors = []
            for s in range(options.spaces):
                for i in range(options.items):
                    stored = await call(session, "kumiho_memory_store", title=f"memory {s}-{i}",
                                        space_path=f"space-{s}", user_text=f"memory {i} of space {s}",
                                        stack_revisions=False)
                    anchors.append(stored["revision_kref"])
            timings: dict[str, list[float]] = {"decompose": []}
            for n in range(options.decompositions):
                started = time.perf_counter()
                done = await call(session, "kumiho_memory_decompose", kref=anchors[n], **largest_decomposition(n))
                timings["decompose"].append((time.perf_counter() - started) * 1000)
            edges = done["decomposed"]["edges"]
            results: dict[str, Any] = {}
            for name, args in (("space_profile_dry_run", {"dry_run": True}), ("space_profile", {}),
                               ("space_profile_again", {}), ("dream_maintain_graph", {"maintain_graph": True})):
                tool = "kumiho_memory_dream_state" if name.startswith("dream") else "kumiho_memory_space_profile"
                started = time.perf_counter()
                answer = await call(session, tool, **args)
                results[name] = {"ms": round((time.perf_counter() - started) * 1000, 1),
                                 **({"maintenance": answer.get("maintenance")} if "maintenance" in answer else
                                    {"spaces_profiled": answer.get("spaces_profiled"), "labels": answer.get("labels")})}
            ordered = sorted(timings["decompose"])
            return {"memories": len(anchors), "decompose_edges_per_call": edges,
                    "decompose_ms": {"median": round(ordered[len(ordered) // 2], 1), "max": round(ordered[-1], 1),
                                     "calls": len(ordered)}, **results}

        print(json.dumps(in_http_session(app.base_url, steps), indent=1))


if __name__ == "__main__":
    main()
