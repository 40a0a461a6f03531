"""Revisions, tags and their history: numbering, latest, published (D4), time travel, bulk writes."""

from __future__ import annotations

import contextlib

import pytest

from appliance.errors import Conflict, InvalidArgument, NotFound
from appliance.graph import GraphStore, NewArtifact, NewRevision, revisions
from tests.conftest import FakeClock


@pytest.fixture
def item(graph: GraphStore, space: str) -> str:
    return graph.create_item(space, "transport", "conversation").kref


def test_revisions_are_numbered_from_one_and_latest_follows_the_newest(graph: GraphStore, item: str) -> None:
    first = graph.create_revision(item, {"title": "one"})
    assert (first.number, first.kref, first.tags, first.latest) == (1, item + "?r=1", ["latest"], True)
    assert graph.peek_next_revision(item) == 2
    second = graph.create_revision(item, {"title": "two"})
    assert second.number == 2 and second.latest
    assert graph.get_revision(first.kref).tags == []
    assert graph.get_revision(item).number == 2  # an item kref means its latest revision


def test_numbers_are_never_reused_after_a_delete(graph: GraphStore, item: str) -> None:
    for _ in range(3):
        graph.create_revision(item)
    graph.delete_revision(item + "?r=3")
    assert graph.get_revision(item).number == 2  # latest fell back to the newest left
    assert graph.create_revision(item).number == 4


def test_revision_metadata_is_string_only(graph: GraphStore, item: str) -> None:
    with pytest.raises(InvalidArgument, match="JSON-encode"):
        graph.create_revision(item, {"n": 1})  # type: ignore[dict-item]
    assert graph.stats()["revisions"] == 0


def test_listing_revisions_is_newest_first_and_paged(graph: GraphStore, item: str) -> None:
    for _ in range(5):
        graph.create_revision(item)
    graph.set_deprecated(item + "?r=2")
    page = graph.list_revisions(item, page_size=2)
    rest = graph.list_revisions(item, page_size=10, cursor=page.next_cursor)
    assert [r.number for r in page.items + rest.items] == [5, 4, 3, 2, 1]
    assert page.total_count == 5
    assert [r.number for r in graph.list_revisions(item, include_deprecated=False).items] == [5, 4, 3, 1]


def test_published_moves_to_the_newly_tagged_revision(graph: GraphStore, item: str) -> None:
    one, two = graph.create_revision(item), graph.create_revision(item)
    graph.tag_revision(one.kref, "published")
    assert graph.revision_by_tag(item).number == 1  # the default tag is "published"
    graph.tag_revision(two.kref, "published")
    assert graph.revision_by_tag(item, "published").number == 2
    assert not graph.has_tag(one.kref, "published") and graph.was_tagged(one.kref, "published")


def test_a_published_revision_stays_editable_and_edits_are_recorded(graph: GraphStore, item: str) -> None:
    """D4: published is an accepted state, not a freeze."""
    rev = graph.create_revision(item, {"title": "accepted"})
    graph.tag_revision(rev.kref, "published")
    graph.tag_revision(rev.kref, "approved")
    graph.create_edge(rev.kref, rev.kref, "REFERENCED")
    updated = graph.update_revision_metadata(rev.kref, {"status": "superseded", "title": "renamed"})
    graph.set_deprecated(rev.kref)
    assert updated.tags == ["approved", "latest", "published"]
    assert updated.metadata == {"status": "superseded", "title": "renamed"}
    audit = [e for e in graph.events() if e["kref"] == rev.kref]
    keys = [e["routing_key"] for e in audit]
    assert {"revision.tagged", "revision.updated", "revision.deprecated", "edge.created"} <= set(keys)
    update = next(e for e in audit if e["routing_key"] == "revision.updated")
    assert update["details"]["previous"] == {"title": "accepted"}


def test_any_tag_names_one_revision_per_item_at_a_time(graph: GraphStore, item: str) -> None:
    one, two = graph.create_revision(item), graph.create_revision(item)
    graph.tag_revision(one.kref, "approved")
    graph.tag_revision(two.kref, "approved")
    assert graph.get_revision(one.kref).tags == []
    assert graph.get_revision(two.kref).tags == ["approved", "latest"]


