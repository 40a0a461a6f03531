"""Artifacts: named pointers per revision, the default artifact, reverse lookup."""

from __future__ import annotations

import pytest

from appliance.errors import AlreadyExists, InvalidArgument, NotFound
from appliance.graph import GraphStore


@pytest.fixture
def revision(graph: GraphStore, space: str) -> str:
    return graph.create_revision(graph.create_item(space, "run", "action").kref).kref


def test_artifacts_are_named_per_revision(graph: GraphStore, revision: str) -> None:
    art = graph.create_artifact(revision, "stdout.txt", "file:///data/stdout.txt", {"size": "10"})
    assert art.kref == revision + "&a=stdout.txt" and art.revision_kref == revision
    assert art.item_kref == revision.split("?")[0]
    assert graph.create_artifact(revision, "stdout.txt", "elsewhere").location == "file:///data/stdout.txt"
    with pytest.raises(AlreadyExists):
        graph.create_artifact(revision, "stdout.txt", "x", exists_error=True)


def test_default_artifact_resolves_a_revision_or_item_kref(graph: GraphStore, revision: str) -> None:
    graph.create_artifact(revision, "a.txt", "/a")
    graph.create_artifact(revision, "b.txt", "/b")
    assert graph.get_artifact(revision).name == "a.txt"  # no default yet: the first one
    graph.set_default_artifact(revision, "b.txt")
    assert graph.get_revision(revision).default_artifact == "b.txt"
    assert graph.get_artifact(revision.split("?")[0]).location == "/b"
    with pytest.raises(NotFound):
        graph.set_default_artifact(revision, "missing.txt")


def test_listing_reverse_lookup_metadata_and_delete(graph: GraphStore, revision: str) -> None:
    graph.create_artifact(revision, "a.txt", "/shared/path")
    graph.create_artifact(revision, "b.txt", "/other")
    graph.set_default_artifact(revision, "a.txt")
    assert [a.name for a in graph.list_artifacts(revision)] == ["a.txt", "b.txt"]
    assert [a.name for a in graph.artifacts_by_location("/shared/path")] == ["a.txt"]
    assert graph.update_artifact_metadata(revision + "&a=b.txt", {"k": "v"}).metadata == {"k": "v"}
    graph.set_deprecated(revision + "&a=b.txt")
    assert [a.name for a in graph.list_artifacts(revision, include_deprecated=False)] == ["a.txt"]
    assert graph.delete_artifact(revision + "&a=a.txt")
    assert graph.get_revision(revision).default_artifact is None
    with pytest.raises(NotFound):
        graph.get_artifact(revision + "&a=a.txt")


def test_bad_artifact_input_names_the_field(graph: GraphStore, revision: str) -> None:
    with pytest.raises(InvalidArgument) as caught:
        graph.create_artifact(revision, "no/slashes", "/x")
    assert caught.value.field == "name"
    with pytest.raises(InvalidArgument) as caught:
        graph.create_artifact(revision, "ok.txt", "  ")
    assert caught.value.field == "location"
