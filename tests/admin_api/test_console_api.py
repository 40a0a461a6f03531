"""The console API (``/api/v1`` stats, graph, inspect, deprecate/restore, tags, config, jobs, model, search)
through Litestar's test client on the real app over real stores (Kùzu and LanceDB in a tmp dir)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar.testing import TestClient

from appliance.admin_api.console_reads import MAX_LISTED, TEXT_BYTES
from appliance.admin_api.console_shapes import GraphResponse
from appliance.admin_api.params import MAX_KINDS, MAX_MEMORY_TYPES
from appliance.app import Services, build_app, open_services
from appliance.config import load_settings
from appliance.core import names
from appliance.graph.revisions import NewRevision
from tests.problems import problem

BASE = "http://127.0.0.1:9190"
SECRET_TOKEN = "console-test-token-" + "t" * 24
SECRET_KEY = "console-endpoint-key-0123456789"


@dataclass
class Console:
    services: Services
    http: TestClient[Any]
    seeded: dict[str, str]

    def op(self, operation_name: str, /, **args: Any) -> dict[str, Any]:
        """A typed operation, run as the MCP tools run it."""
        return self.services.perform(operation_name, args)

    def get(self, path: str, **params: Any) -> Any:
        response = self.http.get(path, params=params)
        assert response.status_code == 200, response.text
        return response.json()

    def settle(self) -> None:
        assert self.services.index_worker.wait_idle(60), "the search index did not catch up"


def refused(response: httpx.Response, status: int, field: str) -> dict[str, Any]:
    """An RFC 9457 problem with ``status`` naming ``field`` (in its detail too)."""
    assert response.status_code == status, response.text
    body = problem(response)
    assert body.get("field") == field and field in body["detail"], body
    assert "Traceback" not in response.text
    return body


@contextmanager
def _console(data: Path) -> Iterator[Console]:
    settings = load_settings(data_dir=data, api_token=SECRET_TOKEN, search={"embedder": "hashing"},
                             inference={"chat_model": "none", "endpoint_api_key": SECRET_KEY},
                             maintenance={"dream_state_time": "", "idle_consolidation_minutes": 0})
    with open_services(settings) as services, TestClient(build_app(services), base_url=BASE) as http:
        yield Console(services, http, {})


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    with _console(tmp_path_factory.mktemp("console")) as app:
        app.seeded.update(_seed(app))
        app.settle()
        yield app


def _seed(app: Console) -> dict[str, str]:
    """Memories in two spaces and a second project, with a DERIVED_FROM chain, a supersession and a dispute."""
    store = app.op("kumiho_memory_store", space_path="work", memory_item_kind="note", memory_type="fact",
                   title="Transport port", user_text="The transport service listens on port 8080.",
                   assistant_text="Noted: port 8080.", tags=["infra"])
    derived = app.op("kumiho_memory_store", space_path="work/deep", memory_item_kind="note",
                     memory_type="decision", title="Open the firewall", user_text="Open port 8080 in the firewall.",
                     source_revision_krefs=[store["revision_kref"]])
    again = app.op("kumiho_memory_store", space_path="work/deep", memory_item_kind="note", memory_type="summary",
                   title="Firewall review", user_text="The firewall rule was reviewed.",
                   source_revision_krefs=[derived["revision_kref"]])
    old = app.op("kumiho_memory_store", space_path="home", memory_item_kind="conversation", memory_type="preference",
                 title="Tea", user_text="Prefers green tea.")
    new = app.op("kumiho_memory_store", space_path="home", memory_item_kind="conversation",
                 memory_type="preference", title="Coffee", user_text="Prefers black coffee now.")
    # the edges belief revision and fact decomposition write (no tool creates them directly)
    app.services.graph.create_edge(new["revision_kref"], old["revision_kref"], "SUPERSEDES")
    app.services.graph.create_edge(new["revision_kref"], store["revision_kref"], "CONTRADICTS")
    app.op("kumiho_create_project", name="Other")
    app.op("kumiho_create_space", project_name="Other", space_name="misc")
    other = app.op("kumiho_create_item", space_path="/Other/misc", item_name="lonely", kind="note")
    app.op("kumiho_create_revision", item_kref=other["item"]["kref"], metadata={"type": "Fact", "title": "Lonely"})
    return {"store": store["item_kref"], "store_rev": store["revision_kref"], "derived": derived["item_kref"],
            "derived_rev": derived["revision_kref"], "again_rev": again["revision_kref"], "old": old["item_kref"],
            "old_rev": old["revision_kref"], "new": new["item_kref"], "new_rev": new["revision_kref"],
            "other": other["item"]["kref"], "artifact": store["artifact_kref"]}


# -- stats -------------------------------------------------------------------------------------------------------
def test_stats_count_per_project_space_kind_and_memory_type(console: Console) -> None:
    stats = console.get("/api/v1/stats")
    projects = {p["project"]: p for p in stats["projects"]}
    assert projects["CognitiveMemory"]["items"] == 5 and projects["Other"]["items"] == 1
    assert projects["CognitiveMemory"]["revisions"] == 5 and not projects["Other"]["archived"]
    spaces = {s["space"]: s["items"] for s in stats["spaces"]}
    assert spaces["/CognitiveMemory/work"] == 1 and spaces["/CognitiveMemory/work/deep"] == 2
    assert spaces["/CognitiveMemory/home"] == 2 and spaces["/Other/misc"] == 1
    kinds = {(k["project"], k["kind"]): k["items"] for k in stats["kinds"]}
    assert kinds[("CognitiveMemory", "note")] == 3 and kinds[("CognitiveMemory", "conversation")] == 2
    types = {(t["project"], t["memory_type"]): t["items"] for t in stats["memory_types"]}
    assert types[("CognitiveMemory", "fact")] == 1 and types[("CognitiveMemory", "preference")] == 2
    assert types[("Other", "fact")] == 1  # metadata "type" counts too, lower-cased
    assert stats["totals"]["items"] == 6 and stats["totals"]["edges"] >= 4
    assert stats["spaces_truncated"] is False


def test_stats_report_index_lag_and_disk_use(console: Console) -> None:
    console.settle()
    stats = console.get("/api/v1/stats")
    assert stats["index"]["pending_rows"] == 0 and stats["index"]["seconds_behind"] == 0
    assert stats["index"]["state"] == "ok" and stats["index"]["rows"] == 6
    disk = stats["disk"]
    assert disk["graph_bytes"] > 0 and disk["index_bytes"] > 0 and disk["artifacts_bytes"] > 0
    assert disk["total_bytes"] == sum(disk[k] for k in ("graph_bytes", "index_bytes", "artifacts_bytes",
                                                         "working_bytes"))


def test_stats_count_a_deprecated_memory_as_deprecated(console: Console) -> None:
    console.op("kumiho_deprecate_item", item_kref=console.seeded["other"])
    try:
        other = next(p for p in console.get("/api/v1/stats")["projects"] if p["project"] == "Other")
        assert other["items"] == 1 and other["deprecated_items"] == 1
    finally:
        console.op("kumiho_deprecate_item", item_kref=console.seeded["other"], deprecated=False)


# -- graph -------------------------------------------------------------------------------------------------------
def test_graph_has_the_memory_graph_shape(console: Console) -> None:
    graph = console.get("/api/v1/graph")
    GraphResponse.model_validate(graph)  # the route sends what it built without validating it: check here
    assert graph["spaces"][0] == "CognitiveMemory" and graph["truncated"] is False and graph["sampling"] is None
    memories = [n for n in graph["nodes"] if n["kind"] != "space"]
    assert graph["total_nodes"] == len(memories) == 5
    ids = {n["id"] for n in graph["nodes"]}
    assert all(e["source"] in ids and e["target"] in ids for e in graph["edges"])
    types = {e["edge_type"] for e in graph["edges"]}
    assert {"BELONGS_TO", "CHILD_OF", "DERIVED_FROM", "SUPERSEDES", "CONTRADICTS"} <= types
    node = next(n for n in memories if n["title"] == "Transport port")
    assert node["revision_kref"] == console.seeded["store_rev"] and node["space"] == "CognitiveMemory/work"


def test_graph_filters_by_space_kind_memory_type_and_time(console: Console) -> None:
    def titles(**params: Any) -> set[str]:
        return {n["title"] for n in console.get("/api/v1/graph", **params)["nodes"] if n["kind"] != "space"}

    assert titles(space="/CognitiveMemory/work") == {"Transport port", "Open the firewall", "Firewall review"}
    assert titles(space="CognitiveMemory/work/deep") == {"Open the firewall", "Firewall review"}
    assert titles(kind="conversation") == {"Tea", "Coffee"}
    assert titles(memory_type=["decision", "fact"]) == {"Open the firewall", "Transport port"}
    assert titles(project="Other") == {"Lonely"}
    future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    assert titles(since=future) == set()
    assert len(titles(until=future, since="2000-01-01T00:00:00Z")) == 5


def test_graph_past_its_limit_shows_the_newest_and_says_so(console: Console) -> None:
    graph = console.get("/api/v1/graph", limit=2)
    memories = [n for n in graph["nodes"] if n["kind"] != "space"]
    assert len(memories) == 2 and graph["truncated"] is True and graph["total_nodes"] == 5
    assert graph["sampling"]["method"] == "newest_first" and "5 memories match" in graph["sampling"]["detail"]
    GraphResponse.model_validate(graph)
    everything = [n for n in console.get("/api/v1/graph")["nodes"] if n["kind"] != "space"]
    newest = sorted(everything, key=lambda n: n["created_at"], reverse=True)[:2]
    assert {n["id"] for n in memories} == {n["id"] for n in newest}


def test_an_archived_project_shows_no_memories(console: Console) -> None:
    console.op("kumiho_delete_project", project_name="Other")  # archives it
    try:
        graph = console.get("/api/v1/graph", project="Other")
        assert graph["total_nodes"] == 0 and graph["spaces"] == ["Other"]
        other = next(p for p in console.get("/api/v1/stats")["projects"] if p["project"] == "Other")
        assert other["archived"] is True and other["items"] == 1
    finally:
        console.services.graph.update_project("Other", deprecated=False)
    assert console.get("/api/v1/graph", project="Other")["total_nodes"] == 1


@pytest.mark.parametrize(("params", "status", "field"), [
    ({"limit": 0}, 400, "limit"), ({"limit": 10_001}, 400, "limit"), ({"since": "yesterday"}, 400, "since"),
    ({"until": "2026-01-01T00:00:00"}, 400, "until"),  # no offset
    ({"since": "2026-02-01T00:00:00Z", "until": "2026-01-01T00:00:00Z"}, 400, "until"),
    ({"project": "Other", "space": "/CognitiveMemory/work"}, 400, "space"),
    ({"space": "/CognitiveMemory/../etc"}, 400, "space"), ({"project": "Nope"}, 404, "project"),
    ({"space": "/CognitiveMemory/nowhere"}, 404, "space"), ({"kind": "Bad Kind!"}, 400, "kind"),
    ({"memory_type": [f"t{i}" for i in range(MAX_MEMORY_TYPES + 1)]}, 400, "memory_type"),
    ({"kind": [f"k{i}" for i in range(MAX_KINDS + 1)]}, 400, "kind"),
    ({"kind": "k" * (names.MAX_SEGMENT + 1)}, 400, "kind"),
    # valid RFC 3339 times that fall before year 1 or after year 9999 once moved to UTC
    ({"since": "0001-01-01T00:00:00+01:00"}, 400, "since"), ({"until": "9999-12-31T23:59:59-01:00"}, 400, "until"),
])
def test_graph_refuses_bad_filters_naming_the_field(console: Console, params: dict[str, Any], status: int,
                                                    field: str) -> None:
    refused(console.http.get("/api/v1/graph", params=params), status, field)


# -- inspect -----------------------------------------------------------------------------------------------------
def test_inspect_shows_item_revisions_tags_artifact_text_and_provenance(console: Console) -> None:
    seeded = console.seeded
    found = console.get("/api/v1/inspect", kref=seeded["derived"])
    assert found["item"]["kref"] == seeded["derived"] and found["revision"]["kref"] == seeded["derived_rev"]
    assert [r["number"] for r in found["revisions"]] == [1] and found["revisions_truncated"] is False
    assert {t["tag"] for t in found["tags"]} >= {"latest"}
    provenance = found["provenance"]
    assert [(s["revision_kref"], s["depth"], s["title"]) for s in provenance["derived_from"]] == [
        (seeded["store_rev"], 1, "Transport port")]
    assert [s["revision_kref"] for s in provenance["derived"]] == [seeded["again_rev"]]
    upstream = console.get("/api/v1/inspect", kref=seeded["again_rev"])["provenance"]["derived_from"]
    assert [(s["revision_kref"], s["depth"]) for s in upstream] == [(seeded["derived_rev"], 1),
                                                                    (seeded["store_rev"], 2)]
    store = console.get("/api/v1/inspect", kref=seeded["store"])
    artifact = next(a for a in store["artifacts"] if a["kref"] == seeded["artifact"])
    assert "port 8080" in artifact["text"] and artifact["text_truncated"] is False
    assert [e["source_kref"] for e in store["provenance"]["contested"]] == [seeded["new_rev"]]
    assert "infra" in store["revision"]["tags"]


def test_inspect_follows_supersession_both_ways(console: Console) -> None:
    seeded = console.seeded
    new = console.get("/api/v1/inspect", kref=seeded["new"])["provenance"]
    old = console.get("/api/v1/inspect", kref=seeded["old"])["provenance"]
    assert [s["revision_kref"] for s in new["supersedes"]] == [seeded["old_rev"]] and new["superseded_by"] == []
    assert [(s["revision_kref"], s["title"]) for s in old["superseded_by"]] == [(seeded["new_rev"], "Coffee")]


def test_inspect_a_revision_kref_shows_that_revision(console: Console) -> None:
    item = console.seeded["other"]
    console.op("kumiho_create_revision", item_kref=item, metadata={"title": "Lonely again"})
    first = console.get("/api/v1/inspect", kref=item + "?r=1")
    assert first["revision"]["number"] == 1 and [r["number"] for r in first["revisions"]] == [2, 1]
    assert console.get("/api/v1/inspect", kref=item)["revision"]["number"] == 2


def test_inspect_reads_no_file_outside_the_data_directory(console: Console, tmp_path: Path) -> None:
    outside = tmp_path / "secret.md"
    outside.write_text("not for the console")
    link = console.services.data_dir.root / "artifacts" / "escape.md"
    link.symlink_to(outside)
    revision = console.seeded["old_rev"]
    console.op("kumiho_create_artifact", revision_kref=revision, name="outside", location=str(outside))
    # the tools refuse such a location; a link swapped after the artifact was made looks like this
    console.services.graph.create_artifact(revision, "link", "file://" + str(link))
    console.op("kumiho_create_artifact", revision_kref=revision, name="web", location="https://example.org/a.md")
    artifacts = {a["name"]: a for a in console.get("/api/v1/inspect", kref=revision)["artifacts"]}
    for name in ("outside", "link", "web"):
        assert artifacts[name]["text"] is None and artifacts[name]["text_note"], artifacts[name]
    assert "outside the data directory" in artifacts["outside"]["text_note"]


def test_inspect_reads_none_of_the_data_directorys_own_files(console: Console) -> None:
    root = console.services.data_dir.root
    token = console.services.data_dir.read_or_create_token()  # the file a client beyond loopback must match
    (root / "server.json").write_text('{"port": 1}')
    os.mkfifo(root / "artifacts" / "pipe.md")  # opening it would wait for a writer for ever
    (root / "artifacts" / "folder.md").mkdir()
    revision = console.seeded["derived_rev"]
    private = {"token": root / "token", "runtime": root / "server.json", "lock": root / "lock",
               "graph": console.services.data_dir.graph_path, "climb": root / "artifacts" / ".." / "token",
               "pipe": root / "artifacts" / "pipe.md", "folder": root / "artifacts" / "folder.md"}
    for name, path in private.items():
        console.services.graph.create_artifact(revision, name, str(path))  # as a client could name them
    answer = console.http.get("/api/v1/inspect", params={"kref": revision})
    assert answer.status_code == 200, answer.text
    assert token not in answer.text and '"port"' not in answer.text
    artifacts = {a["name"]: a for a in answer.json()["artifacts"]}
    for name in private:
        assert artifacts[name]["text"] is None and artifacts[name]["text_note"], artifacts[name]
    assert "artifacts folder" in artifacts["token"]["text_note"]
    assert "artifacts folder" in artifacts["climb"]["text_note"]
    assert "not a regular file" in artifacts["pipe"]["text_note"]


def test_inspect_cuts_long_artifact_text(console: Console) -> None:
    big = console.services.data_dir.root / "artifacts" / "big.md"
    big.write_text("# Big\n" + "é" * TEXT_BYTES)
    revision = console.seeded["new_rev"]
    console.op("kumiho_create_artifact", revision_kref=revision, name="big", location=str(big))
    artifact = next(a for a in console.get("/api/v1/inspect", kref=revision)["artifacts"] if a["name"] == "big")
    assert artifact["text_truncated"] is True and artifact["text"].startswith("# Big")
    assert len(artifact["text"].encode()) <= TEXT_BYTES


@pytest.mark.parametrize(("kref", "status"), [
    ("not a kref", 400), ("kref://CognitiveMemory", 400), ("kref://CognitiveMemory/work/none.note", 404),
    ("kref://CognitiveMemory/work/none.note?r=1", 404), ("x" * 2049, 400), ("", 400),
])
def test_inspect_refuses_bad_and_unknown_krefs(console: Console, kref: str, status: int) -> None:
    refused(console.http.get("/api/v1/inspect", params={"kref": kref}), status, "kref")


def test_inspect_of_a_missing_revision_of_an_item_is_not_found(console: Console) -> None:
    refused(console.http.get("/api/v1/inspect", params={"kref": console.seeded["store"] + "?r=9"}), 404, "kref")


# -- deprecate / restore -----------------------------------------------------------------------------------------
def _search_items(console: Console, query: str) -> list[str]:
    console.settle()
    return [h["item_kref"] for h in console.get("/api/v1/search", q=query, mode="text")["results"]]


def test_deprecate_hides_a_memory_from_search_and_restore_brings_it_back(console: Console) -> None:
    item = console.seeded["derived"]
    assert item in _search_items(console, "firewall")
    answer = console.http.post("/api/v1/deprecate", json={"kref": item, "reason": "wrong port"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["deprecated"] is True and answer.json()["metadata"]["deprecation_reason"] == "wrong port"
    assert item not in _search_items(console, "firewall")
    restored = console.http.post("/api/v1/restore", json={"kref": item})
    assert restored.status_code == 200 and restored.json()["deprecated"] is False
    assert item in _search_items(console, "firewall")


def test_restore_removes_the_deprecation_reason(console: Console) -> None:
    item = console.seeded["old"]
    console.op("kumiho_set_metadata", kref=item, metadata={"keep": "this"})
    deprecated = console.http.post("/api/v1/deprecate", json={"kref": item, "reason": "superseded"})
    assert deprecated.status_code == 200 and deprecated.json()["metadata"]["deprecation_reason"] == "superseded"
    restored = console.http.post("/api/v1/restore", json={"kref": item})
    assert restored.status_code == 200, restored.text
    assert "deprecation_reason" not in restored.json()["metadata"] and restored.json()["metadata"]["keep"] == "this"
    shown = console.get("/api/v1/inspect", kref=item)["item"]
    assert shown["deprecated"] is False and "deprecation_reason" not in shown["metadata"]
    assert "deprecation_reason" not in console.services.graph.get_item(item).metadata


@pytest.mark.parametrize(("body", "status", "field"), [
    ({"kref": "kref://CognitiveMemory/work/none.note"}, 404, "kref"),
    ({"kref": "kref://CognitiveMemory/work"}, 400, "kref"),
    ({"kref": "nonsense"}, 400, "kref"),
    ({"kref": "kref://CognitiveMemory/work/x.note", "reason": "r" * 1001}, 400, "reason"),
    ({}, 400, "kref"),
])
def test_deprecate_refuses_bad_input_naming_the_field(console: Console, body: dict[str, Any], status: int,
                                                      field: str) -> None:
    refused(console.http.post("/api/v1/deprecate", json=body), status, field)


def test_deprecate_refuses_a_revision_kref_and_writes_nothing(console: Console) -> None:
    before = console.services.graph.stats()["events"]
    refused(console.http.post("/api/v1/deprecate", json={"kref": console.seeded["store_rev"], "reason": "x"}),
            400, "kref")
    assert console.services.graph.stats()["events"] == before


# -- tags, search, config ----------------------------------------------------------------------------------------
def test_tags_in_use_with_counts(console: Console) -> None:
    everywhere = {t["tag"]: t["revisions"] for t in console.get("/api/v1/tags")["tags"]}
    assert everywhere["infra"] == 1 and everywhere["latest"] >= 6
    other = {t["tag"] for t in console.get("/api/v1/tags", project="Other")["tags"]}
    assert "infra" not in other and "latest" in other
    refused(console.http.get("/api/v1/tags", params={"project": "Nope"}), 404, "project")
    refused(console.http.get("/api/v1/tags", params={"project": "bad name!"}), 400, "project")


def test_tags_and_stats_lists_are_capped_the_largest_first(tmp_path: Path) -> None:
    """Tags, kinds and memory types are names clients choose: past MAX_LISTED of them a list keeps the ones with
    the largest counts and says it was cut."""
    extra = MAX_LISTED + 100
    with _console(tmp_path / "many") as app:
        graph = app.services.graph
        graph.create_project("Many")
        graph.create_space("/Many", "s")
        made = graph.create_revisions(  # the store's bulk write: items of as many kinds, revisions of as many types
            [NewRevision(f"kref://Many/s/m{n}.kind{n:04}", {"memory_type": f"type{n:04}"}) for n in range(extra)]
            + [NewRevision(f"kref://Many/s/popular{n}.popular", {"memory_type": "common"}) for n in range(3)])
        revisions = [r.kref.removeprefix("kref://") for r in made.revisions if r is not None]
        assert not made.failures and len(revisions) == extra + 3
        # a tag each, as tag_revision writes it but in one statement (tag_revision one by one takes ~10 s)
        graph._engine.write(lambda tx: tx.copy(
            "TAGGED", "row.item AS f, row.rev AS t, row.tag AS tag, '2026-01-01T00:00:00+00:00' AS since, '' AS until",
            [{"item": r.rsplit("?r=", 1)[0], "rev": r, "tag": f"tag{n:04}"} for n, r in enumerate(revisions[:extra])]))
        for revision in revisions[extra:]:  # the most held tag, kind and type: three items hold them
            graph.tag_revision("kref://" + revision, "shared")
        tags = app.get("/api/v1/tags", project="Many")
        assert len(tags["tags"]) == MAX_LISTED and tags["truncated"] is True
        assert tags["tags"][0]["tag"] == "latest" and tags["tags"][1] == {"tag": "shared", "revisions": 3}
        assert tags["tags"][2]["tag"] == "tag0000"  # equal counts: by name
        stats = app.get("/api/v1/stats")
        assert len(stats["kinds"]) == MAX_LISTED and stats["kinds_truncated"] is True
        assert stats["kinds"][0]["kind"] == "popular" and stats["kinds"][0]["items"] == 3
        assert len(stats["memory_types"]) == MAX_LISTED and stats["memory_types_truncated"] is True
        assert stats["memory_types"][0]["memory_type"] == "common"
        assert stats["projects_truncated"] is False and stats["projects"][0]["project"] == "Many"
        assert stats["spaces_truncated"] is False


def test_search_hits_carry_their_item(console: Console) -> None:
    console.settle()
    hits = console.get("/api/v1/search", q="transport port 8080", mode="text")["results"]
    hit = next(h for h in hits if h["item_kref"] == console.seeded["store"])
    assert hit["kind"] == "note" and hit["space"] == "CognitiveMemory/work" and hit["title"] == "Transport port"
    assert hit["name"].endswith(".note") and hit["deprecated"] is False and hit["summary"]


@pytest.mark.parametrize(("params", "field"), [
    ({"kind": [f"k{i}" for i in range(MAX_KINDS + 1)]}, "kind"), ({"tag": ["t" * (names.MAX_TAG + 1)]}, "tag"),
    ({"project": "p" * 257}, "project"), ({"space": "/CognitiveMemory/../x"}, "space"),
    ({"memory_type": [f"m{i}" for i in range(MAX_MEMORY_TYPES + 1)]}, "memory_type"),
])
def test_search_refuses_unbounded_filters(console: Console, params: dict[str, Any], field: str) -> None:
    refused(console.http.get("/api/v1/search", params={"q": "port", **params}), 400, field)


def test_config_masks_every_secret(console: Console) -> None:
    answer = console.http.get("/api/v1/config")
    assert answer.status_code == 200
    assert SECRET_TOKEN not in answer.text and SECRET_KEY not in answer.text
    body = answer.json()
    assert body["settings"]["api_token"] == "********"
    assert body["settings"]["inference"]["endpoint_api_key"] == "********"
    assert set(body["secrets"]) == {"api_token", "inference.endpoint_api_key"}
    assert body["settings"]["inference"]["context_tokens"] == 4096  # settings named like one but no text
    assert body["settings"]["require_token"] is False
    assert body["settings"]["search"]["embedder"] == "hashing"


# -- jobs and model, old paths -----------------------------------------------------------------------------------
def test_jobs_and_model_live_under_v1(console: Console) -> None:
    assert console.get("/api/v1/jobs") == {"jobs": [], "count": 0}
    assert console.get("/api/v1/model")["chat"]["state"] == "unavailable"
    refused(console.http.get("/api/v1/jobs/job-404"), 404, "job_id")
    refused(console.http.post("/api/v1/jobs/job-404/cancel"), 404, "job_id")
    refused(console.http.get("/api/v1/jobs/" + "j" * 129), 400, "job_id")
    refused(console.http.get("/api/v1/jobs", params={"kind": "k" * 129}), 400, "kind")


@pytest.mark.parametrize(("method", "old", "new"), [
    ("GET", "/api/jobs?kind=dream_state", "/api/v1/jobs?kind=dream_state"),
    ("GET", "/api/jobs/job-1", "/api/v1/jobs/job-1"),
    ("POST", "/api/jobs/job-1/cancel", "/api/v1/jobs/job-1/cancel"),
    ("GET", "/api/model", "/api/v1/model"),
])
def test_the_old_job_and_model_paths_redirect(console: Console, method: str, old: str, new: str) -> None:
    answer = console.http.request(method, old, follow_redirects=False)
    assert answer.status_code == 308 and answer.headers["location"] == new


def test_the_schema_describes_the_console_routes(console: Console) -> None:
    schema = console.get("/api/schema/openapi.json")
    paths = schema["paths"]
    for path in ("/api/v1/stats", "/api/v1/graph", "/api/v1/inspect", "/api/v1/tags", "/api/v1/config",
                 "/api/v1/jobs", "/api/v1/model"):
        answer = paths[path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert "$ref" in answer, (path, answer)
    assert "/api/jobs" not in paths and "/api/model" not in paths
    parameters = {p["name"]: p["schema"] for p in paths["/api/v1/graph"]["get"]["parameters"]}
    assert parameters["limit"]["maximum"] == 10_000 and parameters["limit"]["minimum"] == 1
    for moment in ("since", "until"):  # a schema fuzzer then tries times, edge dates among them
        assert "date-time" in json.dumps(parameters[moment]), parameters[moment]


def test_stats_count_an_item_without_revisions_under_no_memory_type(console: Console) -> None:
    console.op("kumiho_create_project", name="Bare")
    console.op("kumiho_create_space", project_name="Bare", space_name="s")
    console.op("kumiho_create_item", space_path="/Bare/s", item_name="empty", kind="note")
    stats = console.get("/api/v1/stats")
    assert [(t["memory_type"], t["items"]) for t in stats["memory_types"] if t["project"] == "Bare"] == [("", 1)]
    assert next(p for p in stats["projects"] if p["project"] == "Bare")["revisions"] == 0


@pytest.mark.parametrize("path", ["/api/v1/memories", "/api/v1/hygiene", "/api/v1/projects"])
def test_a_body_nested_too_deeply_is_refused_not_a_server_error(console: Console, path: str) -> None:
    body = "[" * 5000 + "]" * 5000
    response = console.http.post(path, content=body, headers={"content-type": "application/json",
                                                                "authorization": f"Bearer {SECRET_TOKEN}"})
    assert response.status_code == 400, response.text
    assert "nests too deeply" in problem(response)["detail"]
