"""The largest calls the bounds allow, timed on a real appliance: prints one JSON object.

    python benchmarks/bounds_bench.py [--rounds 5] [--embedder hashing|minilm]

Starts `kumiho-ce serve` on a fresh data directory and, over real HTTP (JSON-RPC `tools/call`):

* the worst valid `kumiho_memory_reflect`: the most captures (each with the longest title and content, the
  most tags, a space so that it stacks) and as many existing `source_krefs` as the edge cap allows, a
  64 KiB response; `--rounds` times, while one-line `kumiho_memory_store` calls run beside it (how long
  another writer waits);
* the server's RSS (VmRSS) after each round and its peak (VmHWM);
* the requests that took the appliance down before the bounds (100 × 100 and 200 × 200 reflects, a 3.8 MiB
  glob): how fast they are refused now;
* the worst valid glob (256 characters, 8 wildcards) over every item.
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

from appliance.core.names import MAX_PATTERN, MAX_WILDCARDS
from appliance.mcp_api.catalogue import tools
from appliance.memory.writer import MAX_EDGES_PER_WRITE, MAX_MEMORIES_PER_WRITE
from tests.appliance_process import serve
from tests.mcp_api.hostile import RawMcp


def memory_mb(pid: int) -> dict[str, float]:
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return {key: round(int(fields[key].split()[0]) / 1024, 1) for key in ("VmRSS", "VmHWM")}


def worst_reflect(round_no: int, sources: list[str]) -> dict[str, Any]:
    capture = tools()["kumiho_memory_reflect"].input_schema["properties"]["captures"]["items"]["properties"]
    words = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa", "lambda"]

    def text(i: int, length: int) -> str:
        return " ".join(f"{words[(i + k) % len(words)]}{round_no}-{i}-{k}" for k in range(length // 8))[:length]

    captures = [{"type": "fact", "title": text(i, capture["title"]["maxLength"]),
                 "content": text(i + 1000, capture["content"]["maxLength"]),
                 "tags": [f"tag-{round_no}-{i}-{t}-" + "x" * 100 for t in range(capture["tags"]["maxItems"])],
                 "space_hint": f"bench/round-{round_no}", "event_date": "2026-03-01"}
                for i in range(MAX_MEMORIES_PER_WRITE)]
    return {"session_id": f"bench-{round_no}", "response": "r" * 65536, "captures": captures,
            "source_krefs": sources[: MAX_EDGES_PER_WRITE // MAX_MEMORIES_PER_WRITE]}


def timed(client: RawMcp, tool: str, arguments: dict[str, Any]) -> tuple[float, dict[str, Any] | None]:
    started = time.perf_counter()
    answer = client.call(tool, arguments)
    return round((time.perf_counter() - started) * 1000, 1), answer.payload


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--embedder", default="hashing", choices=("hashing", "minilm"))
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, serve(Path(tmp) / "data",
                                                    KUMIHO_CE_SEARCH__EMBEDDER=args.embedder) as running:
        pid = running.process.pid
        client, beside = RawMcp(running.base_url), RawMcp(running.base_url)
        sources = [client.call("kumiho_memory_store", {"user_text": f"Bench source memory number {i}."}).payload
                   for i in range(MAX_EDGES_PER_WRITE // MAX_MEMORIES_PER_WRITE)]
        source_krefs = [s["revision_kref"] for s in sources if s]
        out: dict[str, Any] = {"bounds": {"captures": MAX_MEMORIES_PER_WRITE, "edges": MAX_EDGES_PER_WRITE},
                               "rss_start_mb": memory_mb(pid)["VmRSS"], "rounds": []}
        for round_no in range(args.rounds):
            request = worst_reflect(round_no, source_krefs)
            body_bytes = len(json.dumps(request).encode())
            waits: list[float] = []
            done = threading.Event()

            def other_writer(round_no: int = round_no, waits: list[float] = waits, done: threading.Event = done
                             ) -> None:
                n = 0
                while not done.is_set():
                    ms, _ = timed(beside, "kumiho_memory_store", {"user_text": f"beside {round_no} {n}"})
                    waits.append(ms)
                    n += 1

            thread = threading.Thread(target=other_writer)
            thread.start()
            ms, payload = timed(client, "kumiho_memory_reflect", request)
            done.set()
            thread.join()
            assert payload and payload.get("captures_stored") == MAX_MEMORIES_PER_WRITE, payload
            edges = sum(len(c["edges_created"]) for c in payload["capture_results"])
            out["rounds"].append({"reflect_ms": ms, "request_bytes": body_bytes, "edges": edges,
                                  "stacked": sum(c["stacked"] for c in payload["capture_results"]),
                                  "stores_beside": len(waits), "store_beside_max_ms": max(waits, default=0.0),
                                  "rss_mb": memory_mb(pid)["VmRSS"]})
        refused = {}
        for label, captures, sources_n in (("reflect_100x100", 100, 100), ("reflect_200x200", 200, 200),
                                           ("reflect_20x11", MAX_MEMORIES_PER_WRITE,
                                            MAX_EDGES_PER_WRITE // MAX_MEMORIES_PER_WRITE + 1)):
            request = {"session_id": "bench-refused", "response": "r",
                       "captures": [{"type": "fact", "title": f"t{i}", "content": f"c{i}"} for i in range(captures)],
                       "source_krefs": [f"kref://CognitiveMemory/x/s{i}.conversation?r=1" for i in range(sources_n)]}
            ms, payload = timed(client, "kumiho_memory_reflect", request)
            refused[label] = {"ms": ms, "error": (payload or {}).get("error", {}).get("message", "")[:120]}
        ms, payload = timed(client, "memory_search", {"context_filter": "*a" * 2_000_000})
        refused["glob_3.8MiB"] = {"ms": ms, "error": (payload or {}).get("error", {}).get("message", "")[:120]}
        pattern = ("*" + "ab" * ((MAX_PATTERN - MAX_WILDCARDS) // (2 * MAX_WILDCARDS))) * MAX_WILDCARDS
        glob_ms = [timed(client, "memory_search", {"context_filter": "*", "name_filter": pattern[:MAX_PATTERN]})[0]
                   for _ in range(5)]
        reflects = [r["reflect_ms"] for r in out["rounds"]]
        out.update({
            "worst_reflect_ms": {"median": statistics.median(reflects), "max": max(reflects)},
            "store_beside_max_ms": max(r["store_beside_max_ms"] for r in out["rounds"]),
            "refused": refused,
            "worst_glob_ms": {"median": statistics.median(glob_ms), "max": max(glob_ms), "pattern_chars": MAX_PATTERN},
            "rss_end_mb": memory_mb(pid)["VmRSS"], "rss_peak_mb": memory_mb(pid)["VmHWM"],
            "items": running and client.call("memory_search", {"context_filter": "*"}).payload["total"],
        })
        client.http.close()
        beside.http.close()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
