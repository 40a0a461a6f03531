"""Liveness under slow clients: prints one JSON object.

    python benchmarks/slow_clients.py [--connections 200] [--seconds 30] [--interval 0.1] [--tick 1]

Starts `kumiho-ce serve` (default settings, loopback, a fresh data directory), probes ``GET /api/_live`` (a
new connection each time) for a few seconds as a baseline, then opens ``--connections`` slow connections
(slowloris-style, tests/slow_clients.py: a third trickle their headers, a third trickle a body, a third send
nothing; each one the server closes is opened again at once) and keeps probing for ``--seconds``.

Reports the probes' latency (ms: p50, p95, max) before and under the slow clients, how many probes did not get
200, how many slow connections were open at each probe (min, max), and what the server did with the slow ones:
how many it closed, after how long, and with which answer (408 = its header or body timeout).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from appliance.config import HttpSettings
from tests.appliance_process import serve
from tests.load.driver import percentiles
from tests.slow_clients import SlowClients, probe_live


def probe_for(address: tuple[str, int], seconds: float, interval: float,
              slow: SlowClients | None = None) -> dict[str, Any]:
    latencies: list[float] = []
    statuses: list[int] = []
    open_counts: list[int] = []
    errors = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            status, ms = probe_live(address)
            statuses.append(status)
            if status == 200:
                latencies.append(ms)
        except OSError:
            errors += 1
        if slow is not None:
            open_counts.append(slow.open_now)
        time.sleep(interval)
    result: dict[str, Any] = {"latency_ms": percentiles(latencies), "probes": len(statuses) + errors,
                              "not_200": sum(1 for status in statuses if status != 200), "errors": errors,
                              "within_100ms": sum(1 for ms in latencies if ms < 100)}
    if open_counts:
        result["slow_open"] = {"min": min(open_counts), "max": max(open_counts)}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=200, help="slow connections held at once")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long to probe under the slow clients")
    parser.add_argument("--baseline", type=float, default=5.0, help="seconds of probes before they connect")
    parser.add_argument("--interval", type=float, default=0.1, help="pause between two probes (s)")
    parser.add_argument("--tick", type=float, default=1.0, help="a slow client sends one piece this often (s)")
    args = parser.parse_args()
    defaults = HttpSettings()
    with tempfile.TemporaryDirectory() as tmp, serve(Path(tmp) / "data") as app:
        host, port = app.base_url.removeprefix("http://").rsplit(":", 1)
        address = (host, int(port))
        baseline = probe_for(address, args.baseline, args.interval)
        slow = SlowClients(address, args.connections, tick=args.tick, reopen=True)
        opening = time.monotonic()
        slow.start()
        slow.ready.wait(60)
        opened_in = time.monotonic() - opening
        under = probe_for(address, args.seconds, args.interval, slow)
        slow.stop()
        tally = slow.tally
        lifetimes = tally.lifetimes
        result = {
            "benchmark": "slow_clients",
            "settings": {"max_connections": defaults.max_connections,
                         "header_timeout_seconds": defaults.header_timeout_seconds,
                         "body_timeout_seconds": defaults.body_timeout_seconds},
            "connections": args.connections, "seconds": args.seconds,
            "opened_all_in_s": round(opened_in, 2),
            "baseline": baseline,
            "under_slow_clients": under,
            "slow": {"opened": tally.opened, "closed_by_server": tally.closed_by_server,
                     "answers": dict(tally.answers),
                     "held_s": {"min": round(min(lifetimes), 1), "median": round(statistics.median(lifetimes), 1),
                                "max": round(max(lifetimes), 1)} if lifetimes else None},
            "still_answers": probe_live(address)[0] == 200,
        }
        app.stop()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
