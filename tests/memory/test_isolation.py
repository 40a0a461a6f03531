"""Projects are isolated: the memories of one never appear in another's recall, engage, retrieve, full-text
search, item search, graph view, ``/api/v1/search?project=…``, ingest recall, consolidation links, edge
discovery or Dream State batch — whether the project comes from the ``project`` argument or from the
``X-Kumiho-Project`` header a stdio shim forwards. Two projects hold look-alike memories (the same words, the
same session id) that differ only by a marker; every answer in one is searched for the other's marker and
krefs. Real stores, the in-process app over HTTP, a ScriptedModel for the model-backed tools."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from appliance.inference.chat import ScriptedModel
from tests.inprocess import InProcess, serve_in_process
from tests.memory.test_model_tools import SUMMARY, Script, assess, wait_job

PROJECTS = {"Alpha": "alphavault7731", "Beta": "betaharbor2208"}  # project → its marker
TOPIC = "heliotrope greenhouse irrigation schedule"  # words every memory of both projects shares


def mcp(app: InProcess, tool: str, arguments: dict[str, Any], header: str | None = None) -> dict[str, Any]:
    """One tools/call over HTTP (stateless JSON MCP), optionally naming the project by header as a shim does."""
    answer = httpx.post(app.base_url + "/mcp", timeout=120, json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}},
        headers={"accept": "application/json, text/event-stream", **({"x-kumiho-project": header} if header else {})})
    result = answer.json()["result"]
    payload = json.loads(result["content"][0]["text"])
    assert not result.get("isError"), (tool, payload)
    return payload  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcess, Script, dict[str, list[str]]]]:
    """Both projects filled alike; for each, the krefs of everything it holds."""
    script = Script()
    script.answers.update({"summary": SUMMARY, "angles": {"queries": [TOPIC, "watering plan"]},
                           "implications": {"queries": [TOPIC, "greenhouse watering"]},
                           "dream": lambda call: assess(call)})
    model = ScriptedModel([script] * 1000)
    data = tmp_path_factory.mktemp("isolation") / "data"
    with serve_in_process(data, model, maintenance={"dream_state_min_age_days": 0,
                                                    "idle_consolidation_minutes": 0}) as app:
        held: dict[str, list[str]] = {}
        for project, marker in PROJECTS.items():
            app.services.graph.ensure_project(project)
            by_arg = {"project": project}  # Alpha by argument, Beta by header: both ways write and read
            header = project if project == "Beta" else None
            args = {} if header else by_arg
            text = f"{TOPIC}: water at dawn, marker {marker}"
            stored = [mcp(app, "kumiho_memory_store", {"title": f"{TOPIC} {marker}", "user_text": text,
                                                       "space_path": "garden", "stack_revisions": False, **args},
                          header)["revision_kref"],
                      mcp(app, "memory_store", {"title": f"Operator {TOPIC} {marker}", "user_text": text,
                                                "space_path": "garden", "stack_revisions": False, **args},
                          header)["revision_kref"]]
            # reflect has no project argument (as Kumiho's): its project is the client's, here by header
            reflected = mcp(app, "kumiho_memory_reflect", {
                "session_id": "shared-session", "response": f"Noted {marker}", "discover_edges": False,
                "captures": [{"type": "fact", "title": f"Captured {TOPIC} {marker}", "content": text,
                              "space_hint": "garden"}]}, project)
            stored += reflected["stored_krefs"]
            held[project] = stored
        yield app, script, held


def _leaks(answer: Any, project: str, held: dict[str, list[str]]) -> list[str]:
    """The other projects' markers, krefs and project names found in ``answer``."""
    text = json.dumps(answer)
    found = []
    for other, marker in PROJECTS.items():
        if other == project:
            continue
        found += [marker] * (marker in text) + [k for k in held[other] if k in text]
        found += [f"kref://{other}/"] * (f"kref://{other}/" in text)
    return found


