"""The allocator settings of the serving process (appliance/server/allocator.py), on this machine's glibc."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from appliance.server.allocator import MallocTrimmer, limit_malloc_arenas

GLIBC = bool(os.confstr("CS_GNU_LIBC_VERSION")) if hasattr(os, "confstr") else False
pytestmark = pytest.mark.skipif(not GLIBC, reason="the allocator settings are glibc's")


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


def test_limiting_twice_is_harmless() -> None:
    if "MALLOC_ARENA_MAX" in os.environ:
        pytest.skip("the environment sets the limit")
    assert limit_malloc_arenas() and limit_malloc_arenas()
