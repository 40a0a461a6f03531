"""Projects, spaces and items: creation, idempotency, listing with paging, metadata, deletion."""

from __future__ import annotations

import pytest

from appliance.errors import AlreadyExists, Conflict, InvalidArgument, NotFound
from appliance.graph import GraphStore, engine


def test_a_project_gets_a_uuid_and_a_root_space(graph: GraphStore) -> None:
    project = graph.create_project("CognitiveMemory", "AI Cognitive Memory", {"owner": "me"})
    assert len(project.project_id) == 36 and project.metadata == {"owner": "me"}
    assert project.created_at.endswith("+00:00")
    assert graph.get_space("/CognitiveMemory").type == "root"


def test_creating_an_existing_project_returns_it_unless_exists_error(graph: GraphStore) -> None:
    first = graph.create_project("P")
    assert graph.create_project("P").project_id == first.project_id
    with pytest.raises(AlreadyExists):
        graph.create_project("P", exists_error=True)


def test_archived_projects_are_hidden_until_asked_for(graph: GraphStore) -> None:
    graph.create_project("A")
    graph.create_project("B")
    graph.delete_project("B")
    assert [p.name for p in graph.list_projects()] == ["A"]
    assert [p.name for p in graph.list_projects(include_deprecated=True)] == ["A", "B"]
    graph.update_project("B", deprecated=False)
    assert [p.name for p in graph.list_projects()] == ["A", "B"]


def test_force_deleting_a_project_removes_everything_in_it(graph: GraphStore) -> None:
    graph.ensure_space("/Gone/a/b")
    item = graph.create_item("/Gone/a/b", "x", "note")
    graph.create_revision(item.kref)
    graph.delete_project("Gone", force=True)
    with pytest.raises(NotFound):
        graph.get_project("Gone")
    assert graph.stats()["items"] == 0 and graph.stats()["spaces"] == 0


def test_a_hard_delete_confirms_the_snapshot_of_the_project_as_it_is(graph: GraphStore) -> None:
    graph.ensure_space("/Gone/a")
    first = graph.create_item("/Gone/a", "x", "note")
    graph.create_revision(first.kref)
    before = graph.deletion_impact("Gone")
    assert before.descendants == ["kref://Gone/a", first.kref] and before.counts["revisions"] == 1
    again = graph.deletion_impact("Gone")
    assert again.snapshot_id != before.snapshot_id and again.snapshot_hash != before.snapshot_hash
    graph.create_item("/Gone/a", "y", "note")  # the project changes: the snapshot no longer holds
    with pytest.raises(Conflict, match="changed since"):
        graph.hard_delete_project("Gone", before.snapshot_id, before.snapshot_hash)
    assert graph.removed_revisions() == []  # a refused deletion queues nothing for the index
    now = graph.deletion_impact("Gone")
    assert now.descendant_count == 3
    graph.hard_delete_project("Gone", now.snapshot_id, now.snapshot_hash)
    assert graph.removed_revisions() == [first.kref + "?r=1"]  # queued once committed
    with pytest.raises(NotFound):
        graph.get_project("Gone")


def test_references_from_other_projects_block_a_hard_delete(graph: GraphStore) -> None:
    graph.ensure_space("/Gone/a")
    graph.ensure_space("/Stay/b")
    inside = graph.create_revision(graph.create_item("/Gone/a", "x", "note").kref)
    outside = graph.create_revision(graph.create_item("/Stay/b", "y", "note").kref)
    graph.create_edge(outside.kref, inside.kref, "DEPENDS_ON")
    bundle = graph.create_bundle("/Stay/b", "set")
    graph.add_bundle_member(bundle.kref, inside.item_kref)
    impact = graph.deletion_impact("Gone")
    assert impact.blockers == [f"{outside.kref} DEPENDS_ON {inside.kref}",
                               f"bundle {bundle.kref} holds {inside.item_kref}"]
    with pytest.raises(Conflict, match="2 reference"):
        graph.hard_delete_project("Gone", impact.snapshot_id, impact.snapshot_hash)
    with pytest.raises(InvalidArgument):
        graph.hard_delete_project("Gone", "not-an-id", impact.snapshot_hash)


def test_nested_spaces_and_their_types(graph: GraphStore) -> None:
    deep = graph.ensure_space("/P/a/b/c")
    assert (deep.path, deep.name, deep.parent_path, deep.type) == ("/P/a/b/c", "c", "/P/a/b", "sub")
    assert graph.get_space("P/a").type == "root"
    assert graph.get_space("kref://P/a/b").kref == "kref://P/a/b"


def test_create_space_needs_its_parent(graph: GraphStore) -> None:
    graph.create_project("P")
    with pytest.raises(NotFound, match="/P/missing"):
        graph.create_space("/P/missing", "child")
    assert graph.create_space("/P", "a").path == "/P/a"
    assert graph.create_space("/P", "a").path == "/P/a"  # idempotent by default
    with pytest.raises(AlreadyExists):
        graph.create_space("/P", "a", exists_error=True)


