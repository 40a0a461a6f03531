"""Every operation of the Memory API through ``/api/v1/memories`` on real stores: store (and a key stored
again), get, list, count, recall, forget, export, purge, health, store_procedural, store_with_metadata;
namespaces, limits, since/until, supersession and importance in recall, the write filters, bad input."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from appliance.errors import NotFound
from appliance.memory import entries
from tests.memory_api.conftest import API, Memories
from tests.problems import problem as problem_body
from tests.write_filters import KEPT_CONTENT, KEPT_KEYS, SKIPPED_BLANK, SKIPPED_CONTENT, SKIPPED_KEYS


def problem(response: Any, status: int, field: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    body = problem_body(response)
    assert "Traceback" not in response.text
    if field is not None:
        assert body["field"] == field, body
        assert field in body["detail"], body
    return body


def test_store_get_list_count_and_a_key_stored_again(mem: Memories) -> None:
    ns = "basics"
    first = mem.store("DB Host", "The staging db runs on db1.", category="core", namespace=ns, importance=0.5)
    assert first["key"] == "DB Host" and first["namespace"] == ns and first["category"] == "core"
    assert first["kref"] == "kref://CognitiveMemory/Memory/basics/db-host.memory"  # Revka's slug
    assert first["importance"] == 0.5 and first["score"] is None and first["session_id"] is None
    mem.store("standup", "Daily standup at nine.", category="Daily", session_id="s1", namespace=ns)

    got = mem.client.get(f"{API}/DB Host", params={"namespace": ns})
    assert got.status_code == 200 and got.json() == first

    again = mem.store("DB Host", "The staging db moved to db2.", namespace=ns)
    assert again["kref"] == first["kref"] and again["content"] == "The staging db moved to db2."
    assert again["timestamp"] > first["timestamp"]
    revisions = mem.services.graph.list_revisions(first["kref"]).items
    assert len(revisions) == 2  # a new revision of the same item
    assert mem.client.get(f"{API}/DB Host", params={"namespace": ns}).json()["content"] == again["content"]

    assert mem.keys(namespace=ns) == ["DB Host", "standup"]  # newest first
    assert mem.keys(namespace=ns, category="daily") == ["standup"]  # categories are lower-cased
    assert mem.keys(namespace=ns, session_id="s1") == ["standup"]
    assert mem.keys(namespace=ns, key="standup") == ["standup"]
    page = mem.client.get(API, params={"namespace": ns, "limit": 1, "offset": 1}).json()
    assert page["total"] == 2 and [e["key"] for e in page["entries"]] == ["standup"]
    assert mem.count(namespace=ns) == 2 and mem.count(namespace=ns, category="core") == 1
    assert mem.client.get(f"{API}/health", params={"namespace": ns}).json() == {
        "healthy": True, "namespace": ns, "entries": 2, "detail": "graph and index answer"}


def test_keys_that_slug_alike_get_their_own_entries(mem: Memories) -> None:
    ns = "slugs"
    a = mem.store("db host", "first", namespace=ns)
    b = mem.store("DB_Host!", "second", namespace=ns)
    assert a["kref"].endswith("/db-host.memory")
    assert b["kref"] != a["kref"] and b["kref"].startswith(a["kref"][:-len(".memory")] + "-")
    assert mem.client.get(f"{API}/DB_Host!", params={"namespace": ns}).json()["content"] == "second"
    assert mem.client.get(f"{API}/db host", params={"namespace": ns}).json()["content"] == "first"
    slash = mem.store("runbooks/deploy", "make deploy", namespace=ns)  # the rest of the path is the key
    assert mem.client.get(f"{API}/runbooks/deploy", params={"namespace": ns}).json() == slash


def test_forget_deprecates_the_entry_and_it_stays_in_the_graph(mem: Memories) -> None:
    ns = "forget"
    stored = mem.store("old-fact", "The office is on floor three.", namespace=ns)
    mem.store("other", "The office has a kitchen.", namespace=ns)
    gone = mem.client.delete(f"{API}/old-fact", params={"namespace": ns})
    assert gone.status_code == 200 and gone.json() == {"forgotten": True, "entry": stored}
    problem(mem.client.get(f"{API}/old-fact", params={"namespace": ns}), 404, "key")
    problem(mem.client.delete(f"{API}/old-fact", params={"namespace": ns}), 404, "key")
    assert mem.keys(namespace=ns) == ["other"] and mem.count(namespace=ns) == 1
    assert [e["key"] for e in mem.recall("office floor", namespace=ns)] == ["other"]
    item = mem.services.graph.get_item(stored["kref"])  # still there, deprecated, with its reason
    assert item.deprecated and item.metadata["deprecation_reason"] == "forgotten through the Memory API"
    events = [e for e in mem.services.graph.events(limit=10_000) if e.get("kref") == stored["kref"]]
    assert "item.deprecated" in [e["routing_key"] for e in events], events
    back = mem.store("old-fact", "The office is on floor four.", namespace=ns)  # storing it again restores it
    assert back["kref"] == stored["kref"] and mem.count(namespace=ns) == 2


def test_namespaces_isolate_every_read(mem: Memories) -> None:
    mem.store("iso-shared", "The parking garage closes at midnight.", namespace="default")
    mem.store("iso-shared", "The parking garage closes at ten.", namespace="iso-ops")
    mem.store("iso-ops-only", "The parking garage has a charger.", namespace="iso-ops")
    ops = mem.recall("parking garage", namespace="iso-ops", limit=20)
    assert {e["key"] for e in ops} == {"iso-shared", "iso-ops-only"} and {e["namespace"] for e in ops} == {"iso-ops"}
    default = mem.recall("parking garage", limit=20)  # the default namespace's space holds the others' spaces
    assert [e["content"] for e in default if e["key"].startswith("iso-")] == ["The parking garage closes at midnight."]
    assert all(e["namespace"] == "default" for e in default)
    assert "iso-ops-only" not in mem.keys(limit=1000)
    assert mem.keys(namespace="iso-ops") == ["iso-ops-only", "iso-shared"]
    assert mem.count(namespace="iso-ops") == 2
    exported = [json.loads(line) for line in mem.client.get(f"{API}/export", params={"namespace": "iso-ops"}).text
                .splitlines()]
    assert sorted(e["key"] for e in exported) == ["iso-ops-only", "iso-shared"]
    assert mem.client.get(f"{API}/iso-ops-only").status_code == 404  # not in the default namespace
    # the default namespace's own reads stop at its space too: count and export
    default_keys = mem.keys(limit=1000)
    assert "iso-shared" in default_keys and mem.count() == len(default_keys)
    exported_default = [json.loads(line) for line in mem.client.get(f"{API}/export").text.splitlines()]
    assert sorted(e["key"] for e in exported_default) == sorted(default_keys)
    assert {e["namespace"] for e in exported_default} == {"default"}
    problem(mem.client.get(API, params={"namespace": "a/b"}), 400, "namespace")


def test_recall_in_the_default_namespace_is_not_crowded_out_by_the_others(
        make_app: Callable[..., AbstractContextManager[Memories]]) -> None:
    """The default namespace's space holds the others' spaces: their better matches must not fill the hits
    recall ranks, leaving the default namespace's own entry out."""
    with make_app() as app:
        app.store("garden", "The rooftop garden is watered on Thursdays.")
        for i in range(70):
            app.store(f"crowd-{i}", f"rooftop garden rooftop garden watered {i}", namespace="crowd")
        assert [e["key"] for e in app.recall("rooftop garden watered", limit=1)] == ["garden"]
        assert len(app.recall("rooftop garden watered", namespace="crowd", limit=60)) == 60
        # so for a category: the others' better matches do not fill the hits either
        app.store("daily-garden", "The rooftop garden was watered today.", namespace="crowd", category="daily")
        assert [e["key"] for e in app.recall("rooftop garden watered", namespace="crowd", category="daily",
                                             limit=1)] == ["daily-garden"]
        # and for a session or a time window, which recall checks after the search: it ranks more hits then
        app.store("session-garden", "The rooftop garden needs watering.", namespace="crowd", session_id="s9")
        assert [e["key"] for e in app.recall("rooftop garden watered", namespace="crowd", session_id="s9",
                                             limit=1)] == ["session-garden"]
        late = app.store("late-garden", "The rooftop garden got new soil.", namespace="crowd")
        assert [e["key"] for e in app.recall("rooftop garden watered", namespace="crowd", limit=1,
                                             since=late["timestamp"])] == ["late-garden"]


