"""Online backup benchmark: how long writes are held, and what a client writing meanwhile sees. Prints one JSON
object.

    python benchmarks/backup_bench.py [--sizes 1000,10000] [--repeat 3]

For each size: a temporary data directory gets that many memories (the graph's bulk writes, one revision each
with a ~400-character summary, plus one artifact file of ~1 KB per memory as memory_store writes), indexed with
the hashing embedder. Then ``--repeat`` backups are made while one client stores memories in a loop
(``services.perform("kumiho_memory_store")``). Reported per size: the time graph writes were held (checkpoint,
graph copy, artifact links), the time the index worker was paused (index copy plus the hold), writing the
archive, the whole backup, the archive's size, and the client's store latencies during the backups against
those before them (median and worst, ms).
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from appliance.app import open_services
from appliance.config import load_settings
from appliance.graph import NewRevision

PROJECT = "Bench"
BATCH = 5000
FILLER = "A sentence of the kind a stored summary holds, repeated to a typical summary's length. " * 4


def seed(services: Any, memories: int) -> float:
    start = time.perf_counter()
    graph = services.graph
    for s in range(20):
        graph.ensure_space(f"/{PROJECT}/s{s}")
    for first in range(0, memories, BATCH):
        rows = [NewRevision(f"kref://{PROJECT}/s{i % 20}/m{i}.note", {"title": f"Memory {i}", "summary": FILLER})
                for i in range(first, min(memories, first + BATCH))]
        assert not graph.create_revisions(rows).failures
    artifacts = services.data_dir.root / "artifacts" / PROJECT
    artifacts.mkdir(parents=True, exist_ok=True)
    for i in range(memories):
        (artifacts / f"m{i}.md").write_text(f"# Memory {i}\n\n" + FILLER * 3)
    assert services.index_worker.wait_idle(1800)
    return time.perf_counter() - start


def summary(samples: list[float]) -> dict[str, float]:
    return {"median_ms": round(statistics.median(samples) * 1000, 1), "max_ms": round(max(samples) * 1000, 1),
            "n": len(samples)}


def run(memories: int, repeat: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="backup-bench-") as tmp:
        settings = load_settings(data_dir=Path(tmp) / "data", search={"embedder": "hashing"},
                                 inference={"chat_model": "none"})
        with open_services(settings) as services:
            seconds = seed(services, memories)
            latencies: list[tuple[float, float]] = []  # (when it started, how long it took)
            stop = threading.Event()

            def client() -> None:
                n = 0
                while not stop.is_set():
                    began = time.perf_counter()
                    services.perform("kumiho_memory_store", {"project": "Client", "space_path": "notes",
                                                             "user_text": f"client write {n}"})
                    latencies.append((began, time.perf_counter() - began))
                    n += 1

            thread = threading.Thread(target=client)
            thread.start()
            time.sleep(3.0)  # a baseline of the client's latency
            windows, made, sizes = [], [], []
            for _ in range(repeat):
                began = time.perf_counter()
                result = services.backups.create("manual")
                windows.append((began, time.perf_counter()))
                made.append(result)
                sizes.append(result.path.stat().st_size)
                result.path.unlink()
                time.sleep(1.0)
            stop.set()
            thread.join()
        during = [took for at, took in latencies if any(a <= at + took and at <= b for a, b in windows)]
        before = [took for at, took in latencies if at + took < windows[0][0]]

        def figure(name: str) -> dict[str, float]:
            values = [m.timings[name] for m in made]
            return {"median_ms": round(statistics.median(values) * 1000, 1), "max_ms": round(max(values) * 1000, 1)}

        return {"memories": memories, "seed_seconds": round(seconds, 1),
                "writes_held": figure("writes_held"), "index_paused": figure("index_paused"),
                "in_hold": {name: figure(name) for name in ("graph_copy", "artifacts_in_hold", "counts")},
                "first_pass": figure("first_pass"),
                "archive_write": figure("archive"), "staging": figure("total"),
                "backup_total_ms": [round((b - a) * 1000, 1) for a, b in windows],
                "archive_mb": round(statistics.median(sizes) / 1e6, 2),
                "data_mb": round(sum(f.size for f in made[0].manifest.files) / 1e6, 2),
                "files": len(made[0].manifest.files),
                "client_store_before": summary(before) if before else None,
                "client_store_during_backup": summary(during) if during else None}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    results = [run(int(size), args.repeat) for size in args.sizes.split(",")]
    print(json.dumps({"benchmark": "backup", "results": results}, indent=2))


if __name__ == "__main__":
    main()
