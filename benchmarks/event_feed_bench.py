"""The live event feed under load, on a real appliance in this process: prints one JSON object.

    python benchmarks/event_feed_bench.py [--writes 300] [--subscribers 1,32] [--table 100000]

* write → event latency: ``--writes`` item creations one after another while N streams (each an httpx client
  on its own thread) read ``GET /api/v1/events``; the time from the write's start to each stream's receipt of
  its ``item.created`` event (p50/p95/max over every stream), and the writes per second beside it;
* resuming from the graph's table: with ``--table`` events in the graph, a stream that resumes 10,000 events
  back (further than the in-memory ring) and how long until it has them all;
* the health check's answer time (first call, then cached).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.admin_api.sse import EventReader
from tests.inprocess import InProcess, serve_in_process

SPACE = "/CognitiveMemory/bench"


def percentiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    return {"p50_ms": round(statistics.median(ordered) * 1000, 2),
            "p95_ms": round(ordered[int(len(ordered) * 0.95) - 1] * 1000, 2),
            "max_ms": round(ordered[-1] * 1000, 2)}


def latency(app: InProcess, subscribers: int, writes: int, label: str) -> dict[str, Any]:
    started: dict[str, float] = {}
    received: list[float] = []
    lock = threading.Lock()
    ready = threading.Barrier(subscribers + 1)

    def reader() -> None:
        with httpx.Client(timeout=60) as client, client.stream("GET", app.base_url + "/api/v1/events") as answer:
            events = EventReader(answer)
            events.block()
            ready.wait()
            got = 0
            while got < writes:
                block = events.event()
                if block.kind != "item.created" or block.data is None:
                    continue
                name = block.data["kref"].rsplit("/", 1)[1].split(".")[0]
                if not name.startswith(label):
                    continue
                now = time.perf_counter()
                with lock:
                    received.append(now - started[name])
                got += 1

    threads = [threading.Thread(target=reader) for _ in range(subscribers)]
    for thread in threads:
        thread.start()
    ready.wait()
    began = time.perf_counter()
    for number in range(writes):
        name = f"{label}{number}"
        started[name] = time.perf_counter()
        app.services.graph.create_item(SPACE, name, "note")
    elapsed = time.perf_counter() - began
    for thread in threads:
        thread.join(120)
    return {"subscribers": subscribers, "writes": writes, "writes_per_s": round(writes / elapsed, 1),
            "events_received": len(received), **percentiles(received)}


def fill_table(app: InProcess, total: int) -> None:
    """Events straight into the graph's table (the feed's replay reads them like any other)."""
    graph = app.services.graph
    have = graph.last_event_seq() + 1
    rows = [{"at": "2026-01-01T00:00:00+00:00", "k": "item.updated", "kref": f"kref://CognitiveMemory/bench/x{i}.note",
             "a": "local", "d": "{}"} for i in range(max(0, total - have))]
    for start in range(0, len(rows), 20_000):
        graph._engine.write(lambda tx, part=rows[start: start + 20_000]: tx.run(
            "UNWIND $rows AS row CREATE (:Event {at: row.at, routing_key: row.k, kref: row.kref, author: row.a, "
            "details: row.d})", {"rows": part}))


def replay(app: InProcess, back: int) -> dict[str, Any]:
    newest = app.services.graph.last_event_seq()
    began = time.perf_counter()
    with httpx.Client(timeout=120) as client, client.stream(
            "GET", app.base_url + "/api/v1/events", params={"after": str(newest - back)}) as answer:
        events = EventReader(answer)
        first = None
        for count in range(back):
            block = events.event()
            first = first or time.perf_counter() - began
            assert block.id == str(newest - back + count + 1), block
        elapsed = time.perf_counter() - began
    return {"table_events": newest + 1, "replayed": back, "first_event_ms": round((first or 0) * 1000, 1),
            "seconds": round(elapsed, 2), "events_per_s": round(back / elapsed)}


def health_times(app: InProcess) -> dict[str, float]:
    times = []
    for _ in range(2):
        began = time.perf_counter()
        assert httpx.get(app.base_url + "/api/_health", timeout=30).json()["status"] == "ok"
        times.append(round((time.perf_counter() - began) * 1000, 1))
    return {"first_ms": times[0], "cached_ms": times[1]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--writes", type=int, default=300)
    parser.add_argument("--subscribers", default="1,32")
    parser.add_argument("--table", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        with serve_in_process(Path(tmp) / "data", None) as app:
            app.services.graph.ensure_space(SPACE)
            report: dict[str, Any] = {"health": health_times(app), "latency": []}
            for round_number, count in enumerate(int(n) for n in args.subscribers.split(",")):
                report["latency"].append(latency(app, count, args.writes, f"r{round_number}-"))
            fill_table(app, args.table)
        # a restart: the feed starts from the table's newest event, so resuming further back reads the table
        with serve_in_process(Path(tmp) / "data", None) as app:
            report["replay"] = replay(app, 10_000)
        print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
