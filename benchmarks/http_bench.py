"""What the one-port front listener costs: prints one JSON object.

    python benchmarks/http_bench.py [--requests 1000]

Starts the appliance twice on the same app: once as `kumiho-ce serve` (through the front listener, which
peeks at each new connection) and once with plain uvicorn listening itself. Times `GET /api/_live` with a
new connection per request (the front's work is per connection) and over one kept-alive connection.
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
PLAIN_UVICORN = """
import sys, uvicorn
from appliance.app import build_app, open_services
from appliance.config import load_settings
with open_services(load_settings(data_dir=sys.argv[1])) as services:
    uvicorn.run(build_app(services), host="127.0.0.1", port=int(sys.argv[2]), log_level="warning",
                http="auto", lifespan="on")
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_live(url: str) -> None:
    deadline = time.monotonic() + 120  # a first start loads the models: more than 30 s on a busy machine
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.05)
    raise SystemExit(f"{url} did not come up")


def measure(url: str, requests: int) -> dict[str, float]:
    fresh = []
    with httpx.Client(limits=httpx.Limits(max_keepalive_connections=0)) as client:
        for _ in range(requests):
            start = time.perf_counter()
            client.get(url).raise_for_status()
            fresh.append(time.perf_counter() - start)
    kept = []
    with httpx.Client() as client:
        for _ in range(requests):
            start = time.perf_counter()
            client.get(url).raise_for_status()
            kept.append(time.perf_counter() - start)
    return {"new_connection_p50_ms": round(statistics.median(fresh) * 1000, 3),
            "new_connection_mean_ms": round(statistics.fmean(fresh) * 1000, 3),
            "keep_alive_p50_ms": round(statistics.median(kept) * 1000, 3),
            "keep_alive_mean_ms": round(statistics.fmean(kept) * 1000, 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    args = parser.parse_args()
    report: dict[str, object] = {"benchmark": "http_front", "requests": args.requests}
    with tempfile.TemporaryDirectory() as scratch:
        for name, command in (
            ("front", lambda port: [sys.executable, "-m", "appliance", "--data-dir", f"{scratch}/a", "serve",
                                    "--port", str(port)]),
            ("plain_uvicorn", lambda port: [sys.executable, "-c", PLAIN_UVICORN, f"{scratch}/b", str(port)]),
        ):
            port = free_port()
            with subprocess.Popen(command(port), cwd=ROOT, stderr=subprocess.DEVNULL) as process:
                try:
                    url = f"http://127.0.0.1:{port}/api/_live"
                    wait_live(url)
                    measure(url, 50)  # warm up
                    report[name] = measure(url, args.requests)
                finally:
                    process.terminate()
    front, plain = report["front"], report["plain_uvicorn"]
    report["front_adds_ms"] = {k: round(front[k] - plain[k], 3) for k in front}  # type: ignore[index]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