def test_purging_the_default_namespace_leaves_the_others(make_app: Callable[..., AbstractContextManager[Memories]]
                                                          ) -> None:
    with make_app() as app:
        app.store("mine", "The default namespace's entry.")
        app.store("theirs", "Another namespace's entry.", namespace="other")
        purged = app.client.post(f"{API}/purge", json={"namespace": "default", "confirm": "default"})
        assert purged.status_code == 200, purged.text
        assert app.count() == 0 and app.keys(namespace="other") == ["theirs"]


def test_a_call_naming_no_namespace_uses_default_namespace(make_app: Callable[..., AbstractContextManager[Memories]]
                                                           ) -> None:
    with make_app(memory={"default_namespace": "agent7"}) as app:
        stored = app.store("pref", "Answers in short sentences.")
        assert stored["namespace"] == "agent7" and "/Memory/agent7/" in stored["kref"]
        assert app.count() == 1 and app.count(namespace="agent7") == 1 and app.count(namespace="default") == 0


def test_limits_refuse_a_store_that_would_exceed_them(make_app: Callable[..., AbstractContextManager[Memories]]
                                                      ) -> None:
    policy = {"max_entries_per_namespace": 3, "max_entries_per_category": 2}
    with make_app(memory={"policy": policy}) as app:
        app.store("a", "one", category="daily")
        app.store("b", "two", category="daily")
        problem(app.client.post(API, json={"key": "c", "content": "three", "category": "daily"}), 409, "category")
        app.store("a", "one, again", category="daily")  # a key stored again adds no entry
        app.store("c", "three", category="core")
        refused = problem(app.client.post(API, json={"key": "d", "content": "four"}), 409, "namespace")
        assert "max_entries_per_namespace" in refused["detail"] and "(3)" in refused["detail"]
        assert app.count() == 3  # nothing was evicted
        app.store("d", "four", namespace="elsewhere")  # limits count per namespace
        assert app.client.delete(f"{API}/c").status_code == 200  # a forgotten entry no longer counts
        app.store("d", "four")


