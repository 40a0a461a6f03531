"""The index gives old table versions back: every write makes a LanceDB version, and compaction deletes those
older than ``search.keep_versions_minutes`` (LanceDB's own default keeps them for 7 days: ~1,000 versions
after 10,000 stores)."""

from __future__ import annotations

from datetime import timedelta

from appliance.search.index import IndexCaches, SearchIndex
from appliance.search.sync import IndexSync
from tests.search.conftest import Stack


def test_compaction_deletes_versions_older_than_the_setting(stack: Stack) -> None:
    stack.index = SearchIndex(stack.root / "index", stack.embedder.dim, stack.embedder.model_id,
                              IndexCaches(keep_versions=timedelta(milliseconds=1)))
    stack.sync = IndexSync(stack.graph, stack.index, stack.embedder)
    for i in range(12):  # one index write (and version) per sync round
        stack.memory("/P/notes", f"n{i}", f"Note {i}", f"The nightly job number {i} runs at {i}:00.")
        stack.sync.run_pending()
    assert len(stack.index._table.list_versions()) >= 12
    stack.index.optimize()
    assert len(stack.index._table.list_versions()) <= 2
    assert stack.index.count() == 12


def test_a_recent_version_is_kept_until_it_is_old_enough(stack: Stack) -> None:
    stack.index = SearchIndex(stack.root / "index", stack.embedder.dim, stack.embedder.model_id,
                              IndexCaches(keep_versions=timedelta(hours=1)))
    stack.sync = IndexSync(stack.graph, stack.index, stack.embedder)
    for i in range(3):
        stack.memory("/P/notes", f"n{i}", f"Note {i}", f"The nightly job number {i} runs at {i}:00.")
        stack.sync.run_pending()
    before = len(stack.index._table.list_versions())
    stack.index.optimize()
    assert len(stack.index._table.list_versions()) >= before
