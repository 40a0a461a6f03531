"""The Memory API's batch store, ``POST /api/v1/memories/batch``: up to 100 entries in one transaction (all or
none), each as ``POST /api/v1/memories`` takes it; the index embeds them afterwards."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from appliance.services.memory_api import MAX_BATCH
from tests.memory_api.conftest import API, Memories
from tests.memory_api.test_rest import problem


def batch(mem: Memories, entries: list[dict[str, Any]]) -> dict[str, Any]:
    response = mem.client.post(f"{API}/batch", json={"entries": entries})
    assert response.status_code == 201, response.text
    return response.json()  # type: ignore[no-any-return]


def test_a_batch_stores_its_entries_in_order_and_a_key_stored_again_gets_a_revision(mem: Memories) -> None:
    answer = batch(mem, [
        {"key": "batch-editor", "content": "Prefers vim keybindings in every editor.", "category": "core"},
        {"key": "assistant_resp_1", "content": "An auto-saved answer."},  # the seed's filters skip it
        {"key": "batch-deploy", "content": "Deploys go out on Tuesdays after the review.", "namespace": "ops",
         "session_id": "s1", "importance": 0.5, "metadata": {"source": "bulk"}},
    ])
    assert (answer["stored"], answer["skipped"]) == (2, 1)
    first, skipped, third = answer["results"]
    assert first["stored"] and first["created"] and first["entry"]["key"] == "batch-editor"
    assert not skipped["stored"] and skipped["skipped"] and skipped["entry"] is None
    assert third["entry"]["namespace"] == "ops" and third["entry"]["metadata"] == {"source": "bulk"}
    assert third["entry"]["importance"] == 0.5 and third["entry"]["session_id"] == "s1"
    assert mem.client.get(f"{API}/batch-deploy", params={"namespace": "ops"}).json()["content"].startswith("Deploys")

    again = batch(mem, [{"key": "batch-editor", "content": "Prefers emacs keybindings now."}])
    assert again["results"][0]["created"] is False
    assert again["results"][0]["entry"]["content"] == "Prefers emacs keybindings now."
    revisions = mem.services.graph.list_revisions(first["entry"]["kref"]).items
    assert [r.number for r in revisions] == [2, 1]

    assert mem.services.index_worker.wait_idle(60)  # the index embeds a batch in the background
    assert [e["key"] for e in mem.recall("which editor keybindings", limit=1)] == ["batch-editor"]


def test_a_full_batch_with_keys_that_slug_alike_gives_each_key_its_own_entry(mem: Memories) -> None:
    fillers = [{"key": f"filler-{i}", "content": f"filler entry {i}", "namespace": "fill"}
               for i in range(MAX_BATCH - 2)]
    answer = batch(mem, [{"key": "Slug Twin", "content": "the first"}, {"key": "slug-twin", "content": "the second"},
                         *fillers])
    assert answer["stored"] == MAX_BATCH
    krefs = [r["entry"]["kref"] for r in answer["results"]]
    assert len(set(krefs)) == MAX_BATCH
    assert mem.count(namespace="fill") == MAX_BATCH - 2
    assert mem.client.get(f"{API}/Slug Twin").json()["content"] == "the first"
    assert mem.client.get(f"{API}/slug-twin").json()["content"] == "the second"


def test_a_bad_entry_refuses_the_whole_batch_naming_it(mem: Memories) -> None:
    before = mem.count()
    good = {"key": "batch-good", "content": "fine"}
    problem(mem.client.post(f"{API}/batch", json={"entries": [good, {"key": "x", "content": "y",
                                                                      "category": "Bad Label"}]}),
            400, "entries[1].category")
    problem(mem.client.post(f"{API}/batch", json={"entries": [good, {"key": "batch-good", "content": "again"}]}),
            400, "entries[1].key")
    problem(mem.client.post(f"{API}/batch", json={"entries": [good, {"key": "x", "content": "y",
                                                                      "supersedes": "no-such-key"}]}),
            404, "entries[1].supersedes")
    problem(mem.client.post(f"{API}/batch", json={"entries": [good, {"key": "x", "content": "y",
                                                                      "superseded_by": "no-such-key"}]}),
            404, "entries[1].superseded_by")
    too_many = [{"key": f"k{i}", "content": "c"} for i in range(MAX_BATCH + 1)]
    problem(mem.client.post(f"{API}/batch", json={"entries": too_many}), 400)
    problem(mem.client.post(f"{API}/batch", json={"entries": []}), 400)
    assert mem.count() == before
    assert mem.client.get(f"{API}/batch-good").status_code == 404


def test_limits_count_the_entries_before_each_in_the_batch(
        make_app: Callable[..., AbstractContextManager[Memories]]) -> None:
    with make_app(memory={"policy": {"max_entries_per_namespace": 2}}) as app:
        refused = problem(app.client.post(f"{API}/batch", json={"entries": [
            {"key": k, "content": f"entry {k}"} for k in ("a", "b", "c")]}), 409, "entries[2].namespace")
        assert "max_entries_per_namespace" in refused["detail"]
        assert app.count() == 0  # all or none
        assert batch(app, [{"key": k, "content": f"entry {k}"} for k in ("a", "b")])["stored"] == 2
        assert batch(app, [{"key": "a", "content": "entry a, again"}])["results"][0]["created"] is False


def test_limits_name_the_entry_over_its_category_limit(
        make_app: Callable[..., AbstractContextManager[Memories]]) -> None:
    with make_app(memory={"policy": {"max_entries_per_category": 1}}) as app:
        refused = problem(app.client.post(f"{API}/batch", json={"entries": [
            {"key": "a", "content": "entry a", "category": "core"},
            {"key": "b", "content": "entry b", "category": "daily"},
            {"key": "c", "content": "entry c", "category": "core"}]}), 409, "entries[2].category")
        assert "max_entries_per_category" in refused["detail"]
        assert app.count() == 0


def test_a_failed_artifact_file_leaves_no_file_and_nothing_in_the_graph(
        make_app: Callable[..., AbstractContextManager[Memories]]) -> None:
    with make_app() as app:
        api = app.services.memory_api
        root = api.writer.artifact_root
        # a plain file where the "blocked" namespace's folder would go: its entries' files cannot be created,
        # while the files of the other namespace's entries (written at the same time) are
        blocked = root.joinpath(*api.space("blocked").strip("/").split("/"))
        blocked.parent.mkdir(parents=True, exist_ok=True)
        blocked.write_text("not a folder")
        files_before = sorted(p for p in root.rglob("*") if p.is_file())
        stats_before = app.services.graph.stats()
        fine = [{"key": f"fine-{i}", "content": f"fine entry {i}", "namespace": "fine"} for i in range(20)]
        response = app.client.post(f"{API}/batch", json={"entries": [
            *fine[:10], {"key": "stuck", "content": "cannot be written", "namespace": "blocked"}, *fine[10:]]})
        assert response.status_code >= 500, response.text
        assert "Traceback" not in response.text
        assert sorted(p for p in root.rglob("*") if p.is_file()) == files_before
        assert app.services.graph.stats() == stats_before
        assert app.count(namespace="fine") == 0
        blocked.unlink()  # the same batch goes through once the folder can be made
        assert batch(app, [*fine, {"key": "stuck", "content": "written now", "namespace": "blocked"}])["stored"] == 21
        assert blocked.is_dir()
