"""The appliance at N memories, through its front doors: prints one JSON object.

    python benchmarks/scale_bench.py [--memories 10000] [--clients 8] [--stores 400] [--queries 400]
                                     [--soak-seconds 0] [--embedder minilm|hashing] [--chat default|none]
                                     [--fill auto|reflect|bulk] [--keep-log FILE]

One real ``kumiho-ce serve`` on a fresh data directory, with the default models loaded (the MiniLM embedder and
the installed default chat model, linked into the data directory's ``models/``; a tiny chat completion loads
it), then, with the official ``mcp`` client over streamable HTTP:

1. **fill**: N short memories (LoCoMo turns, repeated with a suffix beyond the corpus) written by ``--clients``
   concurrent clients, either through ``kumiho_memory_reflect`` with 10 captures a call or, when the appliance
   has it (``--fill auto`` looks in its OpenAPI document), through the Memory API's batch store (100 a call).
   ``commit_per_s``: memories acknowledged per second; ``searchable_per_s``: memories per second from the
   first write until ``/api/_ready`` shows nothing left to index.
2. **store**: ``--stores`` calls of ``kumiho_memory_store`` (distinct texts, stacking on as agents use it) by the
   same number of clients at once; p50/p95 of the client-side round trip.
3. **engage**: ``--queries`` LoCoMo questions through ``kumiho_memory_engage``, the same number of clients at
   once; p50/p95 round trip and the server's own ``timing_ms.total``.
4. **soak** (``--soak-seconds`` > 0): a steady write load (the clients storing without pause) for that long;
   RSS over time and its slope over the second half.

The server's RSS (VmRSS from /proc) is sampled every half second throughout: ``at_rest`` (models loaded,
nothing stored), ``after_fill``, ``after`` (everything done, a few idle seconds later) and ``peak``; and the
slope of RSS per 1,000 memories while they are committed (after the first 10 %, which warms caches up; with
the batch store the commit is short and this figure rough).

``make bench-scale`` runs it at 10,000 memories, ``make bench-soak`` at 100,000 with a 10-minute soak.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from appliance.inference.install import chat_models
from benchmarks.mcp_bench import DATA, corpus, cycled, stats, stop_appliance, store_args
from benchmarks.rss_bench import slope_per_1000
from tests.appliance_process import ROOT, cli_env, free_port, wait_until_live
from tests.load.driver import bearer, rss_mb
from tests.mcp_api.clients import call, http_session

CAPTURES_PER_REFLECT = 10  # the most one reflect takes
CALL_TIMEOUT = 600  # seconds: a dead server must not hang the benchmark
BULK_PATH = "/api/v1/memories/batch"  # the Memory API's batch store, where the appliance has it
BULK_BATCH = 100  # the most one batch takes
# the LoCoMo file beside the checkout (mcp_bench's DATA), or beside the worktrees' parent
LOCOMO = next((p for p in (DATA, Path(__file__).resolve().parents[3] / DATA.relative_to(DATA.parents[2]))
               if p.exists()), DATA)
TARGETS = {"engage_p95_ms": 50, "store_p95_ms": 30, "commit_per_s": 500, "searchable_per_s": 150,
           "rss_mb_at_100k": 1200}


class RssSampler:
    """VmRSS of one process every ``every`` seconds in a thread; ``mark(count)`` tags later samples with how
    many memories are committed, for the slope per memory."""

    def __init__(self, pid: int, every: float = 0.5) -> None:
        self.pid, self.every = pid, every
        self.samples: list[tuple[float, float, int]] = []  # (seconds since start, MiB, memories committed)
        self.count = 0
        self._start = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.samples.append((round(time.monotonic() - self._start, 1), round(rss_mb(self.pid), 1),
                                     self.count))
            except (OSError, RuntimeError):  # the process is gone
                return
            self._stop.wait(self.every)

    def now(self) -> float:
        return round(rss_mb(self.pid), 1)

    def parts(self) -> dict[str, float]:
        """RSS split: anonymous (heaps, arrays, the KV cache) and file-backed (the mmapped chat model and
        libraries: pages the kernel can drop and read again), MiB."""
        fields = {"RssAnon": "anon", "RssFile": "file", "RssShmem": "shmem"}
        parts = {}
        with open(f"/proc/{self.pid}/status") as status:
            for line in status:
                key = line.split(":", 1)[0]
                if key in fields:
                    parts[fields[key]] = round(int(line.split()[1]) / 1024, 1)
        return parts

    def since(self, t: float) -> list[tuple[float, float, int]]:
        return [s for s in self.samples if s[0] >= t]

    def clock(self) -> float:
        return time.monotonic() - self._start


# -- the data --------------------------------------------------------------------------------------------
def memories(turns: list[dict[str, str]], count: int) -> list[dict[str, str]]:
    """``count`` short memories: a title (the turn's first words) and the turn with its speaker and date."""
    picked = []
    for i in range(count):
        turn = turns[i % len(turns)]
        repeat = f" (#{i // len(turns)})" if i >= len(turns) else ""
        words = turn["text"].split()
        title = " ".join(words[:8]) + ("…" if len(words) > 8 else "")
        picked.append({"title": f"{title}{repeat}",
                       "content": f"{turn['speaker']} ({turn['date']}): {turn['text']}{repeat}"})
    return picked


def chunks(items: list[Any], size: int) -> list[list[Any]]:
    return [items[i: i + size] for i in range(0, len(items), size)]


# -- concurrent MCP clients ------------------------------------------------------------------------------
def run_clients(base_url: str, clients: int, jobs: Iterable[Any],
                work: Callable[[Any, Any], Awaitable[float | None]]) -> list[float]:
    """``clients`` MCP sessions over HTTP taking ``jobs`` from one queue; ``work(session, job)`` returns a
    latency in ms (or None); returns them all."""
    queue = iter(jobs)
    latencies: list[float] = []

    async def client() -> None:
        async with http_session(base_url) as session:
            for job in queue:
                with anyio.fail_after(CALL_TIMEOUT):
                    latency = await work(session, job)
                if latency is not None:
                    latencies.append(latency)

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(clients):
                group.start_soon(client)

    anyio.run(main)
    return latencies


async def timed(session: Any, tool: str, **arguments: Any) -> tuple[float, dict[str, Any]]:
    start = time.perf_counter()
    result = await call(session, tool, **arguments)
    return (time.perf_counter() - start) * 1000, result


# -- the fill --------------------------------------------------------------------------------------------
def bulk_door(base_url: str, headers: dict[str, str]) -> bool:
    """Whether the appliance has the Memory API's batch store (its OpenAPI document lists it)."""
    schema = httpx.get(base_url + "/api/schema/openapi.json", headers=headers, timeout=60)
    return schema.status_code == 200 and BULK_PATH in schema.json().get("paths", {})


def fill_reflect(base_url: str, clients: int, items: list[dict[str, str]], sampler: RssSampler) -> int:
    def capture(item: dict[str, str]) -> dict[str, str]:
        return {"type": "fact", "title": item["title"], "content": item["content"], "space_hint": "scale"}

    async def work(session: Any, batch: tuple[int, list[dict[str, str]]]) -> None:
        n, captured = batch
        result = await call(session, "kumiho_memory_reflect", session_id=f"scale-{n % clients}",
                            response="Noted.", discover_edges=False, captures=[capture(c) for c in captured])
        sampler.count += len(result["stored_krefs"])

    run_clients(base_url, clients, list(enumerate(chunks(items, CAPTURES_PER_REFLECT))), work)
    return sampler.count


def fill_bulk(base_url: str, headers: dict[str, str], clients: int, items: list[dict[str, str]],
              sampler: RssSampler) -> int:
    """The Memory API's batch store: ``BULK_BATCH`` entries a call, one graph transaction each."""
    async def main() -> None:
        queue = iter(chunks(list(enumerate(items)), BULK_BATCH))
        async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=CALL_TIMEOUT) as http:
            async def client() -> None:
                for batch in queue:
                    entries = [{"key": f"scale-{n}", "content": f"{item['title']}. {item['content']}",
                                "category": "conversation"} for n, item in batch]
                    answer = await http.post(BULK_PATH, json={"entries": entries})
                    if answer.status_code != 201:
                        raise SystemExit(f"{BULK_PATH}: HTTP {answer.status_code} {answer.text[:500]}")
                    sampler.count += int(answer.json()["stored"])

            async with anyio.create_task_group() as group:
                for _ in range(clients):
                    group.start_soon(client)

    anyio.run(main)
    return sampler.count


