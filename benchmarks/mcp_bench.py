"""Memory tool latency through MCP at N memories: prints one JSON object.

    python benchmarks/mcp_bench.py [--memories 10000] [--queries 200] [--stores 200] [--stdio 50]
                                   [--embedder minilm|hashing] [--keep DIR]

Prepares a data directory with N memories offline (LoCoMo turns, repeated with their index appended to
reach N, bulk-written through the graph API with the metadata the memory tools write, then indexed), starts
the real appliance (`kumiho-ce serve`) on it, waits for the index to be ready, and times, with the official
MCP client, `kumiho_memory_engage` (LoCoMo questions) and `kumiho_memory_store` (distinct texts, space
"bench") per call, client-side round trip, over streamable HTTP and through the stdio shim (`kumiho-ce
mcp`). Engage's server-side `timing_ms.total` is reported too. `--keep DIR` prepares DIR once and reuses it
(each run adds its stores to DIR's "bench" space).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from appliance.app import make_embedder
from appliance.config import Settings, load_settings
from appliance.datadir import DataDir
from appliance.graph import GraphStore, NewRevision
from appliance.memory.records import SCHEMA
from appliance.search.index import SearchIndex
from appliance.search.sync import IndexSync
from tests.mcp_api.clients import http_session

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "bench" / "locomo-dev.json"
PROJECT = "CognitiveMemory"
SPACES = ("personal", "work", "travel", "family", "health", "hobbies")
BATCH = 5000  # create_revisions takes at most 10,000 rows
WARMUP = 10
MARKER = "mcp-bench.json"
TARGETS = {"engage_p95_ms": 50, "store_p95_ms": 30}


def corpus(data: Path) -> tuple[list[dict[str, str]], list[str]]:
    samples = json.loads(data.read_text())
    turns, questions = [], []
    for sample in samples:
        conversation = sample["conversation"]
        for key, value in conversation.items():
            match = re.fullmatch(r"session_(\d+)", key)
            if match and isinstance(value, list):
                date = conversation.get(f"session_{match.group(1)}_date_time", "")
                turns += [{"speaker": t["speaker"], "text": t["text"], "date": date} for t in value]
        questions += [qa["question"] for qa in sample["qa"]]
    return turns, list(dict.fromkeys(questions))


def cycled(items: list[str], count: int, offset: int = 0) -> list[str]:
    """``count`` distinct strings from ``items`` starting at ``offset``, a suffix telling repeats apart."""
    picked = []
    for i in range(offset, offset + count):
        text = items[i % len(items)]
        picked.append(text if i < len(items) else f"{text} (#{i // len(items)})")
    return picked


def stats(samples: list[float]) -> dict[str, float]:
    """Milliseconds."""
    if not samples:
        return {"n": 0}
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"p50": round(pick(0.50), 2), "p95": round(pick(0.95), 2), "mean": round(statistics.fmean(ordered), 2),
            "n": len(ordered)}


# -- preparing the data directory offline ---------------------------------------------------------------
@contextmanager
def offline_graph(root: Path, embedder_name: str) -> Iterator[GraphStore]:
    """The graph of the data directory ``root``, opened offline (the appliance is not running) for a benchmark to
    write into; when the block ends, every revision is indexed with ``embedder_name`` as the appliance would."""
    settings = load_settings(data_dir=root, search={"embedder": embedder_name})
    data_dir = DataDir(settings.data_dir)
    data_dir.ensure()
    with data_dir.lock(), GraphStore.open(data_dir.graph_path, buffer_pool_mb=settings.graph.buffer_pool_mb,
                                          default_project=settings.kumiho.default_project) as graph:
        yield graph
        index_offline(settings, data_dir, graph)


def prepare(root: Path, memories: int, embedder_name: str, turns: list[dict[str, str]]) -> None:
    with offline_graph(root, embedder_name) as graph:
        for space in SPACES:
            graph.ensure_space(f"/{PROJECT}/{space}")
        for first in range(0, memories, BATCH):
            rows = []
            for i in range(first, min(memories, first + BATCH)):
                turn = turns[i % len(turns)]
                repeat = f" (#{i // len(turns)})" if i >= len(turns) else ""
                space = SPACES[i % len(SPACES)]
                words = turn["text"].split()
                title = " ".join(words[:8]) + ("…" if len(words) > 8 else "")
                rows.append(NewRevision(f"kref://{PROJECT}/{space}/m{i}.conversation", {
                    "schema": SCHEMA, "type": "summary", "memory_type": "summary", "title": f"{title}{repeat}",
                    "summary": f"{turn['speaker']} ({turn['date']}): {turn['text']}{repeat}",
                    "space": f"{PROJECT}/{space}"}))
            result = graph.create_revisions(rows)
            assert not result.failures, result.failures
    (root / MARKER).write_text(json.dumps({"memories": memories, "embedder": embedder_name}))


# -- the appliance as a process -------------------------------------------------------------------------
def index_offline(settings: Settings, data_dir: DataDir, graph: GraphStore) -> None:
    """Index every revision of a graph written offline (as the appliance would on its start), then compact."""
    embedder = make_embedder(settings)
    index = SearchIndex(data_dir.root / "index", embedder.dim, embedder.model_id)
    IndexSync(graph, index, embedder, batch=512).run_pending()
    index.optimize()


def stop_appliance(process: subprocess.Popen[bytes], timeout: float) -> None:
    """A graceful stop (SIGTERM), killed when it takes longer than ``timeout`` seconds."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def appliance_env(root: Path, embedder_name: str, port: int) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUMIHO_CE_")}
    env.update({"KUMIHO_CE_DATA_DIR": str(root), "KUMIHO_CE_SEARCH__EMBEDDER": embedder_name,
                "KUMIHO_CE_PORT": str(port), "XDG_CONFIG_HOME": str(root.parent / "no-config")})
    return env


