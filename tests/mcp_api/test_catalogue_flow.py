"""Kumiho's whole tool catalogue through the official MCP client, over stdio (``kumiho-ce mcp``) and over HTTP:
a scripted flow builds a small project with the graph tools (spaces, items, revisions, tags, artifacts, a
bundle, edges), walks its provenance, uses every memory tool, deletes parts of it and checks that search and
the memory tools see exactly what remains. Every tool also answers a malformed call with the error shape.
The code-decision tools are offered only with KUMIHO_MEMORY_DECISIONS=1, which this appliance has."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.client.session import ClientSession

from appliance.mcp_api.catalogue import tools
from tests.appliance_process import Running, free_port, serve
from tests.fixtures import REFERENCE_NAMES
from tests.mcp_api.clients import http_session, stdio_session, stop_background_appliance

DECISIONS = {"KUMIHO_MEMORY_DECISIONS": "1"}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    root = tmp_path_factory.mktemp("repos")
    repo = root / "repo"  # a git repository the code-decision tools may read
    repo.mkdir()
    (repo / "README.md").write_text("The graph is Kùzu.\n")
    git = ["git", "-C", str(repo), "-c", "user.name=flow", "-c", "user.email=flow@localhost"]
    for step in (["init", "-q"], ["add", "README.md"], ["commit", "-q", "-m", "Embed Kùzu for the graph"]):
        subprocess.run([*git, *step], check=True, capture_output=True)
    with serve(tmp_path_factory.mktemp("flow") / "data", **DECISIONS,
               KUMIHO_CE_MAINTENANCE__CODE_REPO_ROOTS=json.dumps([str(root)])) as running:
        yield running


Session = Callable[[], Any]


@asynccontextmanager
async def _over_http(app: Running) -> AsyncIterator[ClientSession]:
    async with http_session(app.base_url) as session:
        yield session


@asynccontextmanager
async def _over_stdio(app: Running) -> AsyncIterator[ClientSession]:
    async with stdio_session(app.data_dir, int(app.base_url.rsplit(":", 1)[1]), **DECISIONS) as session:
        yield session


TRANSPORTS = {"http": _over_http, "stdio": _over_stdio}


class Calls:
    """Every call of the flow, checked: a well-formed call is not an error and carries the keys named (those
    of the reference's result that the flow relies on)."""

    def __init__(self, session: ClientSession) -> None:
        self.session, self.called = session, set[str]()

    async def ok(self, tool: str, keys: tuple[str, ...] = (), **arguments: Any) -> dict[str, Any]:
        result = await self.session.call_tool(tool, arguments)
        payload = json.loads(result.content[0].text)  # type: ignore[union-attr]
        assert not result.is_error, (tool, payload)
        assert result.structured_content == payload
        missing = [k for k in keys if k not in payload]
        assert not missing, (tool, missing, payload)
        self.called.add(tool)
        return payload  # type: ignore[no-any-return]

    async def error(self, tool: str, code: str | None = None, **arguments: Any) -> dict[str, Any]:
        result = await self.session.call_tool(tool, arguments)
        payload = json.loads(result.content[0].text)  # type: ignore[union-attr]
        assert result.is_error, (tool, payload)
        assert set(payload) == {"error"} and {"code", "message"} <= set(payload["error"]), payload
        assert "Traceback" not in payload["error"]["message"]
        if code:
            assert payload["error"]["code"] == code, payload
        return payload["error"]  # type: ignore[no-any-return]


async def _flow(c: Calls, tag: str) -> None:
    project = f"Flow{tag}"
    # -- structure --------------------------------------------------------------------------------------
    await c.ok("kumiho_create_project", ("created", "project"), name=project, description="the flow's project")
    await c.error("kumiho_create_project", name=project)  # exists
    listed = await c.ok("kumiho_list_projects", ("projects", "count"))
    assert project in {p["name"] for p in listed["projects"]}
    assert (await c.ok("kumiho_get_project", name=project))["name"] == project
    await c.ok("kumiho_create_space", ("created", "space"), project_name=project, space_name="assets")
    await c.ok("kumiho_create_space", ("created", "space"), project_name=project, space_name="chars",
               parent_path=f"/{project}/assets")
    spaces = await c.ok("kumiho_get_spaces", ("spaces", "count"), project_name=project, recursive=True)
    assert {s["path"] for s in spaces["spaces"]} >= {f"/{project}/assets", f"/{project}/assets/chars"}
    assert (await c.ok("kumiho_get_space", space_path=f"/{project}/assets"))["name"] == "assets"
    items = {}
    for name, kind, space in (("hero", "model", "assets/chars"), ("sword", "model", "assets"),
                              ("scene", "render", "assets")):
        made = await c.ok("kumiho_create_item", ("created", "item"), space_path=f"/{project}/{space}",
                          item_name=name, kind=kind, metadata={"owner": "flow"})
        items[name] = made["item"]["kref"]
    assert (await c.ok("kumiho_get_item", kref=items["hero"]))["item_name"] == "hero"
    found = await c.ok("kumiho_search_items", ("items", "count"), context_filter=f"{project}/*",
                       name_filter="her*", auth_token="")
    assert [i["kref"] for i in found["items"]] == [items["hero"]]
    # -- revisions, tags, artifacts, bundles -------------------------------------------------------------
    revs = {}
    for name in ("hero", "sword", "scene"):
        made = await c.ok("kumiho_create_revision", ("created", "revision"), item_kref=items[name],
                          metadata={"prompt": f"a {name}", "seed": "7"})
        revs[name] = made["revision"]["kref"]
    second = (await c.ok("kumiho_create_revision", item_kref=items["hero"]))["revision"]["kref"]
    history = await c.ok("kumiho_get_item_revisions", ("revisions", "count"), item_kref=items["hero"])
    assert history["count"] == 2
    assert (await c.ok("kumiho_get_revision", kref=second))["latest"] is True
    await c.ok("kumiho_tag_revision", ("tagged",), revision_kref=revs["hero"], tag="approved")
    assert (await c.ok("kumiho_get_revision_by_tag", item_kref=items["hero"], tag="approved"))["kref"] == \
        revs["hero"]
    as_of = await c.ok("kumiho_get_revision_as_of", item_kref=items["hero"], tag="approved",
                       time="2999-01-01T00:00:00Z")
    assert as_of["kref"] == revs["hero"]
    batch = await c.ok("kumiho_batch_get_revisions", ("revisions", "not_found"),
                       item_krefs=[items["hero"], items["sword"]], tag="latest")
    assert batch["found_count"] == 2
    await c.ok("kumiho_untag_revision", ("untagged",), revision_kref=revs["hero"], tag="approved")
    await c.error("kumiho_get_revision_by_tag", item_kref=items["hero"], tag="approved")
    location = f"/srv/assets/{tag}/hero.fbx"
    made = await c.ok("kumiho_create_artifact", ("created", "artifact"), revision_kref=revs["hero"],
                      name="mesh", location=location)
    artifact = made["artifact"]["kref"]
    assert (await c.ok("kumiho_get_artifacts", ("artifacts", "count"), revision_kref=revs["hero"]))["count"] == 1
    assert (await c.ok("kumiho_get_artifact", artifact_kref=artifact))["location"] == location
    assert (await c.ok("kumiho_get_artifacts_by_location", ("artifacts",), location=location))["count"] == 1
    assert (await c.ok("kumiho_resolve_kref", kref=artifact))["location"] == location
    bundle = (await c.ok("kumiho_create_bundle", ("created", "bundle"), space_path=f"/{project}/assets",
                         bundle_name="kit"))["bundle"]["kref"]
    assert (await c.ok("kumiho_get_bundle", bundle_kref=bundle))["kref"] == bundle
    await c.ok("kumiho_add_bundle_member", ("added",), bundle_kref=bundle, item_kref=items["hero"])
    await c.ok("kumiho_add_bundle_member", bundle_kref=bundle, item_kref=items["sword"])
    await c.ok("kumiho_remove_bundle_member", ("removed",), bundle_kref=bundle, item_kref=items["sword"])
    members = await c.ok("kumiho_get_bundle_members", ("members", "count"), bundle_kref=bundle)
    assert [m["item_kref"] for m in members["members"]] == [items["hero"]]
    await c.ok("kumiho_set_metadata", ("updated",), kref=items["sword"], metadata={"material": "steel"})
    assert (await c.ok("kumiho_get_item", kref=items["sword"]))["metadata"]["material"] == "steel"
    # -- provenance --------------------------------------------------------------------------------------
    await c.ok("kumiho_create_edge", ("created", "edge"), source_kref=revs["scene"], target_kref=revs["hero"],
               edge_type="DEPENDS_ON")
    await c.ok("kumiho_create_edge", source_kref=revs["hero"], target_kref=revs["sword"], edge_type="DEPENDS_ON")
    edges = await c.ok("kumiho_get_edges", ("edges", "count"), revision_kref=revs["hero"])
    assert edges["count"] == 2
    deps = await c.ok("kumiho_get_dependencies", ("dependencies", "count"), revision_kref=revs["scene"])
    assert set(deps["dependencies"]) == {revs["hero"], revs["sword"]}
    dependents = await c.ok("kumiho_get_dependents", ("dependents", "count"), revision_kref=revs["sword"])
    assert set(dependents["dependents"]) == {revs["hero"], revs["scene"]}
    summary = await c.ok("kumiho_get_provenance_summary", ("provenance_summary",), revision_kref=revs["scene"])
    assert summary["dependency_count"] == 2
    impact = await c.ok("kumiho_analyze_impact", ("impacted_revisions", "count"), revision_kref=revs["sword"])
    assert {r["revision_kref"] for r in impact["impacted_revisions"]} == {revs["hero"], revs["scene"]}
    path = await c.ok("kumiho_find_path", ("path_found",), source_kref=revs["scene"], target_kref=revs["sword"])
    assert path["path_found"] is True
    # -- memory ------------------------------------------------------------------------------------------
    notes = f"flow-{tag}"  # memory tools work in the client's project (CognitiveMemory here)
    stored = await c.ok("kumiho_memory_store", ("stored",), space_path=notes,
                        title="Flow uses zeppelin shaders", user_text="We render the flow scene with zeppelin "
                        "shaders.", memory_type="fact")
    memory = stored["revision_kref"]
    engaged = await c.ok("kumiho_memory_engage", ("context", "results", "source_krefs"),
                         query="which shaders render the scene?", space_paths=[notes])
    recalled = await c.ok("kumiho_memory_recall", ("results", "count"), query="zeppelin shaders",
                          space_paths=[notes])
    assert memory in {r["kref"] for r in recalled["results"]}
    await c.ok("kumiho_memory_retrieve", ("item_krefs", "revision_krefs"), query="zeppelin", space_paths=[notes])
    typo = await c.ok("kumiho_fulltext_search", ("results", "count"), query="zepelin",
                      context=f"CognitiveMemory/{notes}")
    assert memory.split("?")[0] in {r["item"]["kref"] for r in typo["results"]}
    session = f"flow-{tag}"
    reflected = await c.ok("kumiho_memory_reflect", ("stored_krefs", "captures_stored"), session_id=session,
                           response="Noted the shaders.", source_krefs=engaged["source_krefs"],
                           idempotency_prefix=f"flow-{tag}", captures=[
                               {"type": "decision", "title": "Shaders stay zeppelin for the flow",
                                "content": "We keep zeppelin shaders for the flow scene."}])
    again = await c.ok("kumiho_memory_reflect", session_id=session, response="Noted the shaders.",
                       idempotency_prefix=f"flow-{tag}", captures=[
                           {"type": "decision", "title": "Shaders stay zeppelin for the flow",
                            "content": "We keep zeppelin shaders for the flow scene."}])
    assert again["stored_krefs"] == reflected["stored_krefs"]
    await c.ok("kumiho_memory_ingest", ("session_id", "working_memory"), user_id="flow", message="Hello flow",
               session_id=session)
    await c.ok("kumiho_memory_add_response", ("session_id",), session_id=session, response="Hello back")
    await c.ok("kumiho_chat_add", ("message_count", "session_id"), session_id=session, message="one more")
    chat = await c.ok("kumiho_chat_get", ("messages", "session_id"), session_id=session)
    assert [m["content"] for m in chat["messages"]][-1] == "one more"
    await c.ok("kumiho_memory_consolidate", ("session_id",), session_id=session,
               summary="The flow session greeted and settled on zeppelin shaders.")
    await c.ok("kumiho_chat_add", session_id=f"{session}-b", message="to be cleared")
    await c.ok("kumiho_chat_clear", ("cleared_count",), session_id=f"{session}-b")
    assert (await c.ok("kumiho_chat_get", session_id=f"{session}-b"))["messages"] == []
    await c.ok("kumiho_memory_store_execution", ("success",), task="render the flow scene", status="done",
               exit_code=0, space_hint="runs")
    await c.ok("kumiho_memory_discover_edges", revision_kref=memory, summary="zeppelin shaders")
    await c.ok("kumiho_memory_dream_state", ("success",), project=project, dry_run=True)
    await c.ok("kumiho_memory_space_profile", project=project, dry_run=True)
    await c.ok("kumiho_memory_decompose", kref=memory,
               entities=[{"name": "zeppelin shaders", "type": "technology"}],
               facts=[{"statement": "The flow scene uses zeppelin shaders", "about": ["zeppelin shaders"]}])
    experience = await c.ok("kumiho_memory_record_experience", space_path=f"experience-{tag}", record={
        "experience_id": f"exp-{tag}", "title": "Chose zeppelin shaders", "situation": "Rendering the scene",
        "goal": "Fast renders", "decision": "Use zeppelin shaders", "rationale": "They are fast",
        "expected_outcome": "Renders under a minute"})
    experience_kref = experience.get("revision_kref") or experience["kref"]
    outcome = await c.ok("kumiho_memory_record_outcome", experience_kref=experience_kref, outcome={
        "observed_outcome": "Renders took 40 s", "observed_at": "2026-12-01T10:00:00Z",
        "outcome_status": "success"})
    outcome_kref = outcome.get("revision_kref") or outcome["kref"]
    request = await c.ok("kumiho_memory_prepare_patterns", ("sources", "snapshot_id"),
                         source_krefs=[experience_kref, outcome_kref],
                         space_paths=[f"/CognitiveMemory/experience-{tag}"])
    pattern = await c.ok("kumiho_memory_store_pattern", ("candidate",), request=request,
                         space_path=f"patterns-{tag}",
                         candidate={"kind": "conditional_lesson", "title": "Zeppelin shaders render fast",
                                    "hypothesis": "Zeppelin shaders keep renders under a minute.",
                                    "applicability_conditions": ["Scenes like the flow's"], "counterexamples": [],
                                    "source_krefs": [experience_kref]})
    checked = await c.ok("kumiho_memory_check_pattern", ("status",), pattern_kref=pattern["revision_kref"],
                         space_paths=[f"/CognitiveMemory/experience-{tag}", f"/CognitiveMemory/patterns-{tag}"])
    assert checked["status"] == "reviewable", checked
    insight = await c.ok("kumiho_memory_engage", ("synthesis_request",), query="which shaders render the scene?",
                         space_paths=[notes], include_insights=True, current_context="a new scene",
                         goals=["fast renders"])
    cited = insight["synthesis_request"]["source_krefs"][:1]
    report = await c.ok("kumiho_memory_validate_insight_response", ("valid",), request=insight["synthesis_request"],
                        response={"mode": "direct", "answer": "Zeppelin shaders.", "source_krefs": cited,
                                  "hypotheses": []})
    assert report["valid"] is True, report
    await c.ok("kumiho_code_capture", repo_path="repo", commit_ref="HEAD", decisions=[
        {"title": "Kùzu for the graph", "decision": "Embed Kùzu", "rationale": "one process, no server",
         "files": ["README.md"]}])
    why = await c.ok("kumiho_code_why", file="README.md", repo="repo")
    assert "Kùzu" in json.dumps(why, ensure_ascii=False)
    await c.ok("kumiho_code_ingest", repo_path="repo", max_commits=5)  # no model here: answers skipped
    await c.ok("kumiho_chat_add", session_id=f"{session}-code", message="We embed Kùzu: one process, no server.")
    await c.ok("kumiho_code_mine_session", session_id=f"{session}-code", repo_path="repo")
    # -- deletions: search and memory see exactly what remains ---------------------------------------------
    await c.ok("kumiho_delete_edge", ("deleted",), source_kref=revs["hero"], target_kref=revs["sword"],
               edge_type="DEPENDS_ON")
    deps = await c.ok("kumiho_get_dependencies", revision_kref=revs["scene"])
    assert set(deps["dependencies"]) == {revs["hero"]}
    await c.ok("kumiho_delete_artifact", ("deleted",), artifact_kref=artifact)
    assert (await c.ok("kumiho_get_artifacts", revision_kref=revs["hero"]))["count"] == 0
    await c.ok("kumiho_delete_revision", ("deleted",), revision_kref=second, force=True)
    assert (await c.ok("kumiho_get_item_revisions", item_kref=items["hero"]))["count"] == 1
    await c.ok("kumiho_delete_item", ("deleted",), item_kref=items["sword"], force=True)
    await c.error("kumiho_get_item", kref=items["sword"])
    await c.ok("kumiho_delete_space", ("deleted",), space_path=f"/{project}/assets/chars", force=True)
    left = await c.ok("kumiho_search_items", context_filter=project, name_filter="*")
    assert items["hero"] not in {i["kref"] for i in left["items"]}
    assert items["scene"] in {i["kref"] for i in left["items"]}
    await c.ok("kumiho_deprecate_item", ("updated",), item_kref=str(memory).split("?")[0])
    gone = await c.ok("kumiho_memory_recall", query="zeppelin shaders", space_paths=[notes])
    assert memory not in {r["kref"] for r in gone["results"]}
    before = await c.ok("kumiho_fulltext_search", query="scene", context=project)
    assert items["scene"] in {r["item"]["kref"] for r in before["results"]}, before
    await c.ok("kumiho_delete_project", ("deleted",), project_name=project)  # archived: hidden from search
    after = await c.ok("kumiho_fulltext_search", query="scene", context=project)
    assert after["count"] == 0, after


async def _malformed(c: Calls) -> None:
    """Every tool answers a malformed call with the error shape naming a field: its required parameters (or
    its first one) with values of the wrong type; a tool without parameters, too many arguments."""
    for name, op in tools().items():
        properties = op.input_schema.get("properties", {})
        if not properties:
            await c.error(name, "invalid_argument", **{f"k{i}": 1 for i in range(70)})
            continue
        broken = op.input_schema.get("required") or [next(iter(properties))]
        wrong = {field: 5 if properties[field].get("type", "string") == "string" or "enum" in properties[field]
                 else "five" for field in broken}
        error = await c.error(name, "invalid_argument", **wrong)
        assert error["field"].split(".")[0].split("[")[0] in broken, (name, error)


@pytest.mark.parametrize("transport", sorted(TRANSPORTS))
def test_every_reference_tool_through_a_scripted_flow(app: Running, transport: str) -> None:
    async def main() -> set[str]:
        async with TRANSPORTS[transport](app) as session:
            listed = {t.name for t in (await session.list_tools()).tools}
            assert listed >= REFERENCE_NAMES, sorted(REFERENCE_NAMES - listed)
            calls = Calls(session)
            await _flow(calls, transport)
            await _malformed(calls)
            return calls.called

    called = anyio.run(main)
    assert called >= REFERENCE_NAMES, sorted(REFERENCE_NAMES - called)


def test_the_code_tools_are_offered_only_with_their_switch(tmp_path: Path) -> None:
    async def main() -> set[str]:
        async with stdio_session(tmp_path / "data", free_port()) as session:
            return {t.name for t in (await session.list_tools()).tools}

    try:
        names = anyio.run(main)
    finally:
        stop_background_appliance(tmp_path / "data")
    assert not {n for n in names if n.startswith("kumiho_code_")}
    assert REFERENCE_NAMES - names == {"kumiho_code_why", "kumiho_code_ingest", "kumiho_code_capture",
                                       "kumiho_code_mine_session"}