def wait_searchable(base_url: str, headers: dict[str, str], timeout: float) -> dict[str, Any]:
    """Until ``/api/_ready`` shows every committed revision indexed; its search section."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        search = httpx.get(base_url + "/api/_ready", headers=headers, timeout=60).json().get("search", {})
        if search.get("sync_error"):
            raise SystemExit(f"index sync failed: {search['sync_error']}")
        if search.get("pending") == 0:
            return search  # type: ignore[no-any-return]
        # every readiness answer counts the revisions still to index (a scan of the graph): asked five times a
        # second it kept a core busy and halved the index's own rate; every 2 s costs ±2 s on minutes
        time.sleep(2)
    raise SystemExit(f"the index did not catch up within {timeout:.0f} s")


# -- stores, engage, soak --------------------------------------------------------------------------------
def measure_stores(base_url: str, clients: int, texts: list[str]) -> list[float]:
    async def work(session: Any, job: tuple[int, str]) -> float:
        latency, _ = await timed(session, "kumiho_memory_store", **store_args(job[1], job[0]))
        return latency

    return run_clients(base_url, clients, list(enumerate(texts)), work)


def measure_engage(base_url: str, clients: int, questions: list[str]) -> tuple[list[float], list[float], int]:
    server: list[float] = []
    empty = 0

    async def work(session: Any, question: str) -> float:
        nonlocal empty
        latency, result = await timed(session, "kumiho_memory_engage", query=question)
        server.append(result["timing_ms"]["total"])
        empty += not result["count"]
        return latency

    return run_clients(base_url, clients, questions, work), server, empty


def soak(base_url: str, clients: int, texts: list[str], seconds: float, sampler: RssSampler) -> dict[str, Any]:
    """Every client stores without pause until the deadline."""
    deadline = time.monotonic() + seconds
    start_clock = sampler.clock()
    stored = 0

    async def work(session: Any, job: tuple[int, str]) -> float:
        nonlocal stored
        latency, _ = await timed(session, "kumiho_memory_store", **store_args(job[1], 1_000_000 + job[0]))
        stored += 1
        sampler.count += 1
        return latency

    def jobs() -> Iterator[tuple[int, str]]:  # until the deadline (one generator shared by the clients)
        n = 0
        while time.monotonic() < deadline:
            yield n, f"{texts[n % len(texts)]} (soak {n})"
            n += 1

    latencies = run_clients(base_url, clients, jobs(), work)
    samples = sampler.since(start_clock)
    rss = [mb for _, mb, _ in samples]
    half = samples[len(samples) // 2:]
    minutes = (half[-1][0] - half[0][0]) / 60 if len(half) > 1 else 0
    return {"seconds": seconds, "stores": stored, "store_ms": stats(latencies),
            "rss_mb": {"first": rss[0] if rss else None, "last": rss[-1] if rss else None,
                       "max": max(rss, default=None),
                       "second_half_growth": round(half[-1][1] - half[0][1], 1) if half else None,
                       "second_half_mb_per_minute": round((half[-1][1] - half[0][1]) / minutes, 1) if minutes else None,
                       "second_half_mb_per_1000_stores": slope_per_1000([(c, mb) for _, mb, c in half])},
            "series": thin([(t, mb) for t, mb, _ in samples], 60)}


def progress(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", file=sys.stderr, flush=True)


def thin(series: list[Any], points: int) -> list[Any]:
    return series[:: max(1, len(series) // points)]


# -- the appliance ---------------------------------------------------------------------------------------
@contextmanager
def appliance(code: Path, data_dir: Path, **env: str) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``kumiho-ce serve`` from the checkout ``code`` (its process and base URL); its log beside ``data_dir``.
    A long start-up wait: on a busy machine the models take a while to load."""
    port, log = free_port(), data_dir.parent / "serve.log"
    with open(log, "a") as output:
        process = subprocess.Popen([sys.executable, "-m", "appliance", "serve", "--host", "127.0.0.1", "--port",
                                    str(port)], cwd=code, env=cli_env(data_dir, **env), stdout=output, stderr=output)
    base_url = f"http://127.0.0.1:{port}"
    try:
        wait_until_live(base_url, process, timeout=900, log=log)  # type: ignore[arg-type]
        yield process, base_url
    finally:
        stop_appliance(process, timeout=120)


