"""Deletions leave the search index: the sync reads the removals the audit trail records (revisions, items,
spaces, projects) and drops the rows of revisions that are gone from the graph, and only those."""

from __future__ import annotations

from appliance.graph import GraphStore
from appliance.search.worker import IndexWorker
from tests.search.conftest import Stack


def _remove_item_without_events(graph: GraphStore, item_kref: str) -> None:
    """What a deletion of an item does to the graph, recorded as one ``item.deleted`` entry (as deleting an
    item, a space or a project records it), without an entry per revision."""
    item = item_kref[len("kref://"):]

    def job(tx: object) -> None:
        tx.run("MATCH (r:Revision) WHERE r.item = $i DETACH DELETE r", {"i": item})  # type: ignore[attr-defined]
        tx.run("MATCH (i:Item {id: $i}) DETACH DELETE i", {"i": item})  # type: ignore[attr-defined]
        graph._event(tx, "item.deleted", item_kref)  # type: ignore[arg-type]

    graph._engine.write(job)


def test_a_deleted_revision_leaves_the_index_in_the_next_round(stack: Stack) -> None:
    worker = IndexWorker(stack.sync, interval=60)  # only commits wake it within the test
    worker.start()
    try:
        kept = stack.memory("/P/a", "kept", "Harbour cranes", "cranes unload ships at the harbour")
        gone = stack.memory("/P/a", "gone", "Glacier hike", "a glacier hike above the valley")
        assert worker.wait_idle(30) and stack.index.revision_krefs() == {kept, gone}
        removals = stack.graph.removals
        stack.graph.delete_revision(gone)
        assert stack.graph.removals == removals + 1
        assert worker.wait_synced(30)
        assert stack.index.revision_krefs() == {kept}
    finally:
        worker.stop()


def test_removing_an_item_drops_its_rows_but_keeps_a_revision_created_again_under_the_same_kref(
        stack: Stack) -> None:
    first = stack.memory("/P/a", "first", "Lighthouse", "the lighthouse keeper's log")
    stack.graph.create_revision(first.split("?")[0], {"title": "Lighthouse, later"})
    other = stack.memory("/P/b", "other", "Orchard", "apple trees in the orchard")
    reborn = stack.memory("/P/b", "reborn", "Mill", "the old water mill")
    stack.sync.repair()  # indexes everything; the removals read so far are behind us
    assert len(stack.index.revision_krefs()) == 4
    _remove_item_without_events(stack.graph, first.split("?")[0])
    _remove_item_without_events(stack.graph, reborn.split("?")[0])
    again = stack.memory("/P/b", "reborn", "Mill rebuilt", "the mill was rebuilt")  # ?r=1 once more
    assert again == reborn
    stack.sync.run_pending()  # the new revision's row is written before the removals are read
    removed = stack.sync.remove_deleted()
    assert removed == 2 and stack.index.revision_krefs() == {other, reborn}
    assert stack.sync.remove_deleted() == 0  # each removal is read once
