"""The load suite's driver: many MCP clients (streamable HTTP and the stdio shim) and admin API clients
against one real ``kumiho-ce serve`` for a bounded time, then a check that every acknowledged write is
found again. Used by ``tests/load`` (short, in ``make test``) and ``benchmarks/load_test.py`` (60 s, soak).

Each MCP client loops over a weighted mix of engage, recall, store, reflect and ingest; every write carries a
unique marker word, so that afterwards a full-text search for the marker must find the revision the write
acknowledged. The server's RSS is sampled every second. Latencies are reported, never asserted.
"""

from __future__ import annotations

import json
import random
import statistics
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx
from mcp.client.session import ClientSession

from tests.mcp_api.clients import http_session, stdio_session

CALL_TIMEOUT = 300  # seconds
# operation → weight in each MCP client's mix
MIX = {"engage": 30, "recall": 15, "store": 30, "reflect": 10, "ingest": 15}
TOPICS = ("backup schedule", "deploy pipeline", "tea preferences", "database version", "travel plans",
          "code review habits", "incident on the payment service", "standup time", "laptop setup")


def rss_mb(pid: int) -> float:
    """Resident set size of a process in MiB (VmRSS)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def percentiles(samples: list[float]) -> dict[str, float]:
    """Milliseconds."""
    if not samples:
        return {"n": 0}
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))]  # noqa: E731
    return {"n": len(ordered), "p50": round(pick(0.50), 1), "p95": round(pick(0.95), 1),
            "p99": round(pick(0.99), 1), "max": round(ordered[-1], 1), "mean": round(statistics.fmean(ordered), 1)}


@dataclass
class Tally:
    latencies: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: list[dict[str, str]] = field(default_factory=list)
    acknowledged: dict[str, str] = field(default_factory=dict)  # marker → revision kref the write returned
    rss: list[tuple[float, float]] = field(default_factory=list)  # (seconds since start, MiB)
    last_call_end: float = 0.0  # monotonic

    def error(self, client: str, op: str, message: str) -> None:
        self.errors.append({"client": client, "op": op, "message": message[:500]})


def marker() -> str:
    # letters only: one BM25 term, never split by the tokenizer
    return "zq" + "".join(random.choice("bcdfghjklmnpqrstvwxz") for _ in range(12))


async def _tool(session: ClientSession, tool: str, arguments: dict[str, Any]) -> tuple[dict[str, Any] | None, str]:
    result = await session.call_tool(tool, arguments)
    text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
    payload = json.loads(text) if text else {}
    if result.is_error or "error" in payload:
        return None, text
    return payload, ""


async def _one_op(session: ClientSession, op: str, name: str, n: int, tally: Tally) -> None:
    topic = random.choice(TOPICS)
    if op == "engage":
        payload, error = await _tool(session, "kumiho_memory_engage", {"query": f"what do we know about {topic}?"})
    elif op == "recall":
        payload, error = await _tool(session, "kumiho_memory_recall", {"query": topic, "limit": 5})
    elif op == "store":
        word = marker()
        payload, error = await _tool(session, "kumiho_memory_store", {
            "space_path": "load", "title": f"{topic} note {word}", "summary": f"Note {n} of {name} on {topic}.",
            "user_text": f"{name} wrote note {n} about the {topic}: marker {word}.", "assistant_text": "Noted.",
            "stack_revisions": False})
        if payload is not None:
            tally.acknowledged[word] = payload["revision_kref"]
    elif op == "reflect":
        words = [marker() for _ in range(3)]
        payload, error = await _tool(session, "kumiho_memory_reflect", {
            "session_id": f"{name}-s", "response": f"Noted the {topic}.", "discover_edges": False, "captures": [
                {"type": "fact", "title": f"{topic} fact {w}", "content": f"{name} learned a fact about {topic}: {w}.",
                 "space_hint": "load-facts"} for w in words]})
        if payload is not None:
            tally.acknowledged.update(zip(words, payload["stored_krefs"], strict=True))
    else:  # ingest: buffered in working memory, not stored as a memory
        payload, error = await _tool(session, "kumiho_memory_ingest", {
            "user_id": name, "session_id": f"{name}-chat", "message": f"Remind me about the {topic}, please."})
    if payload is None:
        tally.error(name, op, error)


async def _mcp_client(open_session: Any, name: str, deadline: float, tally: Tally, seed: int) -> None:
    rng = random.Random(seed)
    ops, weights = list(MIX), list(MIX.values())
    try:
        async with open_session() as session:
            n = 0
            while time.monotonic() < deadline:
                op = rng.choices(ops, weights)[0]
                start = time.perf_counter()
                try:
                    with anyio.fail_after(CALL_TIMEOUT):  # a hung call is an error, not a hung run
                        await _one_op(session, op, name, n, tally)
                except Exception as exc:  # a transport failure is an error of the run, not of the driver
                    tally.error(name, op, f"{type(exc).__name__}: {exc}")
                tally.latencies[op].append((time.perf_counter() - start) * 1000)
                tally.last_call_end = time.monotonic()
                n += 1
    except Exception as exc:
        tally.error(name, "session", f"{type(exc).__name__}: {exc}")


async def _admin_client(base_url: str, headers: dict[str, str], name: str, deadline: float, tally: Tally) -> None:
    async with httpx.AsyncClient(base_url=base_url, headers=headers, timeout=60) as http:
        while time.monotonic() < deadline:
            for op, path, params in (("api_search", "/api/v1/search", {"q": random.choice(TOPICS), "limit": 5}),
                                     ("api_ready", "/api/_ready", None), ("api_jobs", "/api/v1/jobs", None)):
                start = time.perf_counter()
                try:
                    answer = await http.get(path, params=params)
                    if answer.status_code != 200:
                        tally.error(name, op, f"HTTP {answer.status_code}: {answer.text}")
                except httpx.HTTPError as exc:
                    tally.error(name, op, f"{type(exc).__name__}: {exc}")
                tally.latencies[op].append((time.perf_counter() - start) * 1000)


async def _sample_rss(pid: int, start: float, deadline: float, tally: Tally) -> None:
    while time.monotonic() < deadline:
        tally.rss.append((round(time.monotonic() - start, 1), round(rss_mb(pid), 1)))
        await anyio.sleep(1.0)


def wait_indexed(base_url: str, headers: dict[str, str], timeout: float = 300) -> None:
    """Until the search index holds every committed revision."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        search = httpx.get(base_url + "/api/_ready", headers=headers, timeout=30).json().get("search", {})
        if search.get("pending") == 0:
            return
        time.sleep(0.2)
    raise AssertionError(f"the search index did not catch up within {timeout}s")