def test_a_read_only_namespace_refuses_a_store_with_403_and_writes_nothing(
        make_app: Callable[..., AbstractContextManager[Memories]]) -> None:
    with make_app(memory={"policy": {"read_only_namespaces": ["frozen"]}}) as app:
        refused = problem(app.client.post(API, json={"key": "k", "content": "a fact", "namespace": "frozen"}), 403)
        assert refused["code"] == "permission_denied"
        assert "frozen" in refused["detail"] and "read_only_namespaces" in refused["detail"]
        assert app.count(namespace="frozen") == 0
        with pytest.raises(NotFound):  # not even the namespace's space was created
            app.services.graph.list_items("/CognitiveMemory/Memory/frozen", include_deprecated=True)
        assert app.store("k", "a fact")["namespace"] == "default"  # other namespaces still take writes


def test_since_and_until_narrow_recall_and_export(mem: Memories) -> None:
    ns = "window"
    early = mem.store("w1", "The rocket launch window opens.", namespace=ns)
    time.sleep(0.05)
    late = mem.store("w2", "The rocket launch window closes.", namespace=ns)
    after_first = early["timestamp"]
    recalled = mem.recall("rocket launch window", namespace=ns, since=late["timestamp"])
    assert [e["key"] for e in recalled] == ["w2"]
    recalled = mem.recall("rocket launch window", namespace=ns, until=after_first)
    assert [e["key"] for e in recalled] == ["w1"]
    both = mem.recall("rocket launch window", namespace=ns, since="2000-01-01T00:00:00Z")
    assert {e["key"] for e in both} == {"w1", "w2"} and all(0 < e["score"] <= 1 for e in both)
    lines = mem.client.get(f"{API}/export", params={"namespace": ns, "since": late["timestamp"]})
    assert lines.headers["content-type"].startswith("application/x-ndjson")
    assert [json.loads(line)["key"] for line in lines.text.splitlines()] == ["w2"]
    everything = mem.client.get(f"{API}/export", params={"namespace": ns}).text.splitlines()
    assert [json.loads(line)["key"] for line in everything] == ["w1", "w2"]  # oldest first
    problem(mem.client.post(f"{API}/recall", json={"query": "x", "since": "yesterday"}), 400, "since")
    problem(mem.client.post(f"{API}/recall", json={"query": "x", "since": late["timestamp"],
                                                   "until": early["timestamp"]}), 400, "until")
    problem(mem.client.get(f"{API}/export", params={"until": "2026-13-01T00:00:00Z"}), 400, "until")