def test_tagging_again_is_a_no_op(graph: GraphStore, item: str) -> None:
    rev = graph.create_revision(item)
    graph.tag_revision(rev.kref, "published")
    graph.tag_revision(rev.kref, "published")
    assert len(graph.tag_history(item, "published")) == 1


def test_untag_removes_a_tag_and_reports_absence(graph: GraphStore, item: str) -> None:
    rev = graph.create_revision(item)
    graph.tag_revision(rev.kref, "done")
    assert graph.untag_revision(rev.kref, "done")
    assert not graph.untag_revision(rev.kref, "done")
    with pytest.raises(NotFound, match="holds tag 'done'"):
        graph.revision_by_tag(item, "done")


def test_latest_cannot_be_applied_or_removed_by_hand(graph: GraphStore, item: str) -> None:
    rev = graph.create_revision(item)
    with pytest.raises(InvalidArgument, match="latest"):
        graph.tag_revision(rev.kref, "latest")
    with pytest.raises(InvalidArgument, match="latest"):
        graph.untag_revision(rev.kref, "latest")


def test_time_travel_answers_which_revision_held_a_tag(graph: GraphStore, item: str, clock: FakeClock) -> None:
    one = graph.create_revision(item)
    graph.tag_revision(one.kref, "published")
    clock.advance(days=1)
    before = clock.now.isoformat()
    clock.advance(days=1)
    two = graph.create_revision(item)
    graph.tag_revision(two.kref, "published")
    assert graph.revision_by_tag(item, "published", time=before).number == 1
    assert graph.revision_by_tag(item, "published").number == 2
    assert graph.revision_by_tag(item, "latest", time=before).number == 1
    assert graph.get_revision(f"{item}?t=published&time={before}").number == 1
    with pytest.raises(NotFound):
        graph.revision_by_tag(item, "published", time="200001010000")


def test_tag_history_records_each_span(graph: GraphStore, item: str) -> None:
    one, two = graph.create_revision(item), graph.create_revision(item)
    graph.tag_revision(one.kref, "published")
    graph.tag_revision(two.kref, "published")
    spans = graph.tag_history(item, "published")
    assert [s["revision_kref"] for s in spans] == [one.kref, two.kref]
    assert spans[0]["until"] == spans[1]["since"] and spans[1]["until"] is None


def test_bulk_write_numbers_rows_in_order_and_reports_bad_rows(graph: GraphStore, space: str) -> None:
    graph.create_revision(graph.create_item(space, "old", "conversation").kref)
    rows = [
        NewRevision(f"kref:/{space}/old.conversation", {"i": "0"}),
        NewRevision(f"kref:/{space}/new.conversation", {"i": "1"},
                    (NewArtifact("chat_io", "/tmp/a.txt", is_default=True), NewArtifact("extra", "/tmp/b"))),
        NewRevision(f"kref:/{space}/new.conversation", {"i": "2"}),
        NewRevision("kref://CognitiveMemory/missing/x.conversation"),
        NewRevision("not a kref"),
        NewRevision(f"kref:/{space}/b.bundle"),
    ]
    result = graph.create_revisions(rows)
    assert [r.number if r else None for r in result.revisions] == [2, 1, 2, None, None, None]
    assert set(result.failures) == {3, 4, 5}
    assert "space /CognitiveMemory/missing does not exist" in result.failures[3]
    assert graph.get_revision(f"kref:/{space}/new.conversation").metadata == {"i": "2"}
    assert graph.get_revision(f"kref:/{space}/new.conversation?r=1").tags == []
    assert graph.get_artifact(f"kref:/{space}/new.conversation?r=1").name == "chat_io"
    assert graph.get_revision(f"kref:/{space}/old.conversation").number == 2
    assert graph.create_revision(f"kref:/{space}/new.conversation").number == 3


def test_bulk_write_is_all_or_nothing_for_its_valid_rows(graph: GraphStore, space: str) -> None:
    rows = [NewRevision(f"kref:/{space}/r{i}.conversation", {"i": str(i)}) for i in range(50)]
    rows.append(NewRevision(f"kref:/{space}/dup.conversation", {},
                            (NewArtifact("a", "/x"), NewArtifact("a", "/y"))))
    result = graph.create_revisions(rows)
    assert result.failures.keys() == {50}
    assert graph.stats()["revisions"] == 50


