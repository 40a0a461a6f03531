"""A child process for the crash tests: bulk-writes batches and reports each commit on stdout.

    python -m tests.graph.crash_writer <graph path> <batch size>
"""

from __future__ import annotations

import sys
from pathlib import Path

from appliance.graph import GraphStore, NewRevision


def main(path: str, batch_size: int) -> None:
    with GraphStore.open(Path(path), buffer_pool_mb=64, readers=1) as store:
        store.ensure_space("/Crash/batches")
        batch = store.stats()["revisions"] // batch_size  # continue after earlier runs
        while True:
            rows = [NewRevision(f"kref://Crash/batches/b{batch}-{j}.note", {"batch": str(batch)})
                    for j in range(batch_size)]
            result = store.create_revisions(rows)
            assert not result.failures, result.failures
            print(batch, flush=True)  # the batch is committed when this line appears
            batch += 1


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