def test_supersession_puts_the_replacing_entry_first(mem: Memories) -> None:
    ns = "supersede"
    # the old fact matches the query best; once superseded it comes after the entry that replaces it
    mem.store("sky", "The sky colour over the harbour is green and the sky colour is odd.", namespace=ns)
    before = mem.recall("sky colour harbour green", namespace=ns)
    assert before[0]["key"] == "sky"
    mem.store("sky-2", "Correction: the harbour sky is blue.", namespace=ns, supersedes="sky")
    after = mem.recall("sky colour harbour green", namespace=ns)
    assert [e["key"] for e in after] == ["sky-2", "sky"]
    old = mem.client.get(f"{API}/sky", params={"namespace": ns}).json()
    assert old["superseded_by"] == "sky-2"
    graph = mem.services.graph
    new_rev = graph.current_revisions([after[0]["kref"]])[after[0]["kref"]].kref
    old_rev = graph.current_revisions([old["kref"]])[old["kref"]].kref
    assert [(e.source_kref, e.edge_type) for e in graph.get_edges(old_rev, direction="incoming").items] == [
        (new_rev, "SUPERSEDES")]

    # the other direction: an entry stored with superseded_by names the existing entry that replaces it
    mem.store("tide-2", "High tide is at six.", namespace=ns)
    mem.store("tide", "High tide is at five, tide tables say tide at five.", namespace=ns, superseded_by="tide-2")
    tides = [e["key"] for e in mem.recall("tide at five tide tables", namespace=ns) if e["key"].startswith("tide")]
    assert tides == ["tide-2", "tide"]
    assert mem.client.get(f"{API}/tide", params={"namespace": ns}).json()["superseded_by"] == "tide-2"
    problem(mem.client.post(API, json={"key": "x", "content": "y", "namespace": ns, "superseded_by": "nothing"}),
            404, "superseded_by")
    problem(mem.client.post(API, json={"key": "x", "content": "y", "supersedes": "x"}), 400, "supersedes")


def test_importance_raises_the_recall_rank(mem: Memories) -> None:
    ns = "importance"
    mem.store("pref-a", "Favourite editor is helix.", namespace=ns, importance=0.0)
    mem.store("pref-b", "Favourite editor is helix.", namespace=ns, importance=1.0)
    ranked = mem.recall("favourite editor helix", namespace=ns)
    assert [e["key"] for e in ranked] == ["pref-b", "pref-a"]
    assert ranked[0]["score"] > ranked[1]["score"]
    mem.store("pref-a", "Favourite editor is helix.", namespace=ns, importance=1.0)
    mem.store("pref-b", "Favourite editor is helix.", namespace=ns)  # no importance: no lift
    assert [e["key"] for e in mem.recall("favourite editor helix", namespace=ns)] == ["pref-a", "pref-b"]


def test_recall_narrows_by_category_and_session(mem: Memories) -> None:
    ns = "narrow"
    mem.store("n1", "Lunch order is ramen.", namespace=ns, category="daily", session_id="monday")
    mem.store("n2", "Lunch order is ramen again.", namespace=ns, category="conversation", session_id="tuesday")
    assert [e["key"] for e in mem.recall("lunch ramen", namespace=ns, category="daily")] == ["n1"]
    assert [e["key"] for e in mem.recall("lunch ramen", namespace=ns, session_id="tuesday")] == ["n2"]


FILTERED = [(f"filtered-{i}", content, reason) for i, (content, reason) in enumerate(SKIPPED_CONTENT)] \
    + [(f"blank-{i}", content, "empty text is never stored") for i, content in enumerate(SKIPPED_BLANK)] \
    + [(key, "a plain fact", "assistant responses are not auto-saved") for key in SKIPPED_KEYS]


@pytest.mark.parametrize(("key", "content", "reason"), FILTERED)
def test_the_seeds_write_filters_store_nothing(mem: Memories, key: str, content: str, reason: str) -> None:
    before = mem.count(namespace="filters")
    answer = mem.client.post(API, json={"key": key, "content": content, "namespace": "filters"})
    assert answer.status_code == 200, answer.text
    assert answer.json() == {"stored": False, "skipped": reason}
    assert mem.count(namespace="filters") == before
    assert key not in mem.keys(namespace="filters")


