"""The index pipeline: prints one JSON object.

    python benchmarks/index_bench.py [--stores 100] [--bulk 2000] [--outbox 10000,100000] [--keep DIR]
                                     [--embedder hashing|minilm]

* ``outbox_read_ms``: the search-index outbox read on graphs of 10k and 100k revisions written offline
  (``--keep DIR`` reuses them): ``scan_all_ms``, the scan of every revision for waiting ones (nothing
  pending), and ``one_item_ms``, the read of one item's waiting revisions (what a stage reads);
* ``pending_scan_ms`` / ``pending_kept_ms``: readiness' ``pending`` (the outbox's size) by a count over every
  revision, and as the graph keeps it as writes commit;
* ``store_then_recall``: in-process on real stores (the real services, no HTTP), the wait a recall pays for
  read-your-writes right after a store (``wait_synced``), p50/p95, with 1 and 8 storing threads, and the
  store itself;
* ``staged_writes``: stores/s one after another, and how long the table then takes to hold them all;
* ``sync_backlog``: rows/s the background sync indexes (embeds, writes to LanceDB, marks indexed) for a
  backlog of revisions written in bulk.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from appliance.app import Services, open_services
from appliance.config import load_settings
from appliance.graph import GraphStore, NewRevision
from appliance.memory.records import SCHEMA
from benchmarks.mcp_bench import stats

PROJECT = "Bench"
BATCH = 5000


def fill_graph(graph: GraphStore, revisions: int) -> None:
    """``revisions`` memory-like revisions in six spaces, bulk-written, all marked indexed (an index in step)."""
    spaces = [f"/{PROJECT}/s{i}" for i in range(6)]
    for space in spaces:
        graph.ensure_space(space)
    for first in range(0, revisions, BATCH):
        rows = [NewRevision(f"kref:/{spaces[i % 6]}/m{i}.conversation", {
            "schema": SCHEMA, "type": "summary", "memory_type": "summary", "title": f"memory {i}",
            "summary": f"the user said thing number {i} about topic {i % 97}"})
            for i in range(first, min(revisions, first + BATCH))]
        result = graph.create_revisions(rows)
        assert not result.failures, result.failures
    graph._engine.write(lambda tx: tx.run("MATCH (r:Revision) SET r.indexed = true"))


def outbox_read(root: Path, revisions: int, rounds: int = 30) -> dict[str, Any]:
    path = root / f"graph-{revisions}"
    marker = root / f"graph-{revisions}.done"
    if not marker.exists():
        shutil.rmtree(path, ignore_errors=True)
        started = time.perf_counter()
        with GraphStore.open(path / "graph.kz") as graph:
            fill_graph(graph, revisions)
        marker.write_text(str(round(time.perf_counter() - started, 1)))
    with GraphStore.open(path / "graph.kz") as graph:
        graph.unindexed(128)  # warm: compiled statements, buffer pool
        scans = []
        for _ in range(rounds):
            started = time.perf_counter()
            assert graph.unindexed(128) == []
            scans.append((time.perf_counter() - started) * 1000)
        result: dict[str, Any] = {"scan_all_ms": stats(scans)}
        if hasattr(graph, "count_unindexed"):  # readiness' pending: the count a scan makes, and the one kept
            counted, kept = [], []
            graph.pending_count()  # the first call reads the outbox once
            for _ in range(rounds):
                started = time.perf_counter()
                assert graph.count_unindexed() == 0
                counted.append((time.perf_counter() - started) * 1000)
                started = time.perf_counter()
                assert graph.pending_count() == 0
                kept.append((time.perf_counter() - started) * 1000)
            result["pending_scan_ms"], result["pending_kept_ms"] = stats(counted), stats(kept)
        if hasattr(graph, "unindexed_of_items"):  # the read by items that stages and rounds use instead
            middle = revisions // 2
            item = f"kref://{PROJECT}/s{middle % 6}/m{middle}.conversation"
            graph._engine.write(lambda tx: tx.run("MATCH (r:Revision {id: $id}) SET r.indexed = false",
                                                  {"id": f"{item[len('kref://'):]}?r=1"}))
            graph.unindexed_of_items([item])
            by_item = []
            for _ in range(rounds):
                started = time.perf_counter()
                assert len(graph.unindexed_of_items([item])) == 1
                by_item.append((time.perf_counter() - started) * 1000)
            graph._engine.write(lambda tx: tx.run("MATCH (r:Revision) WHERE NOT r.indexed SET r.indexed = true"))
            result["one_item_ms"] = stats(by_item)
        return result


def store_then_recall(services: Services, clients: int, stores: int) -> dict[str, Any]:
    """``clients`` threads each store ``stores`` memories; after each store, the wait a recall pays for
    read-your-writes (``wait_synced``, what recall and gRPC Search call first)."""
    waits: list[float] = []
    took: list[float] = []
    lock = threading.Lock()

    def client(n: int) -> None:
        for i in range(stores):
            word = uuid.uuid4().hex[:12]
            started = time.perf_counter()
            services.perform("kumiho_memory_store", {
                "title": f"bench note {n}.{i} {word}", "user_text": f"Client {n} noted {word} in store {i}.",
                "space_path": f"bench/c{n}", "memory_type": "fact"})
            stored = time.perf_counter()
            services.index_worker.wait_synced()
            with lock:
                took.append((stored - started) * 1000)
                waits.append((time.perf_counter() - stored) * 1000)

    threads = [threading.Thread(target=client, args=(n,)) for n in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return {"clients": clients, "store_ms": stats(took), "recall_wait_ms": stats(waits)}


def sync_rate(services: Services, rows: int) -> dict[str, Any]:
    """A backlog of ``rows`` revisions written in bulk (nobody stages them: the outbox scan finds them) until
    the sync has written and marked them all."""
    graph, worker = services.graph, services.index_worker
    assert worker.wait_idle(120)
    space = f"/{PROJECT}/bulk-{uuid.uuid4().hex[:6]}"
    graph.ensure_space(space)
    with worker.paused():  # the clock starts with the whole backlog committed
        for first in range(0, rows, BATCH):
            graph.create_revisions([NewRevision(f"kref:/{space}/b{i}.conversation", {
                "schema": SCHEMA, "type": "summary", "memory_type": "summary", "title": f"bulk {i}",
                "summary": f"bulk memory {i} about subject {i % 89}"}) for i in range(first, min(rows, first + BATCH))])
        started = time.perf_counter()
    assert worker.wait_idle(600)
    seconds = time.perf_counter() - started
    return {"rows": rows, "seconds": round(seconds, 2), "rows_per_s": round(rows / seconds, 1)}


def staged_rate(services: Services, stores: int) -> dict[str, Any]:
    """Memories stored one after another (each staged by its writer): stores/s, and how long after the last
    store the table holds them all (the background writes)."""
    worker = services.index_worker
    assert worker.wait_idle(120)
    started = time.perf_counter()
    for i in range(stores):
        services.perform("kumiho_memory_store", {"title": f"staged {i} {uuid.uuid4().hex[:8]}",
                                                 "user_text": f"staged memory {i}", "space_path": "bench/staged"})
    stored = time.perf_counter()
    assert worker.wait_idle(600)
    done = time.perf_counter()
    return {"stores": stores, "stores_per_s": round(stores / (stored - started), 1),
            "table_caught_up_after_last_store_ms": round((done - stored) * 1000, 1)}


def in_process(root: Path, embedder: str, stores: int, bulk: int) -> dict[str, Any]:
    settings = load_settings(data_dir=root / "app", search={"embedder": embedder},
                             inference={"chat_model": "none"})
    with open_services(settings) as services:
        assert services.index_worker.wait_idle(120)
        result: dict[str, Any] = {"embedder": embedder}
        result["store_then_recall"] = [store_then_recall(services, 1, stores),
                                       store_then_recall(services, 8, max(1, stores // 8))]
        result["staged_writes"] = staged_rate(services, stores)
        result["sync_backlog"] = sync_rate(services, bulk)
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--outbox", default="10000,100000", help="graph sizes for the outbox read ('' skips it)")
    parser.add_argument("--keep", type=Path, help="keep the offline graphs here and reuse them")
    parser.add_argument("--stores", type=int, default=100, help="stores per store-then-recall run (0 skips them)")
    parser.add_argument("--bulk", type=int, default=2000, help="revisions in the sync backlog")
    parser.add_argument("--embedder", default="hashing", help="hashing (no model) or minilm (the default model)")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="index-bench-"))
    root.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {}
    try:
        if args.stores:
            result.update(in_process(root, args.embedder, args.stores, args.bulk))
        if args.outbox:
            result["outbox_read_ms"] = {n: outbox_read(root, int(n)) for n in args.outbox.split(",")}
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
