"""What a test pays to start ``kumiho-ce serve`` (until /api/_live answers) and to stop it, and to run one
``kumiho-ce`` command, as a fresh process and forked from the test helper (tests/appliance_fork.py); the two
alternate, so that a busy machine slows both alike. Prints one JSON object (seconds, median and max).

    python benchmarks/appliance_start_bench.py --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests import appliance_fork
from tests.appliance_process import cli_env, kumiho_ce, serve

COMMANDS = (("config", "show"), ("doctor", "--json"), ("models", "list"))


def one_round(root: Path, forked: bool) -> dict[str, float]:
    os.environ["KUMIHO_TEST_FORK"] = "1" if forked else "0"
    data = Path(tempfile.mkdtemp(dir=root)) / "data"
    started = time.monotonic()
    with serve(data) as running:
        live = time.monotonic() - started
        started = time.monotonic()
        code = running.stop()
        stop = time.monotonic() - started
    assert code == 0, code
    started = time.monotonic()
    for command in COMMANDS:
        done = kumiho_ce(*command, env=cli_env(data))
        assert done.returncode == 0, done.stderr
    return {"live": live, "stop": stop, "command": (time.monotonic() - started) / len(COMMANDS)}


def summary(samples: list[dict[str, float]]) -> dict[str, Any]:
    return {key: {"median": round(statistics.median(s[key] for s in samples), 2),
                  "max": round(max(s[key] for s in samples), 2)} for key in samples[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="start-bench-") as scratch:
        root = Path(scratch)
        started = time.monotonic()
        appliance_fork.helper().ready(300)  # the helper's own start, paid once per test session
        helper_start = time.monotonic() - started
        fresh, forked = [], []
        for _ in range(args.rounds):
            fresh.append(one_round(root, forked=False))
            forked.append(one_round(root, forked=True))
    print(json.dumps({"rounds": args.rounds, "load_average_1m": round(os.getloadavg()[0], 1),
                      "helper_start_s": round(helper_start, 2),
                      "fresh_process_s": summary(fresh), "forked_s": summary(forked)}))


if __name__ == "__main__":
    main()