@pytest.mark.parametrize("project", list(PROJECTS))
def test_reads_in_one_project_never_show_another(world: tuple[InProcess, Script, dict[str, list[str]]],
                                                  project: str) -> None:
    app, _, held = world
    other = next(p for p in PROJECTS if p != project)
    query = {"query": TOPIC}  # the words of both projects' memories
    answers = {
        "engage (header)": mcp(app, "kumiho_memory_engage", {**query, "limit": 20}, project),
        "engage graph-augmented (header)": mcp(app, "kumiho_memory_engage",
                                               {**query, "limit": 20, "graph_augmented": True}, project),
        "recall (header)": mcp(app, "kumiho_memory_recall", {**query, "limit": 20}, project),
        "memory_engage (argument, other header)": mcp(app, "memory_engage", {**query, "project": project,
                                                                             "limit": 20}, other),
        "retrieve search": mcp(app, "kumiho_memory_retrieve", {**query, "project": project, "limit": 20}),
        "retrieve latest": mcp(app, "kumiho_memory_retrieve", {**query, "project": project, "mode": "latest"}),
        "retrieve first": mcp(app, "kumiho_memory_retrieve", {**query, "project": project, "mode": "first"}),
        "retrieve (header)": mcp(app, "kumiho_memory_retrieve", {**query, "limit": 20}, project),
        "memory_retrieve": mcp(app, "memory_retrieve", {**query, "project": project, "limit": 20}),
        "fulltext": mcp(app, "kumiho_fulltext_search", {**query, "context": project, "include_revision_metadata":
                                                        True}),
        "memory_fulltext": mcp(app, "memory_fulltext", {**query, "context": project}),
        "memory_search": mcp(app, "memory_search", {"context_filter": project, "include_metadata": True}),
        "memory_graph": mcp(app, "memory_graph", {"project": project, "limit": 500}),
        "/api/v1/search?project": app.get(f"/api/v1/search?q={TOPIC}&project={project}&limit=100"),
    }
    for name, answer in answers.items():
        assert not _leaks(answer, project, held), (name, _leaks(answer, project, held))
    print(json.dumps({"isolation": {"project": project, "reads_checked": sorted(answers), "leaks": 0}}))
    # and each read does find this project's own memories: the query reaches both projects' words
    for name in ("engage (header)", "recall (header)", "memory_engage (argument, other header)", "retrieve search",
                 "retrieve (header)", "memory_retrieve", "fulltext", "memory_fulltext"):
        assert f"kref://{project}/" in json.dumps(answers[name]), name
    assert {r["revision_kref"] for r in answers["/api/v1/search?project"]["results"]} >= set(held[project])
    # without a project the operator's search spans every project (the admin API is the operator's)
    everything = app.get(f"/api/v1/search?q={TOPIC}&limit=100")
    assert {r["revision_kref"] for r in everything["results"]} >= set(held["Alpha"] + held["Beta"])
    assert _leaks(everything, project, held)  # which is what every answer above would look like if scoping failed


@pytest.mark.parametrize("project", list(PROJECTS))
def test_model_backed_work_in_one_project_never_reaches_another(
        world: tuple[InProcess, Script, dict[str, list[str]]], project: str) -> None:
    app, script, held = world
    header = project
    marker = PROJECTS[project]
    # the same session id in both projects: ingest recalls, consolidation links and transcribes only its own
    ingested = mcp(app, "kumiho_memory_ingest", {"user_id": "gardener", "session_id": "shared-session",
                                                 "message": f"When do we water the {TOPIC}? {marker}"}, header)
    assert not _leaks(ingested, project, held) and ingested["long_term_memory"]
    script.calls.clear()
    consolidated = mcp(app, "kumiho_memory_consolidate", {"session_id": "shared-session"}, header)
    assert consolidated["success"] and not _leaks(_calls_text(script.calls["summary"]), project, held)
    revision = consolidated["store_result"]["revision_kref"]
    edges = mcp(app, "kumiho_get_edges", {"revision_kref": revision})
    assert edges["count"] and not _leaks(edges, project, held)
    located = mcp(app, "kumiho_resolve_kref", {"kref": revision})
    assert marker in Path(located["location"]).read_text() and not _leaks(
        Path(located["location"]).read_text(), project, held)
    # edge discovery searches this project only
    found = mcp(app, "kumiho_memory_discover_edges", {"revision_kref": held[project][0], "max_edges": 10,
                                                      "summary": TOPIC, "min_score": 0.0})
    assert found["count"] and not _leaks(found, project, held)
    # Dream State reviews this project's memories only: the model sees no other, the report names no other
    script.calls.clear()
    report = mcp(app, "kumiho_memory_dream_state", {"project": project, "dry_run": True})
    if report.get("status") == "running":
        report = wait_job(app, report["job_id"])["result"]
    assert report["revisions_assessed"] >= len(held[project])
    assert script.calls["dream"] and not _leaks(_calls_text(script.calls["dream"]), project, held)
    assert not _leaks(report, project, held)
    print(json.dumps({"isolation": {"project": project, "model_backed_checked": [
        "ingest recall", "consolidate prompt, transcript and REFERENCED edges", "discover_edges",
        "dream_state prompts and report"], "model_calls_seen": len(script.calls["dream"]), "leaks": 0}}))


def _calls_text(calls: list[Any]) -> str:
    return json.dumps([c.messages for c in calls])


def test_the_graph_view_of_a_project_never_shows_a_project_whose_name_extends_it(tmp_path: Path) -> None:
    """``memory_graph`` for project Atlas with the space ``Atlas2/garden``: the space is Atlas's own
    ``Atlas/Atlas2/garden`` (empty), not project Atlas2's ``garden``, whose name merely starts with "Atlas"."""
    with serve_in_process(tmp_path / "data", None) as app:
        for project in ("Atlas", "Atlas2"):
            app.services.graph.ensure_project(project)
            mcp(app, "kumiho_memory_store", {"title": f"{TOPIC} {project}", "user_text": f"{TOPIC} in {project}",
                                             "space_path": "garden", "project": project})
        foreign = mcp(app, "memory_graph", {"project": "Atlas", "space": "Atlas2/garden", "limit": 500})
        assert "kref://Atlas2/" not in json.dumps(foreign) and not foreign["stats"]["total_items"], foreign
        own = mcp(app, "memory_graph", {"project": "Atlas", "space": "Atlas/garden", "limit": 500})
        assert own["stats"]["total_items"] == 1 and "kref://Atlas2/" not in json.dumps(own)
        assert mcp(app, "memory_graph", {"project": "Atlas2", "space": "garden", "limit": 500})["stats"][
            "total_items"] == 1
