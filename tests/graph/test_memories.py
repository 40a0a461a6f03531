"""``create_memories``: a memory's item, revision, artifact and tags in a few statements, leaving the same graph
(nodes, tag spans, outbox marks, events, audit row) as the general methods one after another."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from appliance.core.model import Revision
from appliance.errors import InvalidArgument, NotFound, PermissionDenied
from appliance.graph import GraphStore, NewMemory, engine
from appliance.graph.write_policy import WritePolicy
from appliance.memory.policy import ReadOnlyNamespaces
from tests.conftest import FakeClock


def open_graph(path: Path) -> GraphStore:
    return GraphStore.open(path / "graph.kuzu", buffer_pool_mb=64, readers=2, clock=FakeClock())


def by_general_methods(g: GraphStore, space: str, name: str, meta: dict[str, str], tags: list[str],
                       item_kref: str = "") -> str:
    def job() -> str:
        path = g.ensure_space(space).path
        item = item_kref or g.create_item(path, name, "conversation").kref
        revision = g.create_revision(item, meta)
        g.create_artifact(revision.kref, "chat_io", f"/files/{name}.md")
        g.set_default_artifact(revision.kref, "chat_io")
        for tag in tags:
            g.tag_revision(revision.kref, tag)
        return revision.kref

    return g.atomic(job)


def by_create_memories(g: GraphStore, space: str, name: str, meta: dict[str, str], tags: list[str],
                       item_kref: str = "") -> str:
    (created,) = g.atomic(lambda: g.create_memories([NewMemory(
        space, name, "conversation", meta, "chat_io", f"/files/{name}.md", tuple(tags), item_kref)]))
    return created.revision_kref


def state(g: GraphStore, item: str) -> dict[str, Any]:
    """Everything about an item a client can read, without the times."""
    revisions: list[Revision] = g.list_revisions(item).items
    return {
        "revisions": [(r.kref, r.number, r.tags, r.metadata, r.default_artifact) for r in revisions],
        "artifacts": [[(a.kref, a.name, a.location) for a in g.list_artifacts(r.kref)] for r in revisions],
        "history": [(h["tag"], h["revision_kref"], h["until"] is None) for h in g.tag_history(item)],
        "next": g.peek_next_revision(item),
        "pending": sorted(d.revision_kref for d in g.unindexed()),
        "events": [(e["routing_key"], e["kref"], e["details"]) for e in g.events(limit=1000)],
        "items": [i.kref for i in g.list_items("/CognitiveMemory/notes/sub").items],
    }


@pytest.mark.parametrize("lookups_up_to", [500, 0], ids=["key-lookups", "table-scans"])
def test_a_new_memory_and_one_stacked_on_it_leave_the_graph_the_general_methods_leave(
        tmp_path: Path, lookups_up_to: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # the item's state and the revisions to flag are read by key lookups up to a number of rows, by scans beyond
    monkeypatch.setattr(engine, "KEY_LOOKUPS_UP_TO", lookups_up_to)
    item = "kref://CognitiveMemory/notes/sub/coffee.conversation"
    seen = []
    for write in (by_general_methods, by_create_memories):
        with open_graph(tmp_path / write.__name__) as g:
            g.ensure_space("/CognitiveMemory/notes")
            g.mark_indexed(g.unindexed())
            first = write(g, "/CognitiveMemory/notes/sub", "coffee", {"title": "Coffee", "summary": "a"}, ["published"])
            g.mark_indexed(g.unindexed())  # the second write must mark the revision that loses 'published' again
            second = write(g, "/CognitiveMemory/notes/sub", "coffee", {"title": "Coffee", "summary": "b"},
                           ["published", "approved"], item_kref=item)
            assert (first, second) == (item + "?r=1", item + "?r=2")
            seen.append(state(g, item))
    assert seen[1] == seen[0]
    assert seen[1]["pending"] == [item + "?r=1", item + "?r=2"]


def test_one_memory_is_a_few_statements(graph: GraphStore, space: str) -> None:
    writer = graph._engine.connections[0]

    def statements(name: str, item_kref: str = "") -> int:
        before = writer.executed
        by_create_memories(graph, space, name, {"title": name, "summary": name}, ["published"], item_kref)
        return writer.executed - before

    by_create_memories(graph, space, "warm-up", {"title": "w", "summary": "w"}, ["published"])
    # BEGIN, the spaces, the items, the write, the events, COMMIT
    assert statements("tea") <= 6
    # and for a revision of an existing item: the spans it ends, the outbox mark of the revision that lost a tag
    assert statements("tea", "kref://CognitiveMemory/notes/tea.conversation") <= 8
    assert graph.get_revision("kref://CognitiveMemory/notes/tea.conversation?t=published").number == 2


def test_many_memories_in_one_call_number_their_revisions_in_order(graph: GraphStore, space: str) -> None:
    rows = [NewMemory(space, name, "conversation", {"title": name}, "chat_io", f"/f/{n}", ("published",))
            for n, name in enumerate(["a", "b", "a", "c", "a"])]
    created = graph.atomic(lambda: graph.create_memories(rows))
    assert [c.revision_kref.rsplit("/", 1)[1] for c in created] == [
        "a.conversation?r=1", "b.conversation?r=1", "a.conversation?r=2", "c.conversation?r=1", "a.conversation?r=3"]
    assert [c.item_created for c in created] == [True, True, False, True, False]
    held = graph.get_revision("kref://CognitiveMemory/notes/a.conversation?t=published")
    assert held.number == 3 and sorted(held.tags) == ["latest", "published"]
    assert graph.peek_next_revision("kref://CognitiveMemory/notes/a.conversation") == 4


def test_a_refused_memory_writes_nothing(graph: GraphStore, space: str) -> None:
    good = NewMemory(space, "good", "conversation", {"title": "g"}, "chat_io", "/f/good")
    before = graph.stats()
    with pytest.raises(InvalidArgument) as bad_kind:
        graph.create_memories([good, NewMemory(space, "bad", "bundle", {}, "chat_io", "/f/bad")])
    assert bad_kind.value.field == "memories[1].memory_item_kind"
    assert graph.stats() == before
    with pytest.raises(NotFound):
        graph.create_memories([good, NewMemory(space, "x", "conversation", {}, "chat_io", "/f/x",
                                               item_kref="kref://CognitiveMemory/notes/missing.conversation")])
    assert graph.stats() == before
    graph.ensure_space("/CognitiveMemory/Memory/ops")
    before = graph.stats()
    graph.policy = WritePolicy(ReadOnlyNamespaces.of("CognitiveMemory", ["ops"]))
    with pytest.raises(PermissionDenied):
        graph.create_memories([good, NewMemory("/CognitiveMemory/Memory/ops", "y", "conversation", {}, "chat_io",
                                               "/f/y")])
    assert graph.stats() == before
