"""Read-your-writes: a write is searchable as soon as it is staged, before the index table is written; readers
wait only for commits nobody staged; the table and the graph's outbox catch up in the background, and a crash
before they do loses nothing (the repair on start brings the row back)."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from appliance.core.ports import Embedder
from appliance.core.search import SearchFilter, SearchRequest, searchable_text
from appliance.graph import IndexDoc
from appliance.inference.embedding import HashingEmbedder
from appliance.search.index import IndexRow
from appliance.search.sync import ShownStates
from appliance.search.worker import IndexWorker
from tests.inprocess import serve_in_process
from tests.mcp_api.clients import call, http_session
from tests.memory_api.conftest import API, memories_app
from tests.search.conftest import Stack

CLIENTS, ROUNDS = 8, 4


def found(stack: Stack, query: str, **where: Any) -> list[str]:
    return [h.revision_kref for h in stack.search.search(SearchRequest(query, SearchFilter(**where), limit=5))]


def test_a_staged_write_is_searchable_before_any_table_write_and_readers_do_not_wait_for_it(stack: Stack) -> None:
    worker = IndexWorker(stack.sync, interval=60)
    worker.start()
    try:
        assert worker.wait_idle(30)
        with worker.paused():  # no round runs: nothing reaches the LanceDB table or the outbox flags
            kref = stack.graph.atomic(lambda: stack.memory("/P/a", "gliders", "Gliders", "gliders over the ridge"))
            assert not worker.wait_synced(timeout=0.3)  # committed, not staged: the reader would wait
            worker.stage([kref], {})
            assert worker.wait_synced(timeout=0)  # staged: nothing left to wait for
            assert found(stack, "gliders ridge")[:1] == [kref]
            assert stack.index.count() == 0 and stack.graph.pending_count() == 1 and worker.staged() == 1
        assert worker.wait_idle(30)  # the round writes the staged row and clears the flag
        assert stack.index.count() == 1 and stack.graph.pending_count() == 0 and worker.staged() == 0
        assert found(stack, "gliders ridge")[:1] == [kref]
    finally:
        worker.stop()


def test_stage_uses_the_writers_vector_for_the_committed_text(stack: Stack) -> None:
    kref = stack.memory("/P/a", "kites", "Kites", "kites on the beach")
    doc = next(d for d in stack.graph.unindexed(10) if d.revision_kref == kref)
    vector = np.zeros(stack.embedder.dim, dtype=np.float32)
    vector[7] = 1.0  # no text embeds to this: only the given vector can put the row first
    worker = IndexWorker(stack.sync, interval=60)  # not started: stage works on its own
    worker.stage([kref], {searchable_text(doc.item_name, doc.metadata, doc.tags): vector})
    hits = stack.search.search(SearchRequest("anything", limit=1, mode="vector"), query_vector=vector)
    assert [h.revision_kref for h in hits] == [kref]


def test_a_crash_before_the_table_write_is_repaired_on_start(stack: Stack) -> None:
    kref = stack.memory("/P/a", "lost", "Lost at sea", "a staged note about lighthouses")
    IndexWorker(stack.sync, interval=60).stage([kref], {})  # no worker round: the process "dies" here
    assert found(stack, "lighthouses") == [kref] and stack.index.count() == 0
    stack.open_index()  # a new process: the resident rows come from the table, which never got the row
    assert found(stack, "lighthouses") == []
    assert stack.sync.repair().indexed == 1  # the outbox flag was never cleared
    assert found(stack, "lighthouses") == [kref] and stack.index.count() == 1


def test_a_reader_after_a_write_that_moved_tags_off_an_earlier_revision_sees_both_revisions_as_they_are_now(
        stack: Stack) -> None:
    worker = IndexWorker(stack.sync, interval=60)
    worker.start()
    try:
        first = stack.memory("/P/a", "plan", "Plan", "the launch plan, first draft")
        stack.graph.tag_revision(first, "current")
        assert worker.wait_idle(30)
        item = first.rsplit("?", 1)[0]

        def stacked() -> str:  # one transaction, as a write that stacks onto the item and moves its tag
            kref = stack.graph.create_revision(item, {"title": "Plan", "summary": "the launch plan, second draft"}).kref
            stack.graph.tag_revision(kref, "current")
            return kref

        with worker.paused():
            second = stack.graph.atomic(stacked)
            worker.stage([second], {})
            assert second in found(stack, "launch plan draft", tags=("current",))  # searchable at once
            # the commit also moved the first revision's tag: a reader waits for the round that reindexes it
            assert not worker.wait_synced(timeout=0.3)
        assert worker.wait_synced(timeout=30)
        assert found(stack, "launch plan draft", tags=("current",)) == [second]  # no round awaited besides
        assert stack.graph.unindexed_of_items([item]) == [] or stack.graph.unindexed_of_items([item])[0].revision_kref \
            == second  # the first revision is in; the second may still wait for its table write
        assert worker.wait_idle(30)
        assert stack.graph.pending_count() == 0 and stack.index.count() == 2
    finally:
        worker.stop()


def test_a_recall_right_after_a_memory_api_store_that_supersedes_an_entry_sees_the_entry_reindexed(
        tmp_path: Path) -> None:
    with memories_app(tmp_path / "data") as mem:
        mem.store("sky", "The sky colour over the harbour is green.", namespace="ryw")
        assert mem.services.index_worker.wait_idle(30)
        sky = mem.client.get(f"{API}/sky", params={"namespace": "ryw"}).json()["kref"]
        mem.store("sky-2", "Correction: the harbour sky is blue.", namespace="ryw", supersedes="sky")
        # the store's commit also changed the replaced entry's revision (superseded): the recall waits for it
        assert [e["key"] for e in mem.recall("sky colour harbour", namespace="ryw")] == ["sky-2", "sky"]
        assert mem.services.graph.unindexed_of_items([sky]) == []  # its row is the graph's state, not the old one
        assert mem.services.graph.current_revisions([sky])[sky].metadata["status"] == "superseded"


def _doc(kref_id: str, modified_at: str) -> IndexDoc:
    return IndexDoc(kref_id, "P", "/P/a", "conversation", "n", {}, [], False, "t", modified_at)


def _row(doc: IndexDoc) -> IndexRow:
    return IndexRow(doc.revision_kref, doc.item_kref, "P", "/P/a", ["/P", "/P/a"], "conversation", "", [], False,
                    "t", "n", doc.modified_at, "h", np.zeros(4, dtype=np.float32))


def test_a_slower_read_never_shows_an_older_state_over_a_newer_one() -> None:
    states, shown = ShownStates(), []
    old, new = (_doc("P/a/n.conversation?r=1", f"2026-01-01T00:00:0{s}") for s in (1, 2))
    with states.reading():  # read the old state
        with states.reading():  # a later read gets the new state and shows it first
            assert [d for d, _ in states.show([new], [_row(new)], shown.extend)] == [new]
        assert states.show([old], [_row(old)], shown.extend) == []  # left alone
    assert [r.text for r in shown] == [new.modified_at]
    assert len(states) == 0  # no read in flight: nothing to remember
    with states.reading():  # a read that begins later sees the graph as new as anything shown before it
        assert states.show([old], [_row(old)], shown.extend)


def test_each_of_eight_concurrent_mcp_clients_finds_what_it_has_just_stored(tmp_path: Path) -> None:
    """The agent's loop: store a memory, then at once recall and engage it; over streamable HTTP, eight clients at a
    time, every answer holds the memory just stored."""
    with serve_in_process(tmp_path / "data", None, inference={"chat_model": "none"}) as app:
        misses: list[str] = []

        async def client(n: int) -> None:
            async with http_session(app.base_url) as session:
                for round_ in range(ROUNDS):
                    word = f"zq{uuid.uuid4().hex[:10]}"
                    stored = await call(session, "kumiho_memory_store", title=f"Note {n}.{round_} {word}",
                                        user_text=f"Client {n} wrote {word} in round {round_}.", space_path=f"ryw/c{n}")
                    for tool in ("kumiho_memory_recall", "kumiho_memory_engage"):
                        answer = await call(session, tool, query=word)
                        if stored["item_kref"] not in {r.get("item_kref") or r.get("kref", "").split("?")[0]
                                                       for r in answer["results"]}:
                            misses.append(f"{tool} after store {n}.{round_}: {answer['results']}")

        async def main() -> None:
            async with anyio.create_task_group() as group:
                for n in range(CLIENTS):
                    group.start_soon(client, n)

        anyio.run(main)
        assert misses == []
        stored = CLIENTS * ROUNDS
        assert app.services.index_worker.wait_idle(60)
        assert app.services.graph.pending_count() == 0 and app.services.index.count() >= stored


class _HeldStageEmbedder(HashingEmbedder):
    """Embeds as usual, but a stage on the thread named "stager" waits in its embedding until released: the moment
    between a stage's graph read and its showing the rows."""

    def __init__(self) -> None:
        super().__init__()
        self.entered, self.release = threading.Event(), threading.Event()

    def embed(self, texts: list[str]) -> np.ndarray:
        if threading.current_thread().name == "stager":
            self.entered.set()
            assert self.release.wait(30)
        return super().embed(texts)


def test_a_stage_that_read_a_revision_before_its_deletion_does_not_bring_its_row_back(
        make_stack: Callable[[Embedder], Stack]) -> None:
    embedder = _HeldStageEmbedder()
    stack = make_stack(embedder)
    worker = IndexWorker(stack.sync, interval=60)
    worker.start()
    try:
        assert worker.wait_idle(30)
        with worker.paused():
            kref = stack.memory("/P/a", "doomed", "Doomed", "a note about quicksand")
            stager = threading.Thread(target=worker.stage, args=([kref], {}), name="stager")
            stager.start()
            assert embedder.entered.wait(30)  # the stage has read the revision, and not shown it yet
            assert stack.graph.delete_item(kref.rsplit("?", 1)[0], force=True)
        # the round would drop the deleted revision's row now; it waits for the stage in flight instead
        deadline = time.monotonic() + 2
        while stack.graph.removed_revisions() and time.monotonic() < deadline:
            time.sleep(0.05)
        embedder.release.set()
        stager.join(30)
        assert worker.wait_idle(30)
        assert found(stack, "quicksand") == [] and stack.index.count() == 0 and worker.staged() == 0
        assert stack.graph.removed_revisions() == []
    finally:
        embedder.release.set()
        worker.stop()
