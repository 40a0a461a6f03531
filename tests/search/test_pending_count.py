"""The outbox's size (``GraphStore.pending_count``: readiness' ``pending``, the metrics' index lag) is kept as writes
commit, without a scan, and always equals the scan of every revision (``count_unindexed``): after each kind of
write, after a rolled-back one, after a restart with unindexed rows, through the repair on start and the rebuild
of a damaged index, and while the real appliance serves."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from appliance.errors import StorageError
from appliance.graph import GraphStore
from appliance.graph.memories import NewMemory
from appliance.graph.revisions import NewRevision
from appliance.portability.exporter import export_lines
from appliance.portability.importer import Importer
from appliance.search.index import SearchIndex
from appliance.search.sync import IndexSync
from tests.inprocess import serve_in_process
from tests.mcp_api.clients import call, in_http_session
from tests.search.conftest import Stack


def agree(graph: GraphStore) -> int:
    kept, scanned = graph.pending_count(), graph.count_unindexed()
    assert kept == scanned, f"kept {kept}, the scan counts {scanned}"
    return kept


def _memory(name: str, space: str = "/P/a", item_kref: str = "", tags: tuple[str, ...] = ()) -> NewMemory:
    return NewMemory(space, name, "conversation", {"title": name, "summary": "s"}, "note.md", "/tmp/x.md",
                     tags, item_kref)


def test_every_kind_of_write_keeps_the_count_equal_to_the_scan(stack: Stack) -> None:
    graph = stack.graph
    assert agree(graph) == 0
    first = stack.memory("/P/a", "one", "One", "first")  # item + revision
    assert agree(graph) == 1
    created = graph.create_memories([_memory("two"), _memory("three", tags=("published",))])
    assert agree(graph) == 3
    graph.create_memories([_memory("", item_kref=created[1].item_kref, tags=("published",))])  # stacks: tag moves
    assert agree(graph) == 4
    bulk = graph.create_revisions([NewRevision("kref://P/a/bulk.conversation"), NewRevision("kref://P/a/one"
                                                                                             ".conversation")])
    assert not bulk.failures and agree(graph) == 6
    stack.sync.run_pending()  # everything indexed (mark_indexed clears what it wrote)
    assert agree(graph) == 0
    graph.update_revision_metadata(first, {"title": "Changed"})
    graph.tag_revision(first, "reviewed")
    assert agree(graph) == 1  # the same revision twice
    graph.update_project("P", deprecated=True)  # archived: every revision flagged to hide its row
    assert agree(graph) == 6
    stack.sync.run_pending()
    graph.update_project("P", deprecated=False)
    graph.delete_item(created[0].item_kref, force=True)  # deleting flagged revisions drops them from the count
    assert agree(graph) == 5
    graph.delete_space("/P/a", force=True)
    assert agree(graph) == 0


def test_an_import_counts_the_revisions_it_loads(make_stack: Callable[[], Stack], tmp_path: Path) -> None:
    source, target = make_stack(), make_stack()
    for n in range(3):
        source.memory("/P/a", f"m{n}", f"M{n}", "s")
    exported = tmp_path / "export.jsonl"
    exported.write_text("".join(export_lines(source.graph, tmp_path / "artifacts")))
    assert agree(target.graph) == 0
    Importer(target.graph, tmp_path / "target-artifacts").run(exported)  # bulk loads (COPY) the revisions
    assert agree(target.graph) == 3


def test_a_rolled_back_write_changes_nothing(stack: Stack) -> None:
    stack.memory("/P/a", "kept", "Kept", "s")

    def fails() -> None:
        stack.memory("/P/a", "lost", "Lost", "s")
        raise StorageError("refused after writing")

    with pytest.raises(StorageError):
        stack.graph.atomic(fails)
    assert agree(stack.graph) == 1


def test_a_restart_with_unindexed_rows_counts_them_and_the_repair_brings_them_to_zero(stack: Stack) -> None:
    for n in range(5):
        stack.memory("/P/a", f"m{n}", f"M{n}", "s")
    stack.sync.run_pending()
    for n in range(3):
        stack.memory("/P/b", f"w{n}", f"W{n}", "s")  # committed, never indexed: the process "dies" here
    stack.graph.close()

    stack.graph = GraphStore.open(stack.root / "graph.kuzu", buffer_pool_mb=64, readers=2)
    stack.open_index()
    assert agree(stack.graph) == 3
    gone = sorted(stack.index.revision_krefs())[:2]
    stack.index.delete(gone)  # rows lost (a crash between the table write and its commit)
    missing = sorted(stack.graph.revision_krefs() - stack.index.revision_krefs())
    stack.graph.mark_unindexed(missing)  # what the repair on start does first
    assert agree(stack.graph) == 5
    repaired = stack.sync.repair()
    assert repaired.indexed == 5 and agree(stack.graph) == 0


def test_the_rebuild_of_a_damaged_index_requeues_everything_and_counts_it_down(stack: Stack, tmp_path: Path) -> None:
    for n in range(4):
        stack.memory("/P/a", f"m{n}", f"M{n}", "s")
    stack.sync.run_pending()
    stack.graph.mark_all_unindexed()  # what replacing a damaged index does (repair.replace_damaged)
    assert agree(stack.graph) == 4
    fresh = SearchIndex(tmp_path / "fresh-index", stack.embedder.dim, stack.embedder.model_id)
    sync = IndexSync(stack.graph, fresh, stack.embedder, batch=3)
    assert sync.next_batch() and agree(stack.graph) == 1
    sync.run_pending()
    assert agree(stack.graph) == 0


def test_readiness_answers_the_kept_count_while_the_appliance_serves(tmp_path: Path) -> None:
    with serve_in_process(tmp_path / "data", None, inference={"chat_model": "none"}) as app:
        worker, graph = app.services.index_worker, app.services.graph

        async def store(session):  # type: ignore[no-untyped-def]
            return [await call(session, "kumiho_memory_store", title=f"Note {n}", user_text=f"text {n}")
                    for n in range(3)]

        with worker.paused():  # no index write: the stored revisions wait
            stored = in_http_session(app.base_url, store)
            assert all(s["stored"] for s in stored)
            ready = httpx.get(app.base_url + "/api/_ready", timeout=30).json()
            assert ready["search"]["pending"] == graph.count_unindexed() >= 3
        assert worker.wait_idle(30)
        ready = httpx.get(app.base_url + "/api/_ready", timeout=30).json()
        assert ready["search"]["pending"] == graph.count_unindexed() == 0
