"""engage and store latency of two commits, side by side on this machine in one run: prints one JSON object.

    python benchmarks/compare_commits.py [--old a20ba1b] [--new HEAD] [--rounds 3] [--memories 2000]
                                         [--queries 60] [--stores 60] [--embedder minilm|hashing]

Checks each revision out as a temporary ``git worktree`` (detached), prepares one data directory per revision
with that revision's own ``benchmarks/mcp_bench.py`` code, then runs that revision's ``mcp_bench.py`` against
a fresh copy of its data directory, alternating old and new for ``--rounds`` rounds (old, new, old, new, …)
so that both share the machine's noise. Every run imports the code of its own worktree (``PYTHONPATH`` and
the working directory are the worktree; the virtual environment is this one). The report gives each run's
HTTP figures (engage and store p50/p95, ms), the median of each figure over the rounds, and new/old ratios
of those medians (below 1: the new commit is faster), and the median of each round's new/old ratio (the two
runs of a round share the machine's noise best). The worktrees are removed at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "bench" / "locomo-dev.json"
BASE = "a20ba1b"  # main before the operation layer
FIGURES = (("engage_ms", "p50"), ("engage_ms", "p95"), ("store_ms", "p50"), ("store_ms", "p95"),
           ("engage_server_ms", "p50"), ("engage_server_ms", "p95"))
RUN_TIMEOUT = 1800  # seconds for one mcp_bench run (its own readiness wait is 900 s)


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()


def environment(tree: Path) -> dict[str, str]:
    """This interpreter's environment with the worktree first on the import path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUMIHO_CE_")}
    env["PYTHONPATH"] = str(tree)
    return env


def check_imports_from(tree: Path) -> None:
    found = subprocess.run([sys.executable, "-c", "import appliance; print(appliance.__file__)"], cwd=tree,
                           env=environment(tree), check=True, capture_output=True, text=True).stdout.strip()
    if not Path(found).resolve().is_relative_to(tree.resolve()):
        raise SystemExit(f"{tree} imports appliance from {found}, not from its own code")


def prepare(tree: Path, data_dir: Path, memories: int, embedder: str, data: Path) -> float:
    """A data directory of ``memories`` memories, written and indexed by the revision's own code."""
    script = ("import sys; from pathlib import Path; sys.path.insert(0, 'benchmarks'); import mcp_bench as b; "
              f"turns, _ = b.corpus(Path({str(data)!r})); "
              f"b.prepare(Path({str(data_dir)!r}), {memories}, {embedder!r}, turns)")
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", script], cwd=tree, env=environment(tree), check=True,
                   timeout=RUN_TIMEOUT)
    return round(time.perf_counter() - start, 1)


def bench(tree: Path, pristine: Path, scratch: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One mcp_bench run of the revision in ``tree`` on a fresh copy of its prepared data directory."""
    copy = scratch / "data"
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(pristine, copy)
    try:
        answer = subprocess.run(
            [sys.executable, "benchmarks/mcp_bench.py", "--keep", str(copy), "--memories", str(args.memories),
             "--queries", str(args.queries), "--stores", str(args.stores), "--stdio", "0",
             "--embedder", args.embedder, "--data", str(args.data)],
            cwd=tree, env=environment(tree), check=True, capture_output=True, text=True, timeout=RUN_TIMEOUT)
    except subprocess.CalledProcessError as exc:
        raise SystemExit(f"mcp_bench failed in {tree}: {exc.stderr[-4000:]}") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return json.loads(answer.stdout)  # type: ignore[no-any-return]


def figures(report: dict[str, Any]) -> dict[str, float]:
    """Client-side round trips, and engage's own server-side time (tells the request path from recall)."""
    http = report["http"]
    return {f"{name.removesuffix('_ms')}_{q}_ms": http[name][q] for name, q in FIGURES}


def summary(runs: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(statistics.median(run[key] for run in runs), 2) for key in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default=BASE)
    parser.add_argument("--new", default="HEAD")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--stores", type=int, default=60)
    parser.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm")
    parser.add_argument("--data", type=Path, default=DATA)
    args = parser.parse_args()
    if args.rounds < 1:
        raise SystemExit("--rounds: give 1 or more")
    args.data = args.data.resolve()  # the runs work in the worktrees
    if not args.data.is_file():
        raise SystemExit(f"--data: {args.data} does not exist (the LoCoMo dev file)")
    commits = {"old": git("rev-parse", args.old), "new": git("rev-parse", args.new)}

    with tempfile.TemporaryDirectory(prefix="compare-commits-") as scratch_dir:
        scratch = Path(scratch_dir)
        trees = {side: scratch / side for side in commits}
        try:
            for side, commit in commits.items():
                git("worktree", "add", "--detach", str(trees[side]), commit)
                check_imports_from(trees[side])
            prepare_seconds = {side: prepare(trees[side], scratch / f"pristine-{side}", args.memories,
                                             args.embedder, args.data) for side in commits}
            runs: dict[str, list[dict[str, float]]] = {side: [] for side in commits}
            started = time.perf_counter()
            for _ in range(args.rounds):
                for side in commits:  # old, then new, in every round
                    report = bench(trees[side], scratch / f"pristine-{side}", scratch / "run", args)
                    runs[side].append(figures(report))
            calls_seconds = round(time.perf_counter() - started, 1)
        finally:
            for tree in trees.values():
                if tree.exists():
                    git("worktree", "remove", "--force", str(tree))

    medians = {side: summary(runs[side]) for side in commits}
    ratio = {key: round(medians["new"][key] / medians["old"][key], 3) if medians["old"][key] else None
             for key in medians["old"]}
    # each round's new/old: the two runs of a round are neighbours in time, so they share most of the noise
    paired = {key: round(statistics.median(new[key] / old[key] for old, new in zip(runs["old"], runs["new"],
                                                                                    strict=True)), 3)
              for key in medians["old"] if all(old[key] for old in runs["old"])}
    print(json.dumps({
        "benchmark": "compare_commits", "commits": commits, "rounds": args.rounds, "order": "old, new per round",
        "memories": args.memories, "queries": args.queries, "stores": args.stores, "embedder": args.embedder,
        "transport": "http", "runs": runs, "median": medians, "ratio_new_over_old": ratio,
        "paired_ratio_median": paired,
        "prepare_seconds": prepare_seconds, "bench_seconds": calls_seconds, "cpu_count": os.cpu_count(),
    }, indent=2))


if __name__ == "__main__":
    main()
