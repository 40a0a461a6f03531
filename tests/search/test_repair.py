"""The index health check and the move-aside, on a real LanceDB table in tmp_path (the end-to-end cases, through
real processes, are in test_damaged_index.py)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from appliance.core.search import SearchFilter, SearchRequest
from appliance.errors import Unavailable
from appliance.search import repair
from appliance.search.index import SearchIndex
from appliance.search.service import SearchService
from tests.search.conftest import Stack
from tests.search.damage import delete_a_data_file, truncate_latest_manifest


@pytest.fixture
def indexed(stack: Stack) -> Stack:
    for n in range(3):
        stack.memory("/P/a", f"m{n}", f"note {n}", f"a note about zeppelins number {n}")
        stack.sync.run_pending()
    return stack


def test_check_tells_a_healthy_index_from_a_missing_one(indexed: Stack, tmp_path: Path) -> None:
    health = repair.check(indexed.index.path)
    assert (health.state, health.detail, health.rows) == ("ok", "3 rows, every file readable", 3)
    assert health.revision_krefs == {f"kref://P/a/m{n}.conversation?r=1" for n in range(3)}
    assert repair.check(tmp_path / "nowhere").state == "missing"


@pytest.mark.parametrize("damage", [truncate_latest_manifest, delete_a_data_file])
def test_check_finds_a_damaged_index_and_says_what_is_wrong(indexed: Stack, damage: object) -> None:
    damage(indexed.root)  # type: ignore[operator]
    health = repair.check(indexed.index.path)
    assert health.damaged
    assert ".rs:" not in health.detail and "lance error" not in health.detail  # no Rust source locations


def test_check_finds_a_deleted_key_index(indexed: Stack) -> None:
    for file in (indexed.index.path / "revisions.lance" / "_indices").rglob("*.lance"):
        file.unlink()
    assert repair.check(indexed.index.path).damaged


def test_move_aside_keeps_every_copy(tmp_path: Path) -> None:
    index = tmp_path / "index"
    moment = datetime(2026, 12, 1, 15, 0, 0, tzinfo=UTC)
    for n in range(2):
        index.mkdir()
        (index / "marker").write_text(str(n))
        repair.move_aside(index, now=moment)
    assert [p.name for p in repair.damaged_copies(index)] == ["index.damaged-20261201T150000Z",
                                                              "index.damaged-20261201T150000Z-2"]
    assert [(p / "marker").read_text() for p in repair.damaged_copies(index)] == ["0", "1"]


def test_a_table_that_cannot_be_read_answers_unavailable_and_calls_for_a_check(indexed: Stack) -> None:
    reopened = SearchIndex(indexed.index.path, indexed.embedder.dim, indexed.embedder.model_id)  # not loaded yet
    calls: list[bool] = []
    reopened.on_unreadable = lambda: calls.append(True)
    delete_a_data_file(indexed.root)
    search = SearchService(reopened, indexed.embedder)
    with pytest.raises(Unavailable, match="try again shortly"):
        search.search(SearchRequest("zeppelins", SearchFilter(), "text", 10))
    assert calls == [True]


def test_start_over_replaces_the_rows_and_the_graph_refills_them(indexed: Stack) -> None:
    delete_a_data_file(indexed.root)
    moved = repair.replace_damaged(indexed.index, indexed.graph, "a data file is missing")
    assert moved.aside.is_dir() and indexed.index.count() == 0 and indexed.graph.pending_count() == 3
    indexed.sync.run_pending()
    assert repair.check(indexed.index.path).state == "ok" and indexed.index.count() == 3
    hits = indexed.search.search(SearchRequest("zeppelins", SearchFilter(), "text", 10))
    assert len(hits) == 3
