"""Working memory for Kumiho's stock sidecar, the options measured side by side: prints one JSON object.

    python benchmarks/workmem_bench.py [--ops 500]

Three places the sidecar's buffer can live, each timed for one append and one read (the last 10 messages):

* ``redis_subset``: the appliance's Redis-protocol listener (``[kumiho] redis_port``), on its working memory;
* ``proxy``: the memory-proxy route ``POST /api/memory/redis`` of the same appliance, on the same working memory;
* ``redis_server``: Debian's ``redis-server`` (when installed), append-only file fsynced every second, for
  comparison: the sidecar's buffer in a server of its own, which the appliance cannot see.

Two layers each: ``client`` (one command or one request from this process: redis-py, httpx with keep-alive) and
``sidecar`` (the stock sidecar's own ``RedisMemoryBuffer.add_message`` / ``get_messages``, run in the Kumiho SDK's
Python, which is what an agent waits for). Per layer: p50/p95 in ms. Also: whether the appliance's own
working memory sees what was written (its idle consolidation archives only what it sees), and the resident
memory of the appliance with the listener off and on, and of redis-server.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.appliance_process import free_port, serve

PROJECT = "CognitiveMemory"
MESSAGE = json.dumps({"role": "user", "content": "I take my espresso without sugar, and tea at four.",
                      "timestamp": "2026-01-01T00:00:00+00:00", "metadata": {"channel": "bench"}})

SIDECAR_TIMING = r"""
import asyncio, json, sys, time
from kumiho_memory.redis_memory import RedisMemoryBuffer

async def main(ops, session):
    buffer = RedisMemoryBuffer()
    add, read = [], []
    try:
        for i in range(ops):
            t = time.perf_counter()
            await buffer.add_message(project="CognitiveMemory", session_id=session, role="user",
                                     content=f"message {i}: I take my espresso without sugar.")
            add.append(time.perf_counter() - t)
            t = time.perf_counter()
            await buffer.get_messages(project="CognitiveMemory", session_id=session, limit=10)
            read.append(time.perf_counter() - t)
    finally:
        await buffer.close()
    print(json.dumps({"add": add, "read": read}))