def missing_writes(base_url: str, headers: dict[str, str], acknowledged: dict[str, str]) -> list[str]:
    """Acknowledged writes a full-text search for their marker does not find."""
    missing = []
    with httpx.Client(base_url=base_url, headers=headers, timeout=60) as http:
        for word, kref in acknowledged.items():
            found = http.get("/api/v1/search", params={"q": word, "mode": "text", "limit": 5}).json()
            if kref not in {hit["revision_kref"] for hit in found.get("results", [])}:
                missing.append(f"{word} → {kref}")
    return missing


def bearer(data_dir: Path) -> dict[str, str]:
    """The admin API's token header, when the appliance has written its token file (loopback needs none)."""
    token_file = data_dir / "token"
    token = token_file.read_text().strip() if token_file.exists() else ""
    return {"Authorization": f"Bearer {token}"} if token else {}


def run_load(base_url: str, pid: int, data_dir: Path, *, seconds: float, http_clients: int, stdio_clients: int,
             admin_clients: int, headers: dict[str, str] | None = None, stdio_env: dict[str, str] | None = None
             ) -> dict[str, Any]:
    """Drive the appliance at ``base_url`` (process ``pid``) and return the report (a JSON-able dict)."""
    headers = headers if headers is not None else bearer(data_dir)
    port = int(base_url.rsplit(":", 1)[1])
    tally = Tally()
    run = uuid.uuid4().hex[:6]

    async def main() -> tuple[float, float]:
        start = time.monotonic()
        deadline = start + seconds
        async with anyio.create_task_group() as group:
            group.start_soon(_sample_rss, pid, start, deadline + 1, tally)
            for i in range(http_clients):
                group.start_soon(_mcp_client, lambda: http_session(base_url), f"http{i}-{run}", deadline, tally, i)
            for i in range(stdio_clients):
                group.start_soon(_mcp_client, lambda: stdio_session(data_dir, port, **(stdio_env or {})),
                                 f"stdio{i}-{run}", deadline, tally, 1000 + i)
            for i in range(admin_clients):
                group.start_soon(_admin_client, base_url, headers, f"admin{i}-{run}", deadline, tally)
        # calls start until the deadline; the last one ends a little after it
        return max(seconds, tally.last_call_end - start), time.monotonic() - start

    elapsed, wall = anyio.run(main)
    wait_indexed(base_url, headers)
    missing = missing_writes(base_url, headers, tally.acknowledged)
    calls = sum(len(v) for v in tally.latencies.values())
    rss = [mb for _, mb in tally.rss]
    half = len(rss) // 2
    return {
        "seconds": round(elapsed, 1), "wall_seconds": round(wall, 1),
        "clients": {"mcp_http": http_clients, "mcp_stdio": stdio_clients, "admin_api": admin_clients},
        "calls": calls, "throughput_per_s": round(calls / elapsed, 1),
        "latency_ms": {op: percentiles(samples) for op, samples in sorted(tally.latencies.items())},
        "errors": len(tally.errors), "error_samples": tally.errors[:10],
        "acknowledged_writes": len(tally.acknowledged), "missing_writes": len(missing),
        "missing_samples": missing[:10],
        "rss_mb": {"first": rss[0] if rss else None, "last": rss[-1] if rss else None,
                   "max": max(rss, default=None),
                   "first_half_mean": round(statistics.fmean(rss[:half]), 1) if half else None,
                   "second_half_mean": round(statistics.fmean(rss[half:]), 1) if half else None,
                   "series": _thin(tally.rss, 60)},
    }


def _thin(series: list[tuple[float, float]], points: int) -> list[tuple[float, float]]:
    step = max(1, len(series) // points)
    return series[::step]
