"""Memory is given back: a real appliance's RSS stays nearly flat while short memories are stored through MCP.

Before compiled queries were reused, Kùzu kept every statement the driver compiled (~30 per store): RSS grew
~0.66 MB per stored memory, ~260 MB over these 400 stores. Now the growth is the data itself (a few tens of MB
per 1,000 stores, measured by benchmarks/rss_bench.py); the bound leaves room for allocator noise."""

from __future__ import annotations

from pathlib import Path

import anyio

from tests.appliance_process import serve
from tests.load.driver import rss_mb
from tests.mcp_api.clients import call, http_session

WARMUP, STORES, CLIENTS = 100, 400, 4
BOUND_MB = 100


def store(base_url: str, first: int, count: int) -> None:
    numbers = iter(range(first, first + count))

    async def client() -> None:
        async with http_session(base_url) as session:
            for n in numbers:
                await call(session, "kumiho_memory_store", space_path="growth", title=f"Build note {n}",
                           user_text=f"Build {n} took {n % 97} seconds on the runner.", assistant_text="Noted.",
                           stack_revisions=False)

    async def main() -> None:
        async with anyio.create_task_group() as group:
            for _ in range(CLIENTS):
                group.start_soon(client)

    anyio.run(main)


def test_rss_grows_little_over_400_stores_through_mcp(tmp_path: Path) -> None:
    with serve(tmp_path / "data") as app:
        store(app.base_url, 0, WARMUP)  # first-use allocations: caches, the resident index, thread arenas
        before = rss_mb(app.process.pid)
        store(app.base_url, WARMUP, STORES)
        after = rss_mb(app.process.pid)
    growth = after - before
    assert growth < BOUND_MB, f"RSS grew {growth:.0f} MiB over {STORES} stores ({before:.0f} → {after:.0f} MiB)"
