"""What the operator's policy costs a write: prints one JSON object.

    python benchmarks/policy_bench.py [--writes 300]

Four real graph stores (Kùzu in a tmp directory), one per combination of the audit trail (off/on) and the
read-only guard (no read-only namespace / three of them, none of which the writes touch, so every write is
checked and passes). Each store takes the same writes, interleaved so that machine noise falls on all alike:

* ``capture``: one transaction as a stored memory makes it (item, revision with metadata, tag, artifact, edge
  to the previous capture): 5 events, so one audit row and 5 guard checks;
* ``revision``: one bare revision (1 event).

Then the audit trail's reads: ``GET /api/v1/audit``'s query for the newest page, by door, and by kref, over the
rows the run left.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from appliance.core.caller import Caller, calling
from appliance.graph import GraphStore
from appliance.graph.write_policy import WritePolicy
from appliance.memory.policy import ReadOnlyNamespaces

PROJECT = "CognitiveMemory"
SPACE = f"/{PROJECT}/Memory/work"


def configs() -> dict[str, WritePolicy]:
    read_only = ReadOnlyNamespaces.of(PROJECT, ["archive", "legal", "family"])
    return {"audit_off_guard_off": WritePolicy(), "audit_on_guard_off": WritePolicy(audit=True),
            "audit_off_guard_on": WritePolicy(read_only=read_only),
            "audit_on_guard_on": WritePolicy(read_only=read_only, audit=True)}


def capture(store: GraphStore, i: int, previous: list[str]) -> None:
    def job() -> None:
        item = store.create_item(SPACE, f"memory-{i}", "conversation").kref
        revision = store.create_revision(item, {"title": f"memory {i}", "summary": "a captured memory " * 8}).kref
        store.tag_revision(revision, "published")
        store.create_artifact(revision, "chat_io", f"/tmp/bench/{i}.json")
        if previous:
            store.create_edge(revision, previous[-1], "REFERENCED")
        previous.append(revision)

    store.atomic(job)


def timed(action: Callable[[], Any]) -> float:
    began = time.perf_counter()
    action()
    return (time.perf_counter() - began) * 1000


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"median_ms": round(statistics.median(ordered), 3),
            "p95_ms": round(ordered[int(len(ordered) * 0.95) - 1], 3), "n": len(ordered)}


def guard_cost(rounds: int = 20_000) -> float:
    """The guard's own work for one event (parse the kref, find its namespace), in microseconds."""
    policy = configs()["audit_off_guard_on"]
    kref = f"kref://{SPACE.lstrip('/')}/memory-1.conversation?r=1"
    began = time.perf_counter()
    for _ in range(rounds):
        policy.guard("revision.created", kref)
    return round((time.perf_counter() - began) / rounds * 1e6, 2)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writes", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        stores = {}
        for name, policy in configs().items():
            store = GraphStore.open(Path(scratch) / name / "graph.kuzu", buffer_pool_mb=128, readers=2)
            store.ensure_space(SPACE)
            store.policy = policy
            stores[name] = store
        captures: dict[str, list[float]] = {name: [] for name in stores}
        revisions: dict[str, list[float]] = {name: [] for name in stores}
        previous: dict[str, list[str]] = {name: [] for name in stores}
        with calling(Caller("mcp", "policy-bench/1", "kumiho_memory_store")):
            for i in range(args.writes):
                for name, store in stores.items():
                    captures[name].append(timed(lambda s=store, n=name, k=i: capture(s, k, previous[n])))
                for name, store in stores.items():
                    item = f"kref://{SPACE.lstrip('/')}/memory-{i}.conversation"
                    revisions[name].append(timed(lambda s=store, k=item: s.create_revision(k, {"title": "again"})))
        audited = stores["audit_on_guard_on"]
        rows = len(audited.audit_entries(limit=1000)) if args.writes * 2 <= 1000 else None
        reads = {
            "first_page_100": summary([timed(lambda: audited.audit_entries(limit=100)) for _ in range(20)]),
            "by_door_100": summary([timed(lambda: audited.audit_entries(door="mcp", limit=100)) for _ in range(20)]),
            "by_kref": summary([timed(lambda: audited.audit_entries(
                kref=f"kref://{SPACE.lstrip('/')}/memory-{args.writes // 2}.conversation")) for _ in range(20)]),
        }
        for store in stores.values():
            store.close()
    base_c = statistics.median(captures["audit_off_guard_off"])
    base_r = statistics.median(revisions["audit_off_guard_off"])
    print(json.dumps({
        "writes_per_config": args.writes,
        "capture_5_events": {name: summary(samples) for name, samples in captures.items()},
        "revision_1_event": {name: summary(samples) for name, samples in revisions.items()},
        "added_median_ms": {
            name: {"capture": round(statistics.median(captures[name]) - base_c, 3),
                   "revision": round(statistics.median(revisions[name]) - base_r, 3)}
            for name in stores if name != "audit_off_guard_off"},
        "guard_check_us": guard_cost(),
        "audit_rows": rows if rows is not None else args.writes * 2,
        "audit_reads": reads,
    }, indent=2))


if __name__ == "__main__":
    main()
