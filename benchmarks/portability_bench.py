"""Export and import rates at 1k and 10k memories, on real stores: prints one JSON object.

    python benchmarks/portability_bench.py [--sizes 1000 10000]

For each size: a fresh in-process appliance (real Kùzu and LanceDB, the hashing embedder) is filled with that
many memories, each an item with a revision (title, summary, type metadata), its artifact file in the data
directory, and an edge to the previous memory; then, over real HTTP:

* export: ``GET /api/v1/export`` streamed to a file (seconds, records, bytes, memories per second, and this
  process's resident memory before and after: the export holds a page, not the graph);
* import: the file staged in a second, empty appliance's ``imports/`` folder, ``POST /api/v1/imports`` naming
  it, the job followed to its end (seconds, memories per second), then how long the search index took to
  catch up;
* a second import of the same file (everything already held: the check alone, nothing written).

Rates are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from appliance.graph.links import NewEdge
from appliance.graph.revisions import NewArtifact, NewRevision
from tests.inprocess import InProcess, serve_in_process, wait_job

BATCH = 1000


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def fill(app: InProcess, memories: int) -> None:
    graph = app.services.graph
    root = app.services.data_dir.root / "artifacts" / "Bench" / "notes"
    root.mkdir(parents=True, exist_ok=True)
    graph.create_project("Bench")
    graph.create_space("/Bench", "notes")
    previous: str | None = None
    for start in range(0, memories, BATCH):
        rows = []
        for n in range(start, min(memories, start + BATCH)):
            path = root / f"memory-{n}-0a1b2c3d.md"
            path.write_text(f"# Memory {n}\n\nThe full text of memory number {n}, about topic {n % 37}.\n")
            rows.append(NewRevision(f"kref://Bench/notes/memory-{n}.conversation",
                                    {"title": f"Memory {n}", "summary": f"memory number {n} about topic {n % 37}",
                                     "type": "fact"},
                                    (NewArtifact("memory.md", str(path), is_default=True),)))
        # Kùzu may refuse a bulk commit while the index sync reads (it is then rolled back): wait for it first
        app.services.index_worker.wait_synced(120)
        created = [r.kref for r in graph.create_revisions(rows).revisions if r is not None]
        app.services.index_worker.wait_synced(120)
        edges = [NewEdge(created[i], created[i - 1], "REFERENCED") for i in range(1, len(created))]
        if previous is not None:
            edges.append(NewEdge(created[0], previous, "REFERENCED"))
        graph.create_edges(edges)
        previous = created[-1]


def run(memories: int, tmp: Path) -> dict[str, Any]:
    exported = tmp / f"export-{memories}.jsonl"
    with serve_in_process(tmp / f"source-{memories}", None) as source:
        fill(source, memories)
        rss_before = rss_mb()
        started = time.perf_counter()
        with httpx.stream("GET", source.base_url + "/api/v1/export", timeout=600) as answer, exported.open("wb") as out:
            for chunk in answer.iter_bytes():
                out.write(chunk)
        export_seconds = time.perf_counter() - started
        rss_after = rss_mb()
    lines = exported.read_bytes().count(b"\n")
    with serve_in_process(tmp / f"target-{memories}", None) as target:
        imports = target.services.data_dir.root / "imports"
        imports.mkdir()
        (imports / exported.name).write_bytes(exported.read_bytes())
        imported = []
        for _ in range(2):
            started = time.perf_counter()
            job = httpx.post(target.base_url + "/api/v1/imports", json={"file": exported.name}, timeout=60).json()
            final = wait_job(target, job["job_id"], timeout=3600)
            assert final["state"] == "done", final
            seconds = time.perf_counter() - started
            index_started = time.perf_counter()
            synced = target.services.index_worker.wait_synced(600)
            imported.append({"seconds": round(seconds, 2), "memories_per_second": round(memories / seconds, 1),
                             "records_per_second": round(final["result"]["records"] / seconds, 1),
                             "new": final["result"]["new"], "unchanged": final["result"]["unchanged"],
                             "index_catch_up_seconds": round(time.perf_counter() - index_started, 2),
                             "index_synced": synced})
    return {"memories": memories, "records": lines - 2, "bytes": exported.stat().st_size,
            "export": {"seconds": round(export_seconds, 2), "memories_per_second": round(memories / export_seconds, 1),
                       "records_per_second": round((lines - 2) / export_seconds, 1),
                       "rss_mb_before": rss_before, "rss_mb_after": rss_after},
            "import": imported[0], "import_again": imported[1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="portability-bench-") as tmp:
        results = [run(size, Path(tmp)) for size in args.sizes]
    print(json.dumps({"benchmark": "portability", "embedder": "hashing", "results": results}, indent=2))


if __name__ == "__main__":
    main()
