"""A pass killed between two of its batches (the process dies: no clean close of Kùzu or LanceDB) leaves whole
batches applied and the rest untouched; the next pass finishes the work."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.hygiene.entries import Clock, appliance, hygiene_over, state_of, store_entry

ROOT = Path(__file__).resolve().parents[2]

# opens the appliance, runs a pass in batches of 2 with its clock 8 days on, and dies after the second commit
CRASHING_PASS = textwrap.dedent("""
    import os, sys
    from datetime import timedelta
    from pathlib import Path
    from tests.hygiene.entries import Clock, appliance, hygiene_over

    with appliance(Path(sys.argv[1])) as services:
        clock = Clock()
        clock.advance(days=8)
        hygiene = hygiene_over(services, clock, archive_after_days=7)
        hygiene.batch_size = 2
        commit = services.graph.atomic
        batches = []

        def atomic(job):
            done = commit(job)
            batches.append(done)
            if len(batches) == 2:
                os._exit(9)  # a crash: nothing is closed or flushed
            return done

        services.graph.atomic = atomic
        hygiene.run()
    sys.exit(0)  # not reached
""")


def test_a_pass_that_crashed_mid_way_is_consistent_and_the_next_pass_finishes(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with appliance(data) as services:
        krefs = [store_entry(services.graph, f"note {n}", "daily") for n in range(7)]
    crashed = subprocess.run([sys.executable, "-c", CRASHING_PASS, str(data)], cwd=ROOT, capture_output=True,
                             text=True, timeout=240, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert crashed.returncode == 9, crashed.stderr[-2000:]
    with appliance(data) as services:
        states = [state_of(services.graph, k) for k in krefs]
        assert sorted(states) == ["archived"] * 4 + ["live"] * 3, "two whole batches of two, nothing half-done"
        for kref, state in zip(krefs, states, strict=True):
            item = services.graph.get_item(kref)
            assert ("hygiene_archived_at" in item.metadata) == item.deprecated == (state == "archived")
        clock = Clock()
        clock.advance(days=8)
        result = hygiene_over(services, clock, archive_after_days=7).run()
        assert result["archived"] == 3 and result["complete"] is True
        assert {state_of(services.graph, k) for k in krefs} == {"archived"}