def test_space_names_are_validated(graph: GraphStore) -> None:
    graph.create_project("P")
    with pytest.raises(InvalidArgument, match="space_name"):
        graph.create_space("/P", "has.dot")


def test_listing_child_spaces_pages_through_all_of_them(graph: GraphStore) -> None:
    graph.create_project("P")
    for i in range(7):
        graph.create_space("/P", f"s{i}")
    graph.ensure_space("/P/s0/deeper")
    seen, cursor, pages = [], None, 0
    while True:
        page = graph.list_spaces("/P", page_size=3, cursor=cursor)
        assert page.total_count == 7
        seen += [s.path for s in page.items]
        pages += 1
        if not page.has_more:
            break
        cursor = page.next_cursor
    assert seen == [f"/P/s{i}" for i in range(7)] and pages == 3
    recursive = graph.list_spaces("/P", recursive=True)
    assert "/P/s0/deeper" in [s.path for s in recursive.items] and recursive.total_count == 8
    assert [s.path for s in graph.list_spaces("/").items] == ["/P"]


def test_a_foreign_cursor_is_refused(graph: GraphStore) -> None:
    graph.create_project("P")
    with pytest.raises(InvalidArgument, match="cursor"):
        graph.list_spaces("/P", cursor="not-a-cursor!")


def test_space_metadata_merges(graph: GraphStore, space: str) -> None:
    graph.update_space_metadata(space, {"a": "1", "b": "2"})
    assert graph.update_space_metadata(space, {"b": "3"}).metadata == {"a": "1", "b": "3"}


def test_deleting_a_non_empty_space_needs_force(graph: GraphStore, space: str) -> None:
    item = graph.create_item(space, "x", "note")
    graph.create_revision(item.kref)
    with pytest.raises(Conflict, match="not empty"):
        graph.delete_space(space)
    assert graph.delete_space(space, force=True)
    with pytest.raises(NotFound):
        graph.get_item(item.kref)


def test_items_are_unique_by_name_and_kind(graph: GraphStore, space: str) -> None:
    model = graph.create_item(space, "hero", "model")
    texture = graph.create_item(space, "hero", "texture")
    assert model.kref == "kref://CognitiveMemory/notes/hero.model" and model.name == "hero.model"
    assert texture.kref != model.kref
    assert graph.create_item(space, "hero", "model").created_at == model.created_at
    with pytest.raises(AlreadyExists):
        graph.create_item(space, "hero", "model", exists_error=True)


def test_bundle_kind_is_reserved_for_create_bundle(graph: GraphStore, space: str) -> None:
    for kind in ("bundle", "Bundle"):
        with pytest.raises(InvalidArgument, match="create_bundle"):
            graph.create_item(space, "b", kind)


def test_items_need_an_existing_space(graph: GraphStore) -> None:
    graph.create_project("P")
    with pytest.raises(NotFound, match="/P/nowhere"):
        graph.create_item("/P/nowhere", "x", "note")


def test_listing_items_filters_and_pages(graph: GraphStore, space: str) -> None:
    for i in range(5):
        graph.create_item(space, f"memo{i}", "conversation")
    graph.create_item(space, "skill1", "skill")
    graph.set_deprecated(f"kref:/{space}/memo4.conversation")
    page = graph.list_items(space, kind_filter="conversation", page_size=2)
    assert page.total_count == 4 and len(page.items) == 2 and page.has_more
    rest = graph.list_items(space, kind_filter="conversation", page_size=2, cursor=page.next_cursor)
    assert [i.item_name for i in page.items + rest.items] == ["memo0", "memo1", "memo2", "memo3"]
    assert not rest.has_more
    assert graph.list_items(space, include_deprecated=True).total_count == 6
    assert [i.item_name for i in graph.list_items(space, name_filter="skill").items] == ["skill1"]


def test_search_items_by_context_prefix_glob_and_name(graph: GraphStore) -> None:
    graph.ensure_space("/film-2024/characters")
    graph.ensure_space("/film-2025/characters")
    graph.ensure_space("/film-2024/props")
    graph.create_item("/film-2024/characters", "hero", "model")
    graph.create_item("/film-2025/characters", "heroine", "model")
    graph.create_item("/film-2024/props", "sword", "model")

    def names_of(**filters: str) -> list[str]:
        return [i.item_name for i in graph.search_items(**filters).items]

    assert names_of(context_filter="film-2024") == ["hero", "sword"]
    assert names_of(context_filter="*/characters") == ["hero", "heroine"]
    assert names_of(context_filter="film-*", name_filter="hero*") == ["hero", "heroine"]
    assert names_of(name_filter="ROIN") == ["heroine"]
    assert names_of(kind_filter="texture") == []
    graph.ensure_space("/film-2024b/characters")
    graph.create_item("/film-2024b/characters", "extra", "model")
    assert names_of(context_filter="film-2024") == ["hero", "sword", "extra"]  # a plain string prefix
    assert names_of(context_filter="/film-2024/") == ["hero", "sword"]  # a trailing "/" ends the segment


