"""Search over Kumiho's gRPC, with the bundled embedding model: the score scale the clients' thresholds
assume (an item searched by its own title ≥ 0.6, a duplicate worded differently ≥ 0.55 and other memories
below that, unrelated ≤ 0.4),
typo tolerance, the item and revision legs (``matched_in``), filters, paging, full-text statistics kept per
project, and memory packets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from appliance.grpc_api.descriptor import message
from tests.appliance_process import Running, serve
from tests.grpc_api.conftest import Stub, msg, rpc_error
from tests.mcp_api.clients import call, in_http_session

MEMORIES = {  # item name → (title, summary): realistic memories of one agent, mixed topics
    "coffee-habit": ("Alice's coffee habit", "Alice drinks a flat white every morning before work."),
    "tax-return": ("Quarterly VAT return", "The quarterly VAT return is due at the end of March."),
    "transport-plan": ("Transport for the offsite", "The team takes the 8:15 train to Lyon for the offsite."),
    "db-migration": ("Database migration", "We moved the orders table from MySQL to PostgreSQL in June."),
    "dog-vet": ("Vet appointment", "Bob's dog Rex has a vet appointment on Friday at 10."),
    "deploy-rule": ("Deploy rule", "Never deploy to production on Fridays; wait for Monday."),
    "hiking-trip": ("Hiking trip", "Alice and Bob plan a hiking trip in the Alps in August."),
    "budget-review": ("Budget review", "The marketing budget review moved to the second week of May."),
}


@pytest.fixture(scope="module")
def appliance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    data_dir: Path = tmp_path_factory.mktemp("grpc-search") / "data"
    with serve(data_dir, KUMIHO_CE_SEARCH__EMBEDDER="minilm") as running:
        yield running
        running.stop()


def tools(appliance: Running, *steps: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Run MCP tools in one session (revisions and tags are another slice's RPCs; the MCP tools write the same
    graph)."""
    async def run(session: Any) -> list[dict[str, Any]]:
        return [await call(session, tool, **args) for tool, args in steps]

    results: list[dict[str, Any]] = in_http_session(appliance.base_url, run)
    assert not any("error" in r for r in results), results
    return results


def remember(stub: Stub, appliance: Running, project: str, space: str, memories: dict[str, tuple[str, str]]) -> None:
    stub.CreateProject(message("CreateProjectRequest")(name=project), timeout=30)
    stub.CreateSpace(msg("CreateSpaceRequest", parent_path=f"/{project}", space_name=space), timeout=30)
    steps = []
    for name, (title, summary) in memories.items():
        stub.CreateItem(msg("CreateItemRequest", parent_path=f"/{project}/{space}", item_name=name,
                            kind="conversation"), timeout=30)
        steps.append(("kumiho_create_revision", {"item_kref": f"kref://{project}/{space}/{name}.conversation",
                                                 "metadata": {"title": title, "summary": summary}}))
    tools(appliance, *steps)


@pytest.fixture(scope="module")
def films(stub: Stub, appliance: Running) -> str:
    remember(stub, appliance, "Films", "mem", MEMORIES)
    return "Films"


def search(stub: Stub, query: str, **fields: Any) -> Any:
    return stub.Search(msg("SearchRequest", query=query, **fields), timeout=60)


def scores(answer: Any) -> dict[str, float]:
    return {r.item.item_name: r.score for r in answer.results}


def test_the_score_scale_the_clients_thresholds_assume(stub: Stub, films: str) -> None:
    deep = {"context_filter": f"{films}/mem", "kind_filter": "conversation", "include_revision_metadata": True}
    for title, name in (("Alice's coffee habit", "coffee-habit"), ("Database migration", "db-migration")):
        assert scores(search(stub, title, **deep))[name] >= 0.6  # an item searched by its own title
    # a duplicate worded differently, under another title, stacks (≥ 0.55; the same memory type is asked
    # for) onto the memory it repeats, and onto no other memory of the project, even one about Alice too
    for text, name in (
            ("Alice's morning drink: before she starts work Alice always has a flat white coffee.", "coffee-habit"),
            ("No Friday releases: production deploys wait until Monday.", "deploy-rule"),
            ("Summer mountain walk: Bob and Alice want to go hiking in the Alps.", "hiking-trip")):
        found = scores(search(stub, text, **deep))
        assert found[name] >= 0.55
        assert all(score < 0.55 for other, score in found.items() if other != name), found
    for text in ("quantum chromodynamics lecture notes", "The recipe needs two eggs and a cup of flour."):
        assert all(score <= 0.4 for score in scores(search(stub, text, **deep)).values())  # unrelated
    answer = search(stub, "Alice's coffee habit", **deep)
    assert answer.search_mode == "hybrid" and "revision" in answer.results[0].matched_in


def test_typos_are_tolerated_in_names_and_texts(stub: Stub, films: str) -> None:
    by_name = search(stub, "transprot", context_filter=films)
    assert by_name.search_mode == "fulltext"
    assert [(r.item.item_name, list(r.matched_in)) for r in by_name.results] == [("transport-plan", ["item"])]
    by_text = scores(search(stub, "postgress migraton", context_filter=films, include_revision_metadata=True))
    assert max(by_text, key=by_text.__getitem__) == "db-migration"


