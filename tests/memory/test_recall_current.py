"""Recall shows each item's current revision (published, else latest) as the graph says, although it picks
that revision from the search index's rows and reads it by primary key (memory/recall.py ``_current``): after
a stacked store, a new revision, a tag moved through the graph API, a deprecation and a deletion; and on a
mixed graph the new read gives exactly what the graph's own ``current_revisions`` gives, for every item.
Through the official MCP client against the in-process app on real Kùzu and LanceDB."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.inprocess import InProcess, serve_in_process
from tests.mcp_api.clients import call, in_http_session


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with serve_in_process(tmp_path_factory.mktemp("current") / "data", None) as running:
        running.services.memory_api.recaller.key_reads_from = 0  # the index's read at any size (a 100k-item path)
        yield running


def run(app: InProcess, steps: Any) -> Any:
    return in_http_session(app.base_url, steps)


async def shown(session: Any, query: str, item_kref: str) -> dict[str, Any] | None:
    """The recall result of ``item_kref`` for ``query`` (None when recall does not show the item)."""
    found = await call(session, "kumiho_memory_recall", query=query, limit=10)
    return next((r for r in found["results"] if r["item_kref"] == item_kref), None)


def test_recall_shows_the_stacked_revision_then_a_new_one_then_the_one_tagged_published(app: InProcess) -> None:
    text = ("The observatory's falcon telescope is calibrated every Tuesday at dusk by the night crew, "
            "using the quartz reference lamp.")
    query = "falcon telescope calibration quartz lamp"

    async def steps(session: Any) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        one = await call(session, "kumiho_memory_store", user_text=text, title="Falcon telescope calibration",
                         space_path="astro", memory_type="fact")
        two = await call(session, "kumiho_memory_store", title="Falcon telescope calibration",
                         user_text=text.replace("Tuesday", "Thursday"), space_path="astro", memory_type="fact")
        seen["one"], seen["two"] = one, two
        seen["after_stack"] = await shown(session, query, one["item_kref"])  # right after: staged, not synced
        three = await call(session, "kumiho_create_revision", item_kref=one["item_kref"], metadata={
            "title": "Falcon telescope calibration", "summary": text.replace("Tuesday", "Friday"),
            "memory_type": "fact"})
        seen["three"] = three
        seen["after_revision"] = await shown(session, query, one["item_kref"])
        await call(session, "kumiho_tag_revision", revision_kref=one["revision_kref"], tag="published")
        seen["after_tag_move"] = await shown(session, query, one["item_kref"])
        return seen

    seen = run(app, steps)
    assert seen["two"]["stacked"] is True and seen["two"]["revision_kref"].endswith("?r=2"), seen["two"]
    stacked = seen["after_stack"]
    assert stacked is not None and stacked["kref"] == seen["two"]["revision_kref"], stacked
    assert "Thursday" in stacked["summary"] and "published" in stacked["tags"]
    # r=3 is only latest: the published r=2 is still what recall shows
    revised = seen["after_revision"]
    assert revised is not None and revised["kref"] == seen["two"]["revision_kref"], revised
    # published moved back to r=1 through the graph API: recall follows the tag
    moved = seen["after_tag_move"]
    assert moved is not None and moved["kref"] == seen["one"]["revision_kref"], moved
    assert "Tuesday" in moved["summary"] and "published" in moved["tags"] and "latest" not in moved["tags"]


def test_recall_shows_the_latest_revision_of_an_item_nobody_published(app: InProcess) -> None:
    query = "heron greenhouse irrigation valve"

    async def steps(session: Any) -> tuple[str, dict[str, Any] | None]:
        await call(session, "kumiho_create_space", project_name="CognitiveMemory", space_name="garden")
        item = (await call(session, "kumiho_create_item", space_path="/CognitiveMemory/garden",
                           item_name="heron-valve", kind="conversation"))["item"]["kref"]
        for day in ("Monday", "Wednesday"):
            await call(session, "kumiho_create_revision", item_kref=item, metadata={
                "title": "Heron greenhouse irrigation", "memory_type": "fact",
                "summary": f"The heron greenhouse irrigation valve opens on {day} mornings."})
        return item, await shown(session, query, item)

    item, found = run(app, steps)
    assert found is not None and found["kref"] == item + "?r=2", found
    assert "Wednesday" in found["summary"] and found["tags"] == ["latest"]


def test_recall_drops_an_item_once_it_is_deprecated_or_deleted(app: InProcess) -> None:
    query = "pelican ferry timetable harbour"

    async def steps(session: Any) -> dict[str, Any]:
        seen: dict[str, Any] = {}
        gone = await call(session, "kumiho_memory_store", title="Pelican ferry timetable", memory_type="fact",
                          space_path="travel", user_text="The pelican ferry leaves the harbour at 07:15 on weekdays.")
        hidden = await call(session, "kumiho_memory_store", title="Pelican ferry harbour parking",
                            memory_type="fact", space_path="travel",
                            user_text="Parking at the pelican ferry harbour is free before 06:00 on the timetable.")
        seen["before"] = [await shown(session, query, m["item_kref"]) for m in (gone, hidden)]
        await call(session, "kumiho_deprecate_item", item_kref=hidden["item_kref"], deprecated=True)
        seen["deprecated"] = await shown(session, query, hidden["item_kref"])
        await call(session, "kumiho_delete_item", item_kref=gone["item_kref"], force=True)
        seen["deleted"] = await shown(session, query, gone["item_kref"])
        return seen

    seen = run(app, steps)
    assert all(found is not None for found in seen["before"]), seen["before"]
    assert seen["deprecated"] is None and seen["deleted"] is None, seen


def test_the_index_read_gives_what_the_graph_tag_join_gives_for_every_item(app: InProcess) -> None:
    """A mixed graph (the memories above, plus items with several revisions, a published older revision, a
    custom tag, a deprecated item, untagged older revisions): the same Revision, tags included, for every item."""

    async def steps(session: Any) -> None:
        await call(session, "kumiho_create_space", project_name="CognitiveMemory", space_name="mixed")
        for n in range(6):
            item = (await call(session, "kumiho_create_item", space_path="/CognitiveMemory/mixed",
                               item_name=f"mixed-{n}", kind="conversation"))["item"]["kref"]
            for r in range(n % 3 + 1):
                await call(session, "kumiho_create_revision", item_kref=item,
                           metadata={"summary": f"mixed memory {n} revision {r + 1}", "memory_type": "fact"})
            if n % 3 == 2:
                await call(session, "kumiho_tag_revision", revision_kref=item + "?r=1", tag="published")
            if n == 4:
                await call(session, "kumiho_tag_revision", revision_kref=item + "?r=2", tag="reviewed")
            if n == 5:
                await call(session, "kumiho_deprecate_item", item_kref=item, deprecated=True)

    run(app, steps)
    services = app.services
    services.index_worker.wait_synced()
    recaller = services.memory_api.recaller
    items = sorted({kref.rsplit("?r=", 1)[0] for kref in services.index.resident().krefs()})
    assert len(items) >= 8, items  # the mixed ones and the first tests' (the deleted one is gone)
    assert set(services.index.current_of(items)) == set(items)  # the index's choice is used for all of them
    assert recaller._current(items) == services.graph.current_revisions(items)
    # items the index does not know fall back to the graph's read
    unknown = "kref://CognitiveMemory/mixed/never-indexed.conversation"
    assert recaller._current([*items[:3], unknown]) == services.graph.current_revisions([*items[:3], unknown])


def test_revisions_by_kref_reads_each_revision_with_the_given_tags(app: InProcess) -> None:
    graph = app.services.graph
    items = sorted({k.rsplit("?r=", 1)[0] for k in app.services.index.resident().krefs()})[:4]
    current = graph.current_revisions(items)
    tagged = {r.kref: tuple(r.tags) for r in current.values()}
    missing = "kref://CognitiveMemory/mixed/mixed-0.conversation?r=99"
    read = graph.revisions_by_kref({**tagged, missing: ("latest",), "not a kref": ()})
    assert read == {r.kref: r for r in current.values()}