def test_items_of_an_archived_project_leave_search_until_restored(graph: GraphStore) -> None:
    graph.ensure_space("/Old/a")
    graph.create_item("/Old/a", "relic", "model")
    graph.delete_project("Old")
    assert graph.search_items(context_filter="Old").items == []
    assert [i.item_name for i in graph.search_items(context_filter="Old", include_deprecated=True).items] == ["relic"]
    graph.update_project("Old", deprecated=False)
    assert [i.item_name for i in graph.search_items(context_filter="Old").items] == ["relic"]


def test_item_metadata_merges_and_is_audited(graph: GraphStore, space: str) -> None:
    item = graph.create_item(space, "x", "note", {"a": "1"})
    assert graph.update_item_metadata(item.kref, {"b": "2"}).metadata == {"a": "1", "b": "2"}
    assert any(e["routing_key"] == "item.updated" and e["details"]["metadata"] == {"b": "2"}
               for e in graph.events())


def test_deleting_an_item_with_revisions_needs_force(graph: GraphStore, space: str) -> None:
    item = graph.create_item(space, "x", "note")
    graph.create_revision(item.kref)
    with pytest.raises(Conflict, match="deprecate"):
        graph.delete_item(item.kref)
    assert graph.delete_item(item.kref, force=True)
    assert graph.stats()["revisions"] == 0


def test_deprecating_and_restoring_an_item(graph: GraphStore, space: str) -> None:
    item = graph.create_item(space, "x", "note")
    assert graph.set_deprecated(item.kref).item.deprecated  # type: ignore[union-attr]
    assert graph.list_items(space).total_count == 0
    assert not graph.set_deprecated(item.kref, False).item.deprecated  # type: ignore[union-attr]
    assert graph.list_items(space).total_count == 1
    keys = [e["routing_key"] for e in graph.events()]
    assert "item.deprecated" in keys and "item.restored" in keys


def test_attributes_on_every_kind_of_entity(graph: GraphStore, space: str) -> None:
    item = graph.create_item(space, "x", "note")
    rev = graph.create_revision(item.kref)
    art = graph.create_artifact(rev.kref, "log.txt", "/tmp/log.txt")
    for ref in ("kref://CognitiveMemory", space, item.kref, rev.kref, art.kref):
        assert not graph.get_attribute(ref, "status").exists
        graph.set_attribute(ref, "status", "superseded")
        assert graph.get_attribute(ref, "status").value == "superseded"
        assert graph.delete_attribute(ref, "status")
        assert not graph.delete_attribute(ref, "status")
        assert graph.get_attribute(ref, "status").value is None
    assert graph.get_revision(rev.kref).metadata == {}


def test_stats_count_everything(graph: GraphStore, space: str) -> None:
    item = graph.create_item(space, "x", "note")
    graph.create_revision(item.kref)
    stats = graph.stats()
    assert (stats["projects"], stats["spaces"], stats["items"], stats["revisions"]) == (1, 2, 1, 1)
    assert stats["unindexed_revisions"] == 1


def test_attributes_and_deprecation_of_a_missing_item_are_not_found(graph: GraphStore, space: str) -> None:
    for call in (lambda: graph.get_attribute(f"kref:/{space}/ghost.note", "k"),
                 lambda: graph.set_attribute(f"kref:/{space}/ghost.note", "k", "v"),
                 lambda: graph.set_deprecated(f"kref:/{space}/ghost.note")):
        with pytest.raises(NotFound):
            call()
    assert not any(e["kref"].endswith("ghost.note") for e in graph.events())


def test_items_by_kref_reads_the_same_by_key_lookups_and_by_one_scan(graph: GraphStore,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    graph.ensure_space("/Lookups/notes")
    made = [graph.create_item("/Lookups/notes", f"note-{n}", "note", {"n": str(n)}) for n in range(5)]
    asked = [item.kref for item in made[:4]] + ["kref://Lookups/notes/missing.note"]
    by_keys = graph.items_by_kref(asked)
    monkeypatch.setattr(engine, "KEY_LOOKUPS_UP_TO", 1)  # more ids than that: one scan of the table
    by_scan = graph.items_by_kref(asked)
    assert sorted(by_keys) == sorted(by_scan) == sorted(item.kref for item in made[:4])
    assert {k: v.metadata for k, v in by_keys.items()} == {k: v.metadata for k, v in by_scan.items()}
