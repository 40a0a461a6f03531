"""Search over a real LanceDB index: filters, typo tolerance, fusion, the outbox, repair and reindex."""

from __future__ import annotations

import shutil

from appliance.core.search import SearchFilter, SearchRequest
from appliance.search.index import SearchIndex
from tests.search.conftest import CountingEmbedder, Stack


def found(stack: Stack, query: str, **options: object) -> list[str]:
    where = options.pop("where", SearchFilter())
    hits = stack.search.search(SearchRequest(query, where, **options))  # type: ignore[arg-type]
    return [h.revision_kref.rsplit("/", 1)[1].split(".")[0] for h in hits]


def populate(stack: Stack) -> None:
    stack.memory("/P/a", "grpc", "Transport layer", "The transport layer uses gRPC over HTTP/2")
    stack.memory("/P/a/deep", "kuzu", "Graph database", "Kuzu is the embedded graph database", "decision")
    stack.memory("/P/ab", "coffee", "Morning coffee", "Alice drinks coffee every morning", "preference")
    stack.memory("/Q/x", "tea", "Afternoon tea", "Bob drinks tea and coffee in the afternoon", "preference",
                 kind="skill")
    stack.sync.run_pending()


def test_space_filters_match_whole_path_segments(stack: Stack) -> None:
    populate(stack)
    assert sorted(found(stack, "coffee transport graph", where=SearchFilter(spaces=("/P/a",)))) == ["grpc", "kuzu"]
    assert found(stack, "coffee", where=SearchFilter(spaces=("/P/ab",)), mode="text") == ["coffee"]
    assert sorted(found(stack, "coffee", where=SearchFilter(spaces=("/P/ab", "/Q")), mode="text")) == [
        "coffee", "tea"]


def test_kind_memory_type_project_and_tag_filters(stack: Stack) -> None:
    populate(stack)
    assert found(stack, "coffee", where=SearchFilter(kinds=("skill",)), mode="text") == ["tea"]
    assert sorted(found(stack, "drinks", where=SearchFilter(memory_types=("preference",)), mode="text")) == [
        "coffee", "tea"]
    assert found(stack, "coffee", where=SearchFilter(project="Q"), mode="text") == ["tea"]
    stack.graph.tag_revision("kref://P/ab/coffee.conversation?r=1", "approved")
    stack.sync.run_pending()
    assert found(stack, "coffee", where=SearchFilter(tags=("approved",)), mode="text") == ["coffee"]


def test_typos_still_find_the_memory(stack: Stack) -> None:
    populate(stack)
    assert found(stack, "transprot", mode="text") == ["grpc"]
    assert found(stack, "transprot layr", limit=1) == ["grpc"]


def test_scores_are_on_the_0_to_1_scale_and_fusion_rewards_both_legs(stack: Stack) -> None:
    populate(stack)
    hits = stack.search.search(SearchRequest("coffee every morning", limit=4))
    assert all(0.0 <= h.score <= 1.0 for h in hits)
    top = hits[0]
    assert top.revision_kref.endswith("coffee.conversation?r=1")
    assert top.vector is not None and top.text is not None
    assert top.score > max(top.vector, top.text)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_min_score_and_limit(stack: Stack) -> None:
    populate(stack)
    assert len(found(stack, "coffee", limit=2)) == 2
    hits = stack.search.search(SearchRequest("coffee", min_score=0.5, limit=10))
    assert hits and all(h.score >= 0.5 for h in hits)


def test_deprecated_memories_are_hidden_until_asked_for(stack: Stack) -> None:
    populate(stack)
    stack.graph.set_deprecated("kref://P/ab/coffee.conversation")
    assert stack.graph.pending_count() == 1  # the outbox holds the change
    stack.sync.run_pending()
    assert "coffee" not in found(stack, "coffee", mode="text")
    assert "coffee" in found(stack, "coffee", mode="text", where=SearchFilter(include_deprecated=True))
    stack.graph.set_deprecated("kref://P/ab/coffee.conversation", False)
    stack.sync.run_pending()
    assert "coffee" in found(stack, "coffee", mode="text")


def test_metadata_edits_reach_the_index(stack: Stack) -> None:
    populate(stack)
    stack.graph.update_revision_metadata("kref://P/a/grpc.conversation?r=1", {"summary": "now uses QUIC datagrams"})
    stack.sync.run_pending()
    assert found(stack, "quic datagrams", mode="text") == ["grpc"]
    assert stack.graph.pending_count() == 0


def test_a_crash_between_graph_and_index_writes_is_repaired_on_start(stack: Stack) -> None:
    populate(stack)
    # the graph commits, the process dies before the index write: simulated by never syncing
    stack.memory("/P/a", "lost", "Written before the crash", "zeppelin maintenance schedule")
    stack.graph.delete_item("kref://P/a/grpc.conversation", force=True)  # its row is now stale
    stack.open_index()  # "restart"
    assert found(stack, "zeppelin", mode="text") == []
    repair = stack.sync.repair()
    assert (repair.removed, repair.indexed) == (1, 1)
    assert found(stack, "zeppelin", mode="text") == ["lost"]
    assert "grpc" not in found(stack, "transport gRPC", mode="text")
    assert stack.index.count() == len(stack.graph.revision_krefs())


def test_a_lost_index_is_rebuilt_from_the_graph(stack: Stack) -> None:
    populate(stack)
    shutil.rmtree(stack.root / "index")
    stack.open_index()
    repair = stack.sync.repair()
    assert repair.requeued == 4 and stack.index.count() == 4
    assert found(stack, "coffee", mode="text", limit=1) == ["coffee"]


def test_reindex_rebuilds_every_row(stack: Stack) -> None:
    populate(stack)
    seen: list[tuple[int, int]] = []
    assert stack.sync.reindex(lambda done, total: seen.append((done, total))) == 4
    assert seen[-1] == (4, 4) and stack.index.count() == 4


def test_another_embedding_model_means_a_rebuild(stack: Stack) -> None:
    populate(stack)
    other = SearchIndex(stack.root / "index", 16, "another-model")
    assert other.count() == 0 and other.model_id == "another-model"


def test_an_unchanged_text_is_not_embedded_again(stack: Stack) -> None:
    populate(stack)
    counting = CountingEmbedder()  # the stack's embedder is the plain hashing one: the same vectors
    stack.sync.embedder = counting
    stack.graph.tag_revision("kref://P/ab/coffee.conversation?r=1", "published")  # not part of the text
    assert stack.sync.run_pending() == 1 and counting.calls == [0]
    stack.graph.tag_revision("kref://P/ab/coffee.conversation?r=1", "barista")  # user tags are searchable
    stack.sync.run_pending()
    assert counting.calls == [0, 1]
    assert found(stack, "barista", mode="text") == ["coffee"]
