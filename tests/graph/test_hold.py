"""``KuzuEngine.hold``: backups copy the graph's files while no write commits; reads go on meanwhile."""

from __future__ import annotations

import threading
from pathlib import Path

from appliance.graph import GraphStore
from appliance.graph.engine import Tx


def test_a_hold_keeps_writes_waiting_while_reads_go_on_and_may_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "g.kuzu"
    with GraphStore.open(path, buffer_pool_mb=64) as store:
        store.create_project("Before")
        entered, release = threading.Event(), threading.Event()
        seen: dict[str, object] = {}

        def job(tx: Tx) -> None:
            tx.run("CHECKPOINT")  # between transactions: allowed
            wal = path.with_name(path.name + ".wal")
            seen["wal_bytes"] = wal.stat().st_size if wal.exists() else 0
            entered.set()
            release.wait(30)
            seen["projects"] = tx.scalar("MATCH (p:Project) RETURN count(p)")

        holder = threading.Thread(target=store.hold_writes, args=(job,))
        holder.start()
        assert entered.wait(30)
        written = threading.Event()
        writer = threading.Thread(target=lambda: (store.create_project("During"), written.set()))
        writer.start()
        try:
            assert not written.wait(0.5)  # the write waits for the hold
            assert store.get_project("Before").name == "Before"  # a read does not
        finally:
            release.set()
            holder.join(30)
            writer.join(30)
        assert written.is_set()
        assert seen["wal_bytes"] == 0  # checkpointed: the database file alone held every committed write
        assert seen["projects"] == 1  # the write submitted during the hold committed after it
        assert store.get_project("During").name == "During"