def test_deleting_a_published_or_linked_revision_needs_force(graph: GraphStore, item: str) -> None:
    one, two, three = (graph.create_revision(item) for _ in range(3))
    graph.tag_revision(two.kref, "published")
    graph.create_edge(three.kref, one.kref, "DERIVED_FROM")
    for revision, reason in ((two, "published"), (one, "1 edge")):
        with pytest.raises(Conflict, match=reason) as caught:
            graph.delete_revision(revision.kref)
        assert caught.value.field == "force"
    assert graph.stats()["revisions"] == 3
    assert graph.delete_revision(two.kref, force=True).tags == ["published"]  # as it was
    assert graph.delete_revision(one.kref, force=True).number == 1
    assert graph.get_edges(three.kref).items == []  # its edges went with it
    with pytest.raises(NotFound):
        graph.revision_by_tag(item, "published")
    assert [e["routing_key"] for e in graph.events(limit=1000)].count("revision.deleted") == 2


def test_a_bundle_revision_is_never_deleted(graph: GraphStore, space: str, item: str) -> None:
    bundle = graph.create_bundle(space, "set")
    graph.add_bundle_member(bundle.kref, item)
    with pytest.raises(Conflict, match="bundle"):
        graph.delete_revision(bundle.kref + "?r=2", force=True)


def test_batch_reads_revisions_and_tag_holders_in_order_and_lists_the_misses(graph: GraphStore, item: str,
                                                                              space: str) -> None:
    one, two = graph.create_revision(item), graph.create_revision(item)
    graph.tag_revision(one.kref, "evidence:official&x")  # any tag text: no kref round trip
    other = graph.create_item(space, "other", "conversation").kref
    found, missing = graph.batch_revisions([two.kref, item + "?r=7"], [item, other], "evidence:official&x")
    assert [r.kref for r in found] == [two.kref, one.kref]
    assert missing == [("revision_krefs[1]", item + "?r=7"), ("item_krefs[1]", other)]
    assert graph.revision_by_tag(item, "evidence:official&x").number == 1
    with pytest.raises(InvalidArgument) as caught:
        graph.batch_revisions([], [item, "kref://x/../y"])
    assert caught.value.field == "item_krefs[1]"


def test_batch_by_item_answers_as_one_lookup_per_item_does(graph: GraphStore, space: str) -> None:
    """The batch reads every item's tag holder in one query; what it answers is what revision_by_tag answers,
    tags and all, in the order asked, duplicates included, misses listed."""
    items = [graph.create_item(space, f"m{i}", "conversation").kref for i in range(6)]
    for i, item in enumerate(items[:5]):
        for _ in range(i % 3 + 1):
            graph.create_revision(item, {"i": str(i)})
    graph.tag_revision(items[1] + "?r=1", "published")
    graph.set_deprecated(items[2], True)
    asked = [items[3], items[1], items[5], items[3], items[0], items[2]]
    for tag in ("latest", "published"):
        found, missing = graph.batch_revisions([], asked, tag)
        expected = []
        for kref in asked:
            with contextlib.suppress(NotFound):
                expected.append(graph.revision_by_tag(kref, tag))
        assert [(r.kref, sorted(r.tags), r.metadata) for r in found] == \
            [(r.kref, sorted(r.tags), r.metadata) for r in expected]
        assert [k for _, k in missing] == [k for k in asked if k not in {r.item_kref for r in expected}]


def test_current_revisions_are_the_same_by_key_lookups_and_by_one_scan(graph: GraphStore,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    graph.ensure_space("/Current/notes")
    items = [graph.create_item("/Current/notes", f"n{n}", "note").kref for n in range(3)]
    for kref in items:
        graph.create_revision(kref, {"v": "1"})
        graph.create_revision(kref, {"v": "2"})
    graph.tag_revision(items[0] + "?r=1", "published")  # published wins over latest
    asked = [*items, "kref://Current/notes/missing.note"]
    by_keys = graph.current_revisions(asked)
    monkeypatch.setattr(revisions, "CURRENT_BY_KEY_UP_TO", 0)
    by_scan = graph.current_revisions(asked)
    assert {k: (r.kref, sorted(r.tags)) for k, r in by_keys.items()} == \
        {k: (r.kref, sorted(r.tags)) for k, r in by_scan.items()}
    assert [by_keys[k].number for k in items] == [1, 2, 2] and sorted(by_keys) == sorted(items)
