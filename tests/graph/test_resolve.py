"""resolve_kref: projects, spaces, items (latest or a tag), revisions, artifacts; D8 short krefs."""

from __future__ import annotations

import pytest

from appliance.errors import AmbiguousKref, InvalidArgument, NotFound
from appliance.graph import GraphStore


@pytest.fixture
def populated(graph: GraphStore) -> GraphStore:
    graph.ensure_space("/Revka/AgentPool")
    item = graph.create_item("/Revka/AgentPool", "transport", "conversation").kref
    for _ in range(4):
        graph.create_revision(item)
    graph.tag_revision(item + "?r=2", "published")
    graph.create_artifact(item + "?r=4", "chat_io", "/tmp/chat.json")
    graph.ensure_space("/CognitiveMemory/AgentPool")
    graph.create_revision(graph.create_item("/CognitiveMemory/AgentPool", "solo", "conversation").kref)
    return graph


def test_each_kind_of_kref(populated: GraphStore) -> None:
    assert populated.resolve("kref://Revka").target == "project"
    space = populated.resolve("kref://Revka/AgentPool")
    assert space.target == "space" and space.space.path == "/Revka/AgentPool"  # type: ignore[union-attr]
    item = populated.resolve("kref://Revka/AgentPool/transport.conversation")
    assert item.target == "item" and item.revision.number == 4  # type: ignore[union-attr]
    tagged = populated.resolve("kref://Revka/AgentPool/transport.conversation?t=published")
    assert tagged.revision.number == 2  # type: ignore[union-attr]
    revision = populated.resolve("kref://Revka/AgentPool/transport.conversation?r=3")
    assert revision.target == "revision" and revision.kref.endswith("?r=3")
    artifact = populated.resolve("kref://Revka/AgentPool/transport.conversation?r=4&a=chat_io")
    assert artifact.target == "artifact" and artifact.artifact.location == "/tmp/chat.json"  # type: ignore[union-attr]


def test_seed_short_form_resolves_to_the_canonical_kref(populated: GraphStore) -> None:
    """D8: kref://Revka/AgentPool/transport?r=4 names the one item called transport there."""
    found = populated.resolve("kref://Revka/AgentPool/transport?r=4")
    assert found.kref == "kref://Revka/AgentPool/transport.conversation?r=4"


def test_short_form_implies_the_default_project(populated: GraphStore) -> None:
    found = populated.resolve("kref://AgentPool/solo")
    assert found.kref == "kref://CognitiveMemory/AgentPool/solo.conversation"


def test_ambiguous_short_form_lists_candidates(populated: GraphStore) -> None:
    populated.create_item("/Revka/AgentPool", "transport", "skill")
    with pytest.raises(AmbiguousKref) as caught:
        populated.resolve("kref://Revka/AgentPool/transport?r=1")
    assert caught.value.candidates == ["kref://Revka/AgentPool/transport.conversation",
                                       "kref://Revka/AgentPool/transport.skill"]
    assert "name one with its kind" in caught.value.message


def test_unknown_krefs_are_not_found(populated: GraphStore) -> None:
    for kref in ("kref://Revka/AgentPool/nothing", "kref://Revka/AgentPool/transport.conversation?r=9",
                 "kref://Revka/AgentPool/transport.conversation?r=4&a=missing",
                 "kref://Revka/AgentPool/transport.conversation?t=approved", "kref://Nobody",
                 "kref://Revka/AgentPool/nope.conversation", "kref://Revka/Nowhere/x.conversation?r=1"):
        with pytest.raises(NotFound):
            populated.resolve(kref)


def test_an_item_without_revisions_resolves_to_the_item(graph: GraphStore, space: str) -> None:
    item = graph.create_item(space, "empty", "note")
    found = graph.resolve(item.kref)
    assert found.target == "item" and found.revision is None


def test_a_space_is_not_an_item(populated: GraphStore) -> None:
    with pytest.raises(InvalidArgument, match="names a space"):
        populated.get_item("kref://Revka/AgentPool")
