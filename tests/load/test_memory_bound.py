"""Memory stays bounded under a steady write load: a real appliance, official MCP clients storing through
streamable HTTP without pause (stacking on, as agents store), the server's RSS sampled from /proc.

The bound. A leak per stored memory shows as a slope of RSS over the stores; allocator steps (a new heap, a
grown arena) show as jumps that a slope fitted over many samples mostly ignores. So the test fits RSS against
the number of stores acknowledged over the second half of the run (the first half warms caches, the resident
index and thread arenas up) and bounds the growth that slope predicts for that half:

- the leak this guards against, Kùzu keeping every compiled statement, cost ~0.66 MB per stored memory (and a
  regression of that kind is what 7.5 GB after a 10,000-memory fill looked like): ~66 MB over 100 stores;
- what a store legitimately adds at this size is its data: the resident index row, the graph's pages and
  LanceDB's small fragments, ~0.03 MB per memory measured by ``benchmarks/rss_bench.py`` (3 MB per 100);
- ``BOUND_MB`` sits between the two, far enough above the data and the allocator's noise to hold on a busy
  machine, far enough below the leak to fail with it (half of it: 0.33 MB a memory would fail too).
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio

from benchmarks.rss_bench import slope_per_1000
from tests.appliance_process import serve
from tests.load.driver import rss_mb
from tests.mcp_api.clients import call, http_session

CLIENTS = 4
STORES = 200  # the second half, 100 stores, is measured
SAMPLE_EVERY = 0.2  # seconds
BOUND_MB = 30  # over 100 stores: see the module's docstring
MB_PER_STORE_OF_THE_OLD_LEAK = 0.66


def store_steadily(base_url: str, pid: int) -> list[tuple[int, float]]:
    """``STORES`` distinct short memories by ``CLIENTS`` clients at once; (stores acknowledged, RSS MiB) samples."""
    numbers = iter(range(STORES))
    acknowledged = 0
    samples: list[tuple[int, float]] = []

    async def client() -> None:
        nonlocal acknowledged
        async with http_session(base_url) as session:
            for n in numbers:
                await call(session, "kumiho_memory_store", space_path="steady", title=f"Deploy note {n}",
                           user_text=f"Deploy {n} of service {n % 13} took {n % 97} seconds on runner {n % 5}.",
                           assistant_text="Noted.")
                acknowledged += 1

    async def sample(done: anyio.Event) -> None:
        while not done.is_set():
            samples.append((acknowledged, rss_mb(pid)))
            await anyio.sleep(SAMPLE_EVERY)

    async def main() -> None:
        done = anyio.Event()
        async with anyio.create_task_group() as sampler:
            sampler.start_soon(sample, done)
            async with anyio.create_task_group() as clients:
                for _ in range(CLIENTS):
                    clients.start_soon(client)
            done.set()

    anyio.run(main)
    return samples


def test_rss_stays_bounded_over_the_second_half_of_a_steady_write_load(tmp_path: Path) -> None:
    with serve(tmp_path / "data") as app:
        started = time.monotonic()
        samples = store_steadily(app.base_url, app.process.pid)
        seconds = time.monotonic() - started
    second_half = [(n, mb) for n, mb in samples if n >= STORES // 2]
    assert len({n for n, _ in second_half}) >= 10, f"too few RSS samples over the second half: {second_half}"
    per_1000 = slope_per_1000(second_half)
    assert per_1000 is not None
    growth = per_1000 * (STORES - STORES // 2) / 1000
    assert growth < BOUND_MB, (
        f"RSS grew by {growth:.1f} MiB (fitted) over the last {STORES - STORES // 2} of {STORES} stores "
        f"({second_half[0][1]:.0f} → {second_half[-1][1]:.0f} MiB, {seconds:.0f} s): a leak of "
        f"{MB_PER_STORE_OF_THE_OLD_LEAK} MB a memory would add {MB_PER_STORE_OF_THE_OLD_LEAK * 100:.0f} MiB, the bound "
        f"is {BOUND_MB} MiB")