KEPT = [(f"kept-{i}", content) for i, content in enumerate(KEPT_CONTENT)] \
    + [(key, "a plain fact") for key in KEPT_KEYS]


@pytest.mark.parametrize(("key", "content"), KEPT)
def test_what_revka_keeps_is_stored(mem: Memories, key: str, content: str) -> None:
    stored = mem.store(key, content, namespace="kept")
    assert stored["key"] == key and stored["content"] == content
    assert key in mem.keys(namespace="kept", key=key)


def test_credentials_are_redacted_at_write_time(mem: Memories) -> None:
    stored = mem.store("api-note", "The deploy key is api_key=sk-abcdefghijklmnopqrstuvwxyz123456 for staging.",
                       namespace="secrets", metadata={"origin": "password=hunter2hunter2"})
    assert "sk-abc" not in stored["content"] and "[secret]" in stored["content"]
    assert stored["metadata"] == {"origin": "password=[secret]"}
    item = mem.services.graph.current_revisions([stored["kref"]])[stored["kref"]]
    assert "sk-abc" not in json.dumps(item.metadata)
    problem(mem.client.post(API, json={"key": "token=sk-abcdefghijklmnopqrstuvwxyz123456", "content": "x"}),
            400, "key")


def test_store_with_metadata_and_store_procedural(mem: Memories) -> None:
    ns = "extras"
    stored = mem.store("with-meta", "Build with make.", namespace=ns, metadata={"source": "runbook", "team": "ops"})
    assert stored["metadata"] == {"source": "runbook", "team": "ops"}
    messages = [{"role": "user", "content": "How do I deploy?"},
                {"role": "assistant", "content": "Run make deploy, then check /health."}]
    made = mem.client.post(f"{API}/procedural", json={"messages": messages, "session_id": "s9", "namespace": ns})
    assert made.status_code == 201, made.text
    entry = made.json()
    assert entry["category"] == "procedural" and entry["key"].startswith("procedural_")
    assert entry["content"] == "user: How do I deploy?\nassistant: Run make deploy, then check /health."
    assert mem.client.post(f"{API}/procedural", json={"messages": messages, "namespace": ns}).json()["kref"] == \
        entry["kref"]  # the same messages: the same entry
    problem(mem.client.post(f"{API}/procedural", json={"messages": []}), 400, "messages")


def test_purge_a_session_and_a_namespace_deletes_for_real(mem: Memories) -> None:
    ns = "purge"
    kept = mem.store("p-keep", "Keep me.", namespace=ns, session_id="s-keep")
    doomed = mem.store("p-drop", "Drop me.", namespace=ns, session_id="s-drop")
    mem.store("p-other", "Another namespace.", namespace="purge-other", session_id="s-drop")
    files = [Path(a.location) for revs in mem.services.graph.artifacts_of(
        [mem.services.graph.current_revisions([doomed["kref"]])[doomed["kref"]].kref]).values() for a in revs]
    assert files and all(f.exists() for f in files)
    problem(mem.client.post(f"{API}/purge", json={"namespace": ns, "session_id": "s-drop", "confirm": "yes"}),
            400, "confirm")
    assert mem.count(namespace=ns) == 2  # a refused purge deletes nothing
    purged = mem.client.post(f"{API}/purge", json={"namespace": ns, "session_id": "s-drop", "confirm": "s-drop"})
    assert purged.status_code == 200 and purged.json() == {"deleted": 1, "namespace": ns, "session_id": "s-drop"}
    with pytest.raises(NotFound):
        mem.services.graph.get_item(doomed["kref"])
    assert not any(f.exists() for f in files)  # its artifact files went with it
    assert mem.keys(namespace=ns) == ["p-keep"] and mem.count(namespace="purge-other") == 1

    mem.client.delete(f"{API}/p-keep", params={"namespace": ns})  # forgotten entries are purged too
    problem(mem.client.post(f"{API}/purge", json={"namespace": ns, "confirm": "default"}), 400, "confirm")
    whole = mem.client.post(f"{API}/purge", json={"namespace": ns, "confirm": ns})
    assert whole.json() == {"deleted": 1, "namespace": ns, "session_id": None}
    with pytest.raises(NotFound):
        mem.services.graph.get_item(kept["kref"])
    assert mem.count(namespace="purge-other") == 1


