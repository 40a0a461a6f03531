"""Server memory under steady writes: prints one JSON object.

    python benchmarks/rss_bench.py [--stores 2000] [--reads 2000] [--clients 8] [--every 100] [--reflects 3]
                                   [--captures 50] [--sources 20] [--embedder minilm|hashing] [--code DIR]

Starts a real appliance (`kumiho-ce serve`, fresh data directory, no chat model), stores N short memories
through MCP over streamable HTTP with several clients at once, samples the server's RSS (VmRSS) every k
stores, then as many engage/recall calls (distinct queries) and samples again, then runs a few large reflects
(many captures, each linked to many sources), and samples once more after a few idle seconds.
``mb_per_1000_stores`` is the slope of RSS over the stores after the first 10 %, ``mb_per_1000_reads`` over
the reads.
``--code DIR`` runs the server from another checkout (to measure a version before a change).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.appliance_process import ROOT, cli_env, free_port, wait_until_live
from tests.load.driver import percentiles, rss_mb
from tests.mcp_api.clients import call, http_session

CALL_TIMEOUT = 600  # seconds


def slope_per_1000(series: list[tuple[int, float]]) -> float | None:
    """Least-squares slope of RSS (MiB) over stores, per 1,000 stores."""
    if len(series) < 2:
        return None
    xs, ys = [x for x, _ in series], [y for _, y in series]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    var = sum((x - mx) ** 2 for x in xs)
    return round(1000 * sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / var, 1) if var else None


def store_args(n: int, name: str) -> dict[str, Any]:
    return {"space_path": "rss", "title": f"Note {n} by {name}", "assistant_text": "Noted.",
            "user_text": f"Short memory number {n} from {name}: the build took {n % 97} s.", "stack_revisions": False}


def fill(base_url: str, pid: int, stores: int, clients: int, every: int) -> dict[str, Any]:
    series: list[tuple[int, float]] = [(0, round(rss_mb(pid), 1))]
    latencies: list[float] = []
    krefs: list[str] = []
    counter = iter(range(stores))

    async def client(name: str) -> None:
        async with http_session(base_url) as session:
            for n in counter:
                start = time.perf_counter()
                with anyio.fail_after(CALL_TIMEOUT):  # a server that died must not hang the benchmark
                    stored = await call(session, "kumiho_memory_store", **store_args(n, name))
                latencies.append((time.perf_counter() - start) * 1000)
                krefs.append(stored["revision_kref"])
                if len(krefs) % every == 0:
                    series.append((len(krefs), round(rss_mb(pid), 1)))

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for i in range(clients):
                group.start_soon(client, f"client-{i}")

    start = time.perf_counter()
    anyio.run(main)
    return {"series": series, "krefs": krefs, "store_ms": percentiles(latencies),
            "seconds": round(time.perf_counter() - start, 1)}


def read(base_url: str, pid: int, reads: int, clients: int, every: int) -> dict[str, Any]:
    """Engage and recall, alternating, each query distinct (the 5-second recall cache answers nothing)."""
    series: list[tuple[int, float]] = [(0, round(rss_mb(pid), 1))]
    done: list[int] = []
    counter = iter(range(reads))

    async def client() -> None:
        async with http_session(base_url) as session:
            for n in counter:
                tool = "kumiho_memory_engage" if n % 2 else "kumiho_memory_recall"
                with anyio.fail_after(CALL_TIMEOUT):
                    await call(session, tool, query=f"how long did build {n % 97} take (question {n})?")
                done.append(n)
                if len(done) % every == 0:
                    series.append((len(done), round(rss_mb(pid), 1)))

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(clients):
                group.start_soon(client)

    start = time.perf_counter()
    anyio.run(main)
    return {"series": series, "seconds": round(time.perf_counter() - start, 1)}


def reflect(base_url: str, pid: int, count: int, captures: int, sources: list[str]) -> list[dict[str, Any]]:
    async def main() -> list[dict[str, Any]]:
        done = []
        async with http_session(base_url) as session:
            for r in range(count):
                start = time.perf_counter()
                arguments = {"session_id": f"rss-{r}", "response": "Noted.", "discover_edges": False,
                             "source_krefs": sources, "captures": [
                                 {"type": "fact", "title": f"Reflected fact {r}-{c}",
                                  "content": f"Fact {c} of reflect {r}: the nightly job {c} runs at {c % 24}:00.",
                                  "space_hint": "rss-facts"} for c in range(captures)]}
                with anyio.fail_after(CALL_TIMEOUT):
                    result = await session.call_tool("kumiho_memory_reflect", arguments)
                text = result.content[0].text  # type: ignore[union-attr]
                done.append({"seconds": round(time.perf_counter() - start, 1), "ok": not result.is_error,
                             "rss_mb": round(rss_mb(pid), 1), **({"error": text[:300]} if result.is_error else {})})
        return done

    return anyio.run(main)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stores", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--every", type=int, default=100, help="sample RSS every this many stores")
    parser.add_argument("--reads", type=int, default=2000, help="engage/recall calls after the stores")
    parser.add_argument("--reflects", type=int, default=3)
    parser.add_argument("--captures", type=int, default=10, help="captures per reflect (at most 10)")
    parser.add_argument("--sources", type=int, default=10,
                        help="source_krefs per reflect (each capture links each: at most 100 edges a call)")
    parser.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm")
    parser.add_argument("--code", type=Path, default=ROOT, help="checkout the server runs from")
    args = parser.parse_args()
    code = args.code.resolve()
    with tempfile.TemporaryDirectory() as scratch:
        data, port = Path(scratch) / "data", free_port()
        env = cli_env(data, KUMIHO_CE_SEARCH__EMBEDDER=args.embedder, PYTHONPATH=str(code))
        log = Path(scratch) / "serve.log"
        with open(log, "a") as output:
            process = subprocess.Popen([sys.executable, "-m", "appliance", "serve", "--host", "127.0.0.1",
                                        "--port", str(port)], cwd=code, env=env, stdout=output, stderr=output)
        base_url = f"http://127.0.0.1:{port}"
        try:
            wait_until_live(base_url, process, log=log)
            start_mb = round(rss_mb(process.pid), 1)
            filled = fill(base_url, process.pid, args.stores, args.clients, args.every)
            after_stores = round(rss_mb(process.pid), 1)
            reads = read(base_url, process.pid, args.reads, args.clients, args.every)
            after_reads = round(rss_mb(process.pid), 1)
            reflects = reflect(base_url, process.pid, args.reflects, args.captures,
                               filled["krefs"][: args.sources])
            time.sleep(5)
            idle = round(rss_mb(process.pid), 1)
        finally:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
    series = filled["series"]
    steady = [(x, y) for x, y in series if x >= args.stores // 10]
    report = {"benchmark": "rss", "code": str(code), "embedder": args.embedder, "stores": args.stores,
              "clients": args.clients, "fill_seconds": filled["seconds"], "store_ms": filled["store_ms"],
              "rss_mb": {"start": start_mb, "after_stores": after_stores, "after_reads": after_reads,
                         "after_reflects": reflects[-1]["rss_mb"]
                         if reflects else None, "idle_5s_later": idle},
              "mb_per_1000_stores": slope_per_1000(steady), "reads": args.reads,
              "mb_per_1000_reads": slope_per_1000(reads["series"]), "read_seconds": reads["seconds"],
              "reflects": reflects,
              "reflect_shape": {"captures": args.captures, "source_krefs": args.sources},
              "series": series, "read_series": reads["series"], "cpu_count": os.cpu_count()}
    print(json.dumps(report))


if __name__ == "__main__":
    main()
