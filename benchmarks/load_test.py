"""Load: MCP clients (streamable HTTP and the stdio shim) and admin API clients against a real appliance for a
bounded time, mixing engage, recall, store, reflect and ingest; prints one JSON object.

    python benchmarks/load_test.py [--seconds 60] [--http 12] [--stdio 4] [--admin 2] [--embedder minilm|hashing]

Reports throughput, p50/p95/p99 per operation, errors (the target is zero), whether every acknowledged write
is found again by a full-text search afterwards, and the server's RSS over time (it should stay flat).
``make test-load`` runs it for 60 s, ``make soak`` for ``SOAK_SECONDS`` (default 1800).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.appliance_process import serve
from tests.load.driver import run_load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--http", type=int, default=12, help="MCP clients over streamable HTTP")
    parser.add_argument("--stdio", type=int, default=4, help="MCP clients through the stdio shim")
    parser.add_argument("--admin", type=int, default=2, help="admin API clients (search, readiness, jobs)")
    parser.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch, \
            serve(Path(scratch) / "data", KUMIHO_CE_SEARCH__EMBEDDER=args.embedder) as app:
        report = run_load(app.base_url, app.process.pid, app.data_dir, seconds=args.seconds,
                          http_clients=args.http, stdio_clients=args.stdio, admin_clients=args.admin)
        exit_code = app.stop()
    report = {"benchmark": "load", "embedder": args.embedder, **report, "appliance_exit_code": exit_code,
              "cpu_count": os.cpu_count()}
    print(json.dumps(report, indent=2))
    if report["errors"] or report["missing_writes"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
