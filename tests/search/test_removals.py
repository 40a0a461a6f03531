"""Deletions leave the search index: a committed deletion (of a revision, an item, a space, a project) queues
its revisions' rows, and the sync drops exactly those before its next round — a revision created again under
the same kref keeps its new row."""

from __future__ import annotations

from appliance.search.worker import IndexWorker
from tests.search.conftest import Stack


def test_a_deleted_revision_leaves_the_index_in_the_next_round(stack: Stack) -> None:
    worker = IndexWorker(stack.sync, interval=60)  # only commits wake it within the test
    worker.start()
    try:
        kept = stack.memory("/P/a", "kept", "Harbour cranes", "cranes unload ships at the harbour")
        gone = stack.memory("/P/a", "gone", "Glacier hike", "a glacier hike above the valley")
        assert worker.wait_idle(30) and stack.index.revision_krefs() == {kept, gone}
        stack.graph.delete_revision(gone, force=True)
        assert worker.wait_synced(30)
        assert stack.index.revision_krefs() == {kept}
    finally:
        worker.stop()


def test_deleting_an_item_drops_its_rows_but_keeps_a_revision_created_again_under_the_same_kref(
        stack: Stack) -> None:
    first = stack.memory("/P/a", "first", "Lighthouse", "the lighthouse keeper's log")
    stack.graph.create_revision(first.split("?")[0], {"title": "Lighthouse, later"})
    other = stack.memory("/P/b", "other", "Orchard", "apple trees in the orchard")
    reborn = stack.memory("/P/b", "reborn", "Mill", "the old water mill")
    stack.sync.run_pending()
    assert len(stack.index.revision_krefs()) == 4
    stack.graph.delete_item(first.split("?")[0], force=True)
    assert stack.sync.drop_removed() == 2 and stack.index.revision_krefs() == {other, reborn}
    stack.graph.delete_item(reborn.split("?")[0], force=True)
    again = stack.memory("/P/b", "reborn", "Mill rebuilt", "the mill was rebuilt")  # ?r=1 once more, unsynced
    assert again == reborn
    stack.sync.run_pending()  # drops the deleted row first, then writes the new revision's
    assert stack.index.revision_krefs() == {other, reborn}
    assert stack.sync.drop_removed() == 0  # each removal is dropped once