def wait_ready(url: str, process: subprocess.Popen[bytes], memories: int, log: Path, timeout: float = 900
               ) -> dict[str, Any]:
    """Until ``/api/_live`` answers and ``/api/_ready`` shows every memory indexed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"kumiho-ce serve exited with {process.returncode}: {log.read_text()[-4000:]}")
        try:
            if httpx.get(url + "/api/_live", timeout=2).status_code == 200:
                ready = httpx.get(url + "/api/_ready", timeout=30)
                search = ready.json().get("search", {}) if ready.status_code == 200 else {}
                if search.get("sync_error"):
                    raise SystemExit(f"index sync failed: {search['sync_error']}")
                if search.get("pending") == 0 and search.get("rows", 0) >= memories:
                    return ready.json()  # type: ignore[no-any-return]
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{url} was not ready within {timeout}s: {log.read_text()[-4000:]}")


# -- MCP clients (HTTP: the tests' own; stdio here takes the benchmark's environment) -------------------
@asynccontextmanager
async def stdio_session(env: dict[str, str], errlog: Path) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "appliance", "mcp"], cwd=str(ROOT), env=env)
    with open(errlog, "a") as err:
        async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    payload = json.loads(result.content[0].text)  # type: ignore[union-attr]
    if result.is_error:
        raise SystemExit(f"{tool} failed: {payload}")
    return payload  # type: ignore[no-any-return]


def store_args(text: str, tag: object) -> dict[str, Any]:
    """kumiho_memory_store's arguments for one corpus text; ``tag`` keeps the title apart from other runs'."""
    words = text.split()
    return {"space_path": "bench", "title": f"{' '.join(words[:8])} [{tag}]", "summary": text,
            "user_text": text, "assistant_text": "Noted."}


async def measure(session: ClientSession, questions: list[str], texts: list[str], run: str
                  ) -> dict[str, Any]:
    for q in questions[:WARMUP]:
        await call(session, "kumiho_memory_engage", query=q)
    for n, text in enumerate(texts[:WARMUP]):
        await call(session, "kumiho_memory_store", **store_args(text, f"{run}w-{n}"))
    engage, server, stores = [], [], []
    cached = empty = stacked = 0
    for q in questions[WARMUP:]:
        start = time.perf_counter()
        result = await call(session, "kumiho_memory_engage", query=q)
        engage.append((time.perf_counter() - start) * 1000)
        server.append(result["timing_ms"]["total"])
        cached += bool(result.get("cached"))
        empty += not result["count"]
    for n, text in enumerate(texts[WARMUP:]):
        start = time.perf_counter()
        result = await call(session, "kumiho_memory_store", **store_args(text, f"{run}-{n}"))
        stores.append((time.perf_counter() - start) * 1000)
        stacked += bool(result.get("stacked"))
    return {"engage_ms": stats(engage), "store_ms": stats(stores), "engage_server_ms": stats(server),
            "engage_cached": cached, "engage_empty": empty, "stores_stacked": stacked}


def run_clients(base_url: str, env: dict[str, str], errlog: Path, questions: list[str], texts: list[str],
                queries: int, stores: int, stdio: int) -> dict[str, Any]:
    run = uuid.uuid4().hex[:6]  # distinct titles across runs on a kept data directory
    http_q, http_t = questions[: WARMUP + queries], texts[: WARMUP + stores]
    stdio_q = questions[WARMUP + queries: 2 * WARMUP + queries + stdio]
    stdio_t = texts[WARMUP + stores: 2 * WARMUP + stores + stdio]

    async def main() -> dict[str, Any]:
        async def over(opened: Callable[[], Any], q: list[str], t: list[str], tag: str) -> dict[str, Any]:
            async with opened() as session:
                return await measure(session, q, t, tag)

        report = {"http": await over(lambda: http_session(base_url), http_q, http_t, run)}
        if stdio:
            report["stdio"] = await over(lambda: stdio_session(env, errlog), stdio_q, stdio_t, run + "s")
        return report

    return anyio.run(main)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--stores", type=int, default=200)
    parser.add_argument("--stdio", type=int, default=50, help="engage and store calls through the stdio shim")
    parser.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm")
    parser.add_argument("--keep", type=Path, help="prepare this data directory once and reuse it")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    turns, all_questions = corpus(args.data)
    questions = cycled(all_questions, 2 * WARMUP + args.queries + args.stdio)
    # store texts: turns from the end of the corpus backwards, so they differ from the first memories
    texts = cycled([f"{t['speaker']}: {t['text']}" for t in reversed(turns)], 2 * WARMUP + args.stores + args.stdio)

    with tempfile.TemporaryDirectory() as scratch:
        root = (args.keep or Path(scratch) / "data").resolve()
        marker = root / MARKER
        prepare_s: float | None = None
        if marker.exists():
            prepared = json.loads(marker.read_text())
            if prepared != {"memories": args.memories, "embedder": args.embedder}:
                raise SystemExit(f"{root} was prepared with {prepared}; use another --keep directory")
        else:
            if root.exists() and any(root.iterdir()):
                raise SystemExit(f"{root} is not empty and was not prepared by this benchmark")
            start = time.perf_counter()
            prepare(root, args.memories, args.embedder, turns)
            prepare_s = round(time.perf_counter() - start, 1)

        port = free_port()
        env = appliance_env(root, args.embedder, port)
        log = Path(scratch) / "serve.log"
        with open(log, "a") as output:
            process = subprocess.Popen([sys.executable, "-m", "appliance", "serve", "--host", "127.0.0.1",
                                        "--port", str(port)], cwd=ROOT, env=env, stdout=output, stderr=output)
        base_url = f"http://127.0.0.1:{port}"
        try:
            start = time.perf_counter()
            ready = wait_ready(base_url, process, args.memories, log)
            startup_s = round(time.perf_counter() - start, 1)
            start = time.perf_counter()
            clients = run_clients(base_url, env, Path(scratch) / "shim.log", questions, texts, args.queries,
                                  args.stores, args.stdio)
            calls_s = round(time.perf_counter() - start, 1)
        finally:
            start = time.perf_counter()
            stop_appliance(process, timeout=60)
            stop_s = round(time.perf_counter() - start, 1)

    report = {"benchmark": "mcp", "memories": args.memories, "embedder": ready["search"]["embedder"],
              **clients, "prepare_seconds": prepare_s, "startup_seconds": startup_s,
              "calls_seconds": calls_s, "stop_seconds": stop_s,
              "index_rows_at_start": ready["search"]["rows"], "cpu_count": os.cpu_count(),
              "appliance_exit_code": process.returncode, "targets": TARGETS}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
