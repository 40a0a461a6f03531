"""The allocator settings of the serving process (appliance/server/allocator.py), on this machine's glibc."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from appliance.server.allocator import ARENAS, MallocTrimmer
from tests.appliance_process import cli_env, free_port, wait_until_live

GLIBC = bool(os.confstr("CS_GNU_LIBC_VERSION")) if hasattr(os, "confstr") else False
pytestmark = pytest.mark.skipif(not GLIBC, reason="the allocator settings are glibc's")
HEAP_BYTES = 64 * 1024 * 1024  # glibc's HEAP_MAX_SIZE on 64-bit: every heap of a thread arena is aligned to it


def test_the_arena_limit_is_taken_unless_the_environment_sets_one() -> None:
    code = "from appliance.server.allocator import limit_malloc_arenas; print(limit_malloc_arenas())"
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    taken = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert taken.stdout.strip() == "True"
    left = subprocess.run([sys.executable, "-c", code], env={**env, "MALLOC_ARENA_MAX": "4"}, capture_output=True,
                          text=True, check=True)
    assert left.stdout.strip() == "False"


def test_the_trimmer_trims_while_it_runs_and_stops_with_its_block() -> None:
    with MallocTrimmer(every=0.01) as trimmer:
        deadline = time.monotonic() + 10
        while trimmer.trims < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
    assert trimmer.trims >= 3
    stopped_at = trimmer.trims
    time.sleep(0.05)
    assert trimmer.trims == stopped_at


def arenas(pid: int) -> int:
    """How many malloc arenas process ``pid`` has: the main one, and one per heap (a 64 MiB-aligned anonymous
    mapping) whose header's ``ar_ptr`` points into that heap itself, where glibc puts the arena that heap was
    made for (an arena's later heaps point back to the first)."""
    starts = []
    with open(f"/proc/{pid}/maps") as maps:
        for line in maps:
            fields = line.split()
            low = int(fields[0].split("-")[0], 16)
            if len(fields) == 5 and fields[1] == "rw-p" and low % HEAP_BYTES == 0:
                starts.append(low)
    count = 1
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as memory:
        for low in starts:
            memory.seek(low)
            (ar_ptr,) = struct.unpack("<Q", memory.read(8))
            count += low < ar_ptr < low + 4096
    return count


def serving_arenas(tmp_path: Path, **env: str) -> int:
    """The arenas of ``kumiho-ce serve`` started through its console script, as users and the stdio shim start it,
    once it has answered a few requests at once."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    data_dir, port = tmp_path / "data", free_port()
    script = Path(sys.executable).with_name("kumiho-ce")
    log = tmp_path / "serve.log"
    environment = cli_env(data_dir, **env)
    if "MALLOC_ARENA_MAX" not in env:  # the appliance's own cap, whatever the test's environment says
        environment.pop("MALLOC_ARENA_MAX", None)
    with open(log, "w") as output, subprocess.Popen(
            [str(script), "serve", "--host", "127.0.0.1", "--port", str(port)], env=environment,
            stdout=output, stderr=output, text=True) as process:
        try:
            url = f"http://127.0.0.1:{port}"
            wait_until_live(url, process, log=log)
            with ThreadPoolExecutor(8) as pool:
                list(pool.map(lambda _: httpx.get(url + "/api/_ready", timeout=30), range(32)))
            return arenas(process.pid)
        finally:
            process.kill()


@pytest.mark.skipif(struct.calcsize("P") != 8 or sys.platform != "linux", reason="64-bit Linux heap layout")
def test_the_served_appliance_keeps_to_the_arena_limit(tmp_path: Path) -> None:
    assert serving_arenas(tmp_path / "capped") <= ARENAS
    # the count can fail: with glibc's limit raised the same process makes more arenas than the cap
    assert serving_arenas(tmp_path / "uncapped", MALLOC_ARENA_MAX="8") > ARENAS