BAD_STORES: list[tuple[dict[str, Any], str]] = [  # the id of each case is the field it names
    ({"content": "no key"}, "key"),
    ({"key": "", "content": "x"}, "key"),
    ({"key": "k" * (entries.MAX_KEY + 1), "content": "x"}, "key"),
    ({"key": "tab\tkey", "content": "x"}, "key"),
    ({"key": "k", "content": "x" * (entries.MAX_CONTENT + 1)}, "content"),
    ({"key": "k", "content": 5}, "content"),
    ({"key": "k", "content": "x", "category": "Not A Label"}, "category"),
    ({"key": "k", "content": "x", "category": "c" * (entries.MAX_CATEGORY + 1)}, "category"),
    ({"key": "k", "content": "x", "importance": 1.5}, "importance"),
    ({"key": "k", "content": "x", "importance": -0.1}, "importance"),
    ({"key": "k", "content": "x", "importance": "high"}, "importance"),
    ({"key": "k", "content": "", "importance": False}, "importance"),  # a boolean is no number (found by fuzzing)
    ({"key": "k", "content": "x", "namespace": "no/slash"}, "namespace"),
    ({"key": "k", "content": "x", "namespace": "n" * 65}, "namespace"),
    ({"key": "k", "content": "x", "session_id": "s" * (entries.MAX_SESSION_ID + 1)}, "session_id"),
    ({"key": "k", "content": "x", "metadata": {f"m{i}": "v" for i in range(entries.MAX_EXTRA + 1)}}, "metadata"),
    ({"key": "k", "content": "x", "metadata": {"content": "sneaky"}}, "metadata.content"),
    ({"key": "k", "content": "x", "metadata": {"9bad": "v"}}, "metadata"),
    ({"key": "k", "content": "x", "metadata": {"n": "v" * (entries.MAX_EXTRA_VALUE + 1)}}, "metadata.n"),
    ({"key": "k", "content": "x", "colour": "red"}, "colour"),
]


@pytest.mark.parametrize(("body", "field"), BAD_STORES, ids=[f for _, f in BAD_STORES])
def test_bad_input_is_a_400_naming_the_field(mem: Memories, body: dict[str, Any], field: str) -> None:
    problem(mem.client.post(API, json=body), 400, field)


@pytest.mark.parametrize(("route", "params", "field"), [
    ("", {"limit": "0"}, "limit"),
    ("", {"limit": "1001"}, "limit"),
    ("", {"offset": "-1"}, "offset"),
    ("", {"category": "Bad Label"}, "category"),
    ("/count", {"namespace": "x y"}, "namespace"),
    ("/export", {"since": "not a time"}, "since"),
    ("/export", {"until": ""}, "until"),  # an empty time is no time (found by fuzzing)
])
def test_bad_query_parameters_are_400s_naming_them(mem: Memories, route: str, params: dict[str, str],
                                                   field: str) -> None:
    problem(mem.client.get(API + route, params=params), 400, field)


def test_bad_recall_bodies_are_400s_naming_the_field(mem: Memories) -> None:
    problem(mem.client.post(f"{API}/recall", json={"query": "x", "limit": 0}), 400, "limit")
    problem(mem.client.post(f"{API}/recall", json={"query": "x" * 2001}), 400, "query")
    problem(mem.client.post(f"{API}/recall", json={}), 400, "query")
    problem(mem.client.post(f"{API}/recall", json={"query": "x", "since": ""}), 400, "since")
    problem(mem.client.post(f"{API}/purge", json={"namespace": "default"}), 400, "confirm")


def test_the_schema_describes_every_memory_route_with_bounds(mem: Memories) -> None:
    schema = mem.client.get("/api/schema/openapi.json").json()
    routes = {(method.upper(), path) for path, ops in schema["paths"].items() if path.startswith(API)
              for method in ops}
    assert routes == {("POST", API), ("GET", API), ("POST", f"{API}/procedural"), ("POST", f"{API}/recall"),
                      ("GET", f"{API}/count"), ("GET", f"{API}/export"), ("POST", f"{API}/purge"),
                      ("GET", f"{API}/health"), ("GET", f"{API}/{{key}}"), ("DELETE", f"{API}/{{key}}"),
                      ("DELETE", API), ("POST", f"{API}/batch")}
    listing = {p["name"]: p["schema"] for p in schema["paths"][API]["get"]["parameters"]}
    assert listing["limit"].get("maximum") == 1000 or any(
        s.get("maximum") == 1000 for s in listing["limit"].get("oneOf", []))
