"""Kumiho's gRPC next to MCP on one real appliance: prints one JSON object.

    python benchmarks/grpc_bench.py [--items 2000] [--calls 200] [--warmup 20]

Prepares a data directory with ``items`` items (one revision each, a title and a summary from a small vocabulary)
in project ``Bench`` offline, starts `kumiho-ce serve` on it, and times per call, client-side round trip, in
this order on the same appliance:

* ``grpc_sdk``: the public Kumiho SDK 0.14.3 (``.venv-kumiho``, `make kumiho-sdk`) in its own process, its client
  from its local-CE probe: ``kumiho.search(query, context="Bench")`` (gRPC ``Search``) and
  ``Item.create_revision`` (gRPC ``CreateRevision``);
* ``grpc_raw``: a plain grpcio channel from this process with the appliance's own message classes (the same
  two RPCs, no SDK interceptors or object wrapping);
* ``mcp_http``: the official MCP client over streamable HTTP (/mcp): ``kumiho_fulltext_search`` (the same query
  and context, ``limit`` 100: the page gRPC Search answers by default) and ``kumiho_create_revision`` (the same
  items).

The search queries carry typos ("transprot"), as agents' do. p50/p95/mean in ms per operation and door.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from appliance.graph import NewRevision
from benchmarks.mcp_bench import offline_graph
from tests.appliance_process import serve
from tests.kumiho_sdk_env import sdk_env, sdk_python
from tests.mcp_api.clients import http_session

PROJECT = "Bench"
SPACES = tuple(f"space-{n}" for n in range(10))
WORDS = ("transport", "schedule", "budget", "database", "backup", "deploy", "release", "invoice", "meeting",
         "holiday", "network", "printer", "kitchen", "garden", "contract", "migration", "staging", "runbook")
HITS = 100  # the SDK's Search asks for no page size and gets the server's default page (100): MCP asks for as many
QUERIES = ("transprot schedule", "databse backup", "relase", "staging migraton", "kitchen", "budgte meeting",
           "netwrok printer", "holiday contract")


def prepare(root: Path, items: int) -> list[str]:
    """``items`` items with one revision each, written offline and indexed; their krefs."""
    rng = random.Random(14)
    krefs = []
    with offline_graph(root, "hashing") as graph:
        for space in SPACES:
            graph.ensure_space(f"/{PROJECT}/{space}")
        rows = []
        for i in range(items):
            words = rng.sample(WORDS, 3)
            kref = f"kref://{PROJECT}/{SPACES[i % len(SPACES)]}/{'-'.join(words)}-{i}.note"
            krefs.append(kref)
            rows.append(NewRevision(kref, {"title": " ".join(words), "summary": f"notes on {' and '.join(words)}"}))
        result = graph.create_revisions(rows)
        assert not result.failures, result.failures
    return krefs


def summary(latencies: list[float]) -> dict[str, float]:
    ms = sorted(latencies)
    return {"calls": len(ms), "p50_ms": round(statistics.median(ms), 2),
            "p95_ms": round(ms[max(0, int(len(ms) * 0.95) - 1)], 2), "mean_ms": round(statistics.fmean(ms), 2)}


def timed(calls: int, warmup: int, one: Callable[[int], Any]) -> list[float]:
    latencies = []
    for i in range(warmup + calls):
        started = time.perf_counter()
        one(i)
        if i >= warmup:
            latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def grpc_sdk(port: int, home: Path, plan: dict[str, Any]) -> dict[str, Any]:
    done = subprocess.run([str(sdk_python()), str(Path(__file__).with_name("grpc_bench_sdk.py"))],
                          input=json.dumps(plan), env=sdk_env(home, port), cwd=home, text=True, capture_output=True,
                          timeout=1800, check=False)
    if done.returncode:
        raise SystemExit(f"the SDK side failed ({done.returncode}):\n{done.stderr[-4000:]}")
    measured = json.loads(done.stdout.splitlines()[-1])
    return {"Search": summary(measured["Search"]), "CreateRevision": summary(measured["CreateRevision"]),
            "search_hits_mean": round(measured["search_hits_mean"], 1)}


def grpc_raw(port: int, plan: dict[str, Any]) -> dict[str, Any]:
    from appliance.grpc_api.descriptor import message

    def unary(channel: grpc.Channel, method: str, request: str, response: str) -> Any:
        return channel.unary_unary(f"/kumiho.KumihoService/{method}",
                                   request_serializer=message(request).SerializeToString,
                                   response_deserializer=message(response).FromString)

    kref = message("Kref")
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        search = unary(channel, "Search", "SearchRequest", "SearchResponse")
        create = unary(channel, "CreateRevision", "CreateRevisionRequest", "RevisionResponse")
        queries, items = plan["queries"], plan["items"]
        hits: list[int] = []
        searched = timed(plan["calls"], plan["warmup"], lambda i: hits.append(len(search(message("SearchRequest")(
            query=queries[i % len(queries)], context_filter=plan["context"]), timeout=30).results)))
        created = timed(plan["calls"], plan["warmup"], lambda i: create(message("CreateRevisionRequest")(
            item_kref=kref(uri=items[i % len(items)]),
            metadata={"title": f"raw bench {i}", "summary": "a revision written by the benchmark"}), timeout=30))
    return {"Search": summary(searched), "CreateRevision": summary(created),
            "search_hits_mean": round(statistics.fmean(hits), 1)}


def mcp_http(base_url: str, plan: dict[str, Any]) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        async with http_session(base_url) as session:
            queries, items, warmup = plan["queries"], plan["items"], plan["warmup"]
            searched, created, hits = [], [], []
            for i in range(warmup + plan["calls"]):
                started = time.perf_counter()
                found = await session.call_tool("kumiho_fulltext_search", {
                    "query": queries[i % len(queries)], "context": plan["context"], "limit": HITS})
                if i >= warmup:
                    searched.append((time.perf_counter() - started) * 1000)
                assert not found.is_error, found.content
                hits.append(len(found.structured_content["results"]))  # type: ignore[index]
            for i in range(warmup + plan["calls"]):
                started = time.perf_counter()
                made = await session.call_tool("kumiho_create_revision", {
                    "item_kref": items[i % len(items)],
                    "metadata": {"title": f"mcp bench {i}", "summary": "a revision written by the benchmark"}})
                if i >= warmup:
                    created.append((time.perf_counter() - started) * 1000)
                assert not made.is_error, made.content
            return {"kumiho_fulltext_search": summary(searched), "kumiho_create_revision": summary(created),
                    "search_hits_mean": round(statistics.fmean(hits), 1)}

    return anyio.run(main)  # type: ignore[no-any-return]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    options = parser.parse_args()
    sdk_python()  # the SDK's environment first: `make kumiho-sdk`
    with tempfile.TemporaryDirectory(prefix="grpc-bench-") as tmp:
        root = Path(tmp)
        krefs = prepare(root / "data", options.items)
        rng = random.Random(7)
        plan = {"queries": list(QUERIES), "context": PROJECT, "calls": options.calls, "warmup": options.warmup,
                "items": rng.sample(krefs, min(50, len(krefs)))}
        with serve(root / "data") as running:
            port = int(running.base_url.rsplit(":", 1)[1])
            report = {"items": options.items, "calls_per_operation": options.calls, "warmup": options.warmup,
                      "search_context": PROJECT, "queries": list(QUERIES),
                      "grpc_sdk": grpc_sdk(port, root / "sdk-home", plan),
                      "grpc_raw": grpc_raw(port, plan),
                      "mcp_http": mcp_http(running.base_url, plan)}
            running.stop()
    report["notes"] = ("grpc_sdk: the public kumiho SDK 0.14.3 in its own process (kumiho.search, "
                       "Item.create_revision); grpc_raw: a plain grpcio channel with the appliance's message classes; "
                       "mcp_http: the official MCP client over streamable HTTP; per call, client-side round trip")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