def test_filters_kind_context_prefix_and_deprecation(stub: Stub, appliance: Running, films: str) -> None:
    stub.CreateItem(msg("CreateItemRequest", parent_path=f"/{films}/mem", item_name="budget", kind="sheet"),
                    timeout=30)
    remember(stub, appliance, f"{films}-b", "mem", {"budget-plan": ("Budget plan", "The budget plan for Q3.")})
    everywhere = scores(search(stub, "budget", context_filter=films))  # a string prefix: Films-b too
    assert set(everywhere) == {"budget-review", "budget", "budget-plan"}
    assert set(scores(search(stub, "budget", context_filter=f"{films}/"))) == {"budget-review", "budget"}
    assert set(scores(search(stub, "budget", context_filter=films, kind_filter="sheet"))) == {"budget"}
    kref = message("Kref")(uri=f"kref://{films}/mem/budget.sheet")
    stub.SetDeprecated(msg("SetDeprecatedRequest", kref=kref, deprecated=True), timeout=30)
    try:
        assert "budget" not in scores(search(stub, "budget", context_filter=f"{films}/"))
        assert "budget" in scores(search(stub, "budget", context_filter=f"{films}/", include_deprecated=True))
    finally:
        stub.SetDeprecated(msg("SetDeprecatedRequest", kref=kref, deprecated=False), timeout=30)
    floor = search(stub, "budget review", context_filter=f"{films}/", min_score=0.7)
    assert floor.results and all(r.score >= 0.7 for r in floor.results)


def test_pages_with_cursors_to_the_end(stub: Stub, films: str) -> None:
    for i in range(5):
        stub.CreateItem(msg("CreateItemRequest", parent_path=f"/{films}/mem", item_name=f"hero-{i}", kind="model"),
                        timeout=30)
    seen, cursor = [], ""
    for _ in range(10):
        answer = search(stub, "hero", context_filter=f"{films}/mem", kind_filter="model",
                        pagination=msg("PaginationRequest", page_size=2, cursor=cursor))
        seen += [r.item.item_name for r in answer.results]
        assert answer.pagination.total_count == 5
        if not answer.pagination.has_more:
            break
        cursor = answer.pagination.next_cursor
    assert sorted(seen) == [f"hero-{i}" for i in range(5)]
    forged = rpc_error(stub.Search, msg("SearchRequest", query="hero", pagination=msg("PaginationRequest",
                                                                                       cursor="abc")), timeout=30)
    assert forged.code() == grpc.StatusCode.INVALID_ARGUMENT and "cursor" in (forged.details() or "")
    for fields, field in (({"query": "  "}, "query"), ({"query": "x" * 8193}, "query"),
                          ({"query": "hero", "context_filter": "P" * 257}, "context_filter"),
                          ({"query": "hero", "memory_project": films, "memory_revision_limit": 1001},
                           "memory_revision_limit"),
                          ({"query": "hero", "pagination": msg("PaginationRequest", page_size=1001)}, "page_size")):
        refused = rpc_error(stub.Search, msg("SearchRequest", **fields), timeout=30)
        assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT and field in (refused.details() or ""), fields


def test_statistics_are_kept_per_project(stub: Stub, appliance: Running) -> None:
    remember(stub, appliance, "Zoo", "notes", {
        "quokka": ("Quokka enclosure", "The quokka enclosure needs new shade sails before summer."),
        "penguins": ("Penguin feeding", "Penguins are fed herring twice a day at the zoo."),
        "tickets": ("Ticket prices", "Adult tickets cost twelve euros; children enter free."),
    })
    query = {"query": "quokka enclosure shade", "context_filter": "Zoo", "include_revision_metadata": True}
    before = scores(search(stub, **query))["quokka"]
    # another project full of the same words: with shared statistics their document frequency would lower
    # the score in project Zoo (the official CE shares them); here Zoo's score does not move
    remember(stub, appliance, "Zoo2", "notes", {
        f"q{i}": (f"Quokka enclosure {i}", f"Quokka enclosure shade sails, inspection number {i}.")
        for i in range(12)})
    after = scores(search(stub, **query))["quokka"]
    assert after == pytest.approx(before, abs=1e-4)
    assert scores(search(stub, **{**query, "context_filter": "Zoo2"}))  # the other project is searchable too


def test_memory_packets_carry_the_published_else_latest_revision(stub: Stub, appliance: Running,
                                                                  films: str) -> None:
    item = f"kref://{films}/mem/dog-vet.conversation"
    tools(appliance, ("kumiho_tag_revision", {"revision_kref": f"{item}?r=1", "tag": "published"}),
          ("kumiho_create_revision", {"item_kref": item, "metadata": {
              "title": "Vet appointment moved", "summary": "Rex's vet appointment moved to Saturday at 11."}}))
    query = {"context_filter": f"{films}/mem", "include_revision_metadata": True, "memory_project": films}
    answer = search(stub, "vet appointment Rex", memory_revision_limit=1, **query)
    assert answer.memory_project_validated
    first = answer.results[0]
    assert first.item.item_name == "dog-vet" and first.memory_revision_resolved
    assert first.memory_revision.number == 1 and first.memory_revision.published  # published beats latest
    assert all(not r.memory_revision_resolved and not r.HasField("memory_revision") for r in answer.results[1:])
    tools(appliance, ("kumiho_untag_revision", {"revision_kref": f"{item}?r=1", "tag": "published"}))
    latest = search(stub, "vet appointment Rex", memory_revision_limit=10, **query).results[0]
    assert latest.memory_revision.number == 2 and latest.memory_revision.latest
    unknown = search(stub, "vet appointment", context_filter=films, memory_project="NoSuchProject")
    assert not unknown.memory_project_validated
    assert all(not r.memory_revision_resolved for r in unknown.results)
