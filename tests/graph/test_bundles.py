"""Bundles collect items; every membership change is a bundle revision, readable as history."""

from __future__ import annotations

import pytest

from appliance.errors import AlreadyExists, InvalidArgument, NotFound
from appliance.graph import GraphStore


def test_membership_over_bundle_revisions(graph: GraphStore, space: str) -> None:
    bundle = graph.create_bundle(space, "topic", {"purpose": "demo"})
    assert bundle.kind == "bundle" and bundle.metadata == {"purpose": "demo"}
    a = graph.create_item(space, "a", "conversation").kref
    b = graph.create_item(space, "b", "conversation").kref
    assert graph.add_bundle_member(bundle.kref, a) == 2
    assert graph.add_bundle_member(bundle.kref, b, {"why": "related"}) == 3
    assert graph.remove_bundle_member(bundle.kref, a) == 4
    members, number = graph.bundle_members(bundle.kref)
    assert ([m.item_kref for m in members], number) == ([b], 4)
    as_of_3, _ = graph.bundle_members(bundle.kref, revision_number=3)
    assert [m.item_kref for m in as_of_3] == [a, b] and as_of_3[1].added_in_revision == 3
    history = graph.bundle_history(bundle.kref)
    assert [(h.revision_number, h.action, h.member_item_kref) for h in history] == [
        (1, "CREATED", ""), (2, "ADDED", a), (3, "ADDED", b), (4, "REMOVED", a)]
    assert history[2].metadata == {"why": "related"}


def test_re_adding_after_removal_and_duplicate_rules(graph: GraphStore, space: str) -> None:
    bundle = graph.create_bundle(space, "topic").kref
    a = graph.create_item(space, "a", "conversation").kref
    graph.add_bundle_member(bundle, a)
    with pytest.raises(AlreadyExists):
        graph.add_bundle_member(bundle, a)
    graph.remove_bundle_member(bundle, a)
    with pytest.raises(NotFound):
        graph.remove_bundle_member(bundle, a)
    graph.add_bundle_member(bundle, a)
    assert [m.item_kref for m in graph.bundle_members(bundle)[0]] == [a]


def test_a_bundle_cannot_contain_itself_and_must_be_a_bundle(graph: GraphStore, space: str) -> None:
    bundle = graph.create_bundle(space, "topic").kref
    item = graph.create_item(space, "a", "conversation").kref
    with pytest.raises(InvalidArgument, match="itself"):
        graph.add_bundle_member(bundle, bundle)
    with pytest.raises(InvalidArgument, match="not a bundle"):
        graph.add_bundle_member(item, bundle)


def test_creating_a_bundle_twice_keeps_one_history(graph: GraphStore, space: str) -> None:
    graph.create_bundle(space, "topic")
    graph.create_bundle(space, "topic")
    assert len(graph.bundle_history(f"kref:/{space}/topic.bundle")) == 1
    assert graph.get_bundle(f"kref:/{space}/topic.bundle").item_name == "topic"