def link_default_model(data_dir: Path) -> str | None:
    """Link the installed default chat model into ``data_dir/models`` (where the appliance looks for it);
    its name, or None when it is not installed (`make models`)."""
    from appliance.config import load_settings
    from appliance.inference.install import installed_path

    name, entry = next(iter(chat_models().items()))
    installed = installed_path(load_settings(), name)  # the data directory `make models` installed it in
    if installed is None:
        return None
    (data_dir / "models").mkdir(parents=True, exist_ok=True)
    (data_dir / "models" / entry["file"]).symlink_to(installed)
    return name


def load_chat_model(base_url: str, headers: dict[str, str]) -> float:
    """A one-token chat completion (the model loads on its first call); seconds."""
    start = time.perf_counter()
    answer = httpx.post(base_url + "/v1/chat/completions", headers=headers, timeout=300, json={
        "model": "default", "max_tokens": 1, "messages": [{"role": "user", "content": "Say hi."}]})
    if answer.status_code != 200:
        raise SystemExit(f"the chat model did not answer: HTTP {answer.status_code} {answer.text[:500]}")
    return round(time.perf_counter() - start, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--stores", type=int, default=400, help="timed kumiho_memory_store calls after the fill")
    parser.add_argument("--queries", type=int, default=400, help="timed kumiho_memory_engage calls after the fill")
    parser.add_argument("--soak-seconds", type=float, default=0, help="steady write load at the end (0: none)")
    parser.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm")
    parser.add_argument("--chat", choices=("default", "none"), default="default",
                        help="default: the installed default chat model, loaded before the fill")
    parser.add_argument("--fill", choices=("auto", "reflect", "bulk"), default="auto",
                        help="auto: the bulk door when the appliance has one, else reflect batches")
    parser.add_argument("--data", type=Path, default=LOCOMO, help="LoCoMo file (turns and questions)")
    parser.add_argument("--keep-log", type=Path, help="copy the appliance's log here")
    parser.add_argument("--code", type=Path, default=ROOT, help="checkout the server runs from (before/after)")
    parser.add_argument("--keep", type=Path, help="keep the appliance's data in this directory; when it holds a "
                        "filled appliance already, measure it again without filling (e.g. on a quieter machine)")
    args = parser.parse_args()
    turns, all_questions = corpus(args.data)
    items = memories(turns, args.memories)
    questions = cycled(all_questions, args.queries)
    texts = cycled([f"{t['speaker']}: {t['text']}" for t in reversed(turns)], args.stores)

    report: dict[str, Any] = {"benchmark": "scale", "code": str(args.code.resolve()), "memories": args.memories,
                              "clients": args.clients,
                              "embedder": args.embedder, "chat_model": None, "cpu_count": os.cpu_count()}
    with (contextlib.nullcontext(str(args.keep)) if args.keep else tempfile.TemporaryDirectory()) as scratch:
        data_dir = Path(scratch) / "data"
        reused = (data_dir / "graph").exists()
        data_dir.mkdir(parents=True, exist_ok=True)
        env = {"KUMIHO_CE_SEARCH__EMBEDDER": args.embedder, "KUMIHO_CE_INFERENCE__CHAT_MODEL": "none"}
        if args.chat == "default":
            report["chat_model"] = link_default_model(data_dir) if not reused else next(iter(chat_models()))
            if report["chat_model"] is None:
                raise SystemExit("the default chat model is not installed: run `make models` (or pass --chat none)")
            env["KUMIHO_CE_INFERENCE__CHAT_MODEL"] = "default"
        start = time.perf_counter()
        try:
            with appliance(args.code.resolve(), data_dir, **env) as (process, base_url), \
                    RssSampler(process.pid) as sampler:
                headers = bearer(data_dir)
                report["startup_seconds"] = round(time.perf_counter() - start, 1)
                rss: dict[str, Any] = {"started": sampler.now()}
                if args.chat == "default":
                    report["chat_load_seconds"] = load_chat_model(base_url, headers)
                # the embedder, the PII model and the index load on first use: one store and one engage
                measure_stores(base_url, 1, ["Warm-up: the appliance is starting."])
                measure_engage(base_url, 1, ["What is starting?"])
                time.sleep(2)
                rss["at_rest"] = sampler.now()
                rss["at_rest_parts"] = sampler.parts()

                progress(f"at rest: {rss['at_rest']} MiB; filling {args.memories} memories")
                fill_start = sampler.clock()
                sampler.count = 0
                door = args.fill != "reflect" and bulk_door(base_url, headers)
                if args.fill == "bulk" and not door:
                    raise SystemExit(f"--fill bulk: this appliance has no {BULK_PATH}")
                if reused:
                    report["fill"] = {"path": f"none: the appliance in {data_dir} was filled by an earlier run"}
                    committed = 0
                elif door:
                    report["fill"] = {"path": f"POST {BULK_PATH}, {BULK_BATCH} entries a call"}
                    committed = fill_bulk(base_url, headers, args.clients, items, sampler)
                else:
                    report["fill"] = {"path": f"kumiho_memory_reflect, {CAPTURES_PER_REFLECT} captures a call"}
                    committed = fill_reflect(base_url, args.clients, items, sampler)
                commit_seconds = sampler.clock() - fill_start
                search = wait_searchable(base_url, headers, timeout=max(600.0, args.memories / 5))
                searchable_seconds = sampler.clock() - fill_start
                rss["after_fill"] = sampler.now()
                rss["after_fill_parts"] = sampler.parts()
                # while memories are being committed (the index's catch-up afterwards adds none)
                fill_samples = [(c, mb) for t, mb, c in sampler.since(fill_start)
                                if c >= args.memories // 10 and t <= fill_start + commit_seconds]
                report["fill"].update({} if reused else {
                    "committed": committed, "commit_seconds": round(commit_seconds, 1),
                    "commit_per_s": round(committed / commit_seconds, 1),
                    "searchable_seconds": round(searchable_seconds, 1),
                    "searchable_per_s": round(committed / searchable_seconds, 1),
                    "mb_per_1000_memories": slope_per_1000(fill_samples)})
                report["fill"]["index_rows"] = search.get("rows")
                progress(f"filled: {report['fill']}; RSS {rss['after_fill']} MiB; timing stores")

                measure_stores(base_url, args.clients, [f"Warm-up store {n}." for n in range(args.clients)])
                started = time.perf_counter()
                stores = measure_stores(base_url, args.clients, texts)
                report["store"] = {**stats(stores), "seconds": round(time.perf_counter() - started, 1)}
                progress(f"stores: {report['store']}; timing engage")
                started = time.perf_counter()
                engage, server, empty = measure_engage(base_url, args.clients, questions)
                report["engage"] = {**stats(engage), "server_total_ms": stats(server), "empty": empty,
                                    "seconds": round(time.perf_counter() - started, 1)}
                progress(f"engage: {report['engage']}")
                if args.soak_seconds > 0:
                    report["soak"] = soak(base_url, args.clients, texts, args.soak_seconds, sampler)
                time.sleep(5)
                rss["after"] = sampler.now()
                rss["after_parts"] = sampler.parts()
                rss["peak"] = max(mb for _, mb, _ in sampler.samples)
                report["rss_mb"] = rss
                report["rss_series"] = thin([(t, mb) for t, mb, _ in sampler.samples], 60)
                process.send_signal(signal.SIGTERM)
                report["appliance_exit_code"] = process.wait(timeout=120)
        finally:
            if args.keep_log:
                log = Path(scratch) / "serve.log"
                if log.exists():
                    args.keep_log.write_text(log.read_text())
    report["wall_seconds"] = round(time.perf_counter() - start, 1)
    report["targets"] = TARGETS
    print(json.dumps(report))


if __name__ == "__main__":
    main()