asyncio.run(main(int(sys.argv[1]), sys.argv[2]))
"""


def percentiles(seconds: list[float]) -> dict[str, float]:
    ms = sorted(s * 1000 for s in seconds)
    return {"p50_ms": round(statistics.median(ms), 3), "p95_ms": round(ms[int(len(ms) * 0.95) - 1], 3),
            "n": len(ms)}


def timed(ops: int, call: Callable[[int], Any]) -> list[float]:
    took = []
    for i in range(ops):
        start = time.perf_counter()
        call(i)
        took.append(time.perf_counter() - start)
    return took


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def sdk_python() -> str | None:
    try:
        from tests.kumiho_sdk_env import sdk_python as find  # type: ignore[import-not-found,unused-ignore]

        return str(find())
    except Exception:  # the bench reports what it could not measure instead of failing
        path = os.environ.get("KUMIHO_SDK_PYTHON") or "/work/kvenv/bin/python"
        return path if Path(path).exists() else None


def sidecar_layer(ops: int, env: dict[str, str], session: str, home: Path) -> dict[str, Any]:
    python = sdk_python()
    if python is None:
        return {"skipped": "no Kumiho SDK environment (make kumiho-sdk)"}
    home.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([python, "-c", SIDECAR_TIMING, str(ops), session], capture_output=True, text=True,
                          timeout=600, env={"PATH": os.environ.get("PATH", ""), "HOME": str(home), **env})
    if done.returncode:
        return {"error": done.stderr[-500:]}
    timings = json.loads(done.stdout)
    return {"append": percentiles(timings["add"]), "read_last_10": percentiles(timings["read"])}


def redis_client_layer(ops: int, port: int, session: str) -> dict[str, Any]:
    client = redis.Redis(host="127.0.0.1", port=port, decode_responses=True)
    key = f"kumiho:memory:{PROJECT}:sessions:{session}:messages"
    try:
        client.ping()
        append = timed(ops, lambda i: client.rpush(key, MESSAGE))
        read = timed(ops, lambda i: client.lrange(key, -10, -1))
    finally:
        client.close()
    return {"append": percentiles(append), "read_last_10": percentiles(read)}


def proxy_client_layer(ops: int, url: str, session: str) -> dict[str, Any]:
    with httpx.Client(timeout=30) as http:
        def post(body: dict[str, Any]) -> None:
            http.post(url, json=body).raise_for_status()

        base = {"project": PROJECT, "session_id": session}
        append = timed(ops, lambda i: post({"action": "add_message", **base, "role": "user",
                                            "content": f"message {i}: espresso without sugar", "metadata": {}}))
        read = timed(ops, lambda i: post({"action": "get_messages", **base, "limit": 10}))
    return {"append": percentiles(append), "read_last_10": percentiles(read)}


def seen_by_appliance(proxy_url: str, session: str) -> int:
    """How many of the session's messages the appliance's working memory holds."""
    answer = httpx.post(proxy_url, json={"action": "get_messages", "project": PROJECT, "session_id": session,
                                         "limit": 1}, timeout=30)
    return int(answer.json()["message_count"])


@contextmanager
def redis_server(workdir: Path) -> Iterator[tuple[subprocess.Popen[bytes], int] | None]:
    binary = shutil.which("redis-server")
    if binary is None:
        yield None
        return
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    process = subprocess.Popen([binary, "--port", str(port), "--bind", "127.0.0.1", "--dir", str(workdir),
                                "--appendonly", "yes", "--appendfsync", "everysec", "--save", ""],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.02)
        yield process, port
    finally:
        process.terminate()
        process.wait(timeout=10)


def appliance_rss(data_dir: Path, **env: str) -> int:
    with serve(data_dir, **env) as running:
        time.sleep(1.0)  # the background threads settle
        return rss_kib(running.process.pid)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ops", type=int, default=500, help="appends and reads per door and layer")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="workmem-bench-"))
    result: dict[str, Any] = {"ops": args.ops, "python": sys.version.split()[0], "redis_py": redis.__version__}
    try:
        rss_off = appliance_rss(root / "rss-off")
        rss_on = appliance_rss(root / "rss-on", KUMIHO_CE_KUMIHO__REDIS_PORT=str(free_port()))
        port = free_port()
        with serve(root / "data", KUMIHO_CE_KUMIHO__REDIS_PORT=str(port)) as running:
            proxy_url = running.base_url + "/api/memory/redis"
            result["redis_subset"] = run_door(
                args.ops, root, "subset", redis_env={"KUMIHO_UPSTASH_REDIS_URL": f"redis://127.0.0.1:{port}"},
                client=lambda session: redis_client_layer(args.ops, port, session), proxy_url=proxy_url)
            result["proxy"] = run_door(
                args.ops, root, "proxy",
                redis_env={"KUMIHO_MEMORY_PROXY_URL": proxy_url, "KUMIHO_FIREBASE_ID_TOKEN": "any"},
                client=lambda session: proxy_client_layer(args.ops, proxy_url, session), proxy_url=proxy_url)
            with redis_server(root / "redis") as server:
                if server is None:
                    result["redis_server"] = {"skipped": "redis-server is not installed (apt-get install -y "
                                                         "redis-server)"}
                else:
                    process, server_port = server
                    result["redis_server"] = run_door(
                        args.ops, root, "server",
                        redis_env={"KUMIHO_UPSTASH_REDIS_URL": f"redis://127.0.0.1:{server_port}"},
                        client=lambda session: redis_client_layer(args.ops, server_port, session),
                        proxy_url=proxy_url)
                    result["redis_server"]["rss_kib"] = rss_kib(process.pid)
            result["appliance_rss_kib"] = {"listener_off_at_start": rss_off, "listener_on_at_start": rss_on,
                                           "after_the_bench": rss_kib(running.process.pid)}
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(result, indent=2))


def run_door(ops: int, root: Path, name: str, *, redis_env: dict[str, str],
             client: Callable[[str], dict[str, Any]], proxy_url: str) -> dict[str, Any]:
    client_session, sidecar_session = f"bench-{name}-client", f"bench-{name}-sidecar"
    door: dict[str, Any] = {"client": client(client_session),
                            "sidecar": sidecar_layer(ops, redis_env, sidecar_session, root / f"home-{name}")}
    door["appliance_sees_messages"] = seen_by_appliance(proxy_url, sidecar_session) > 0
    return door


if __name__ == "__main__":
    main()
