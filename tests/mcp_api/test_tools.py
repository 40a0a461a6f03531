"""Every tool through the official MCP client over streamable HTTP, against a real appliance process with
the real embedding model: the engage → reflect → engage loop, stacking, deprecation, errors."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import grpc
import httpx
import pytest

from appliance.grpc_api.descriptor import message
from appliance.mcp_api.catalogue import tools
from appliance.mcp_api.server import build_server
from appliance.operations.catalogue import operations
from tests.appliance_process import Running, serve
from tests.mcp_api.clients import RevkaLikeClient, call, http_session, in_http_session


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with serve(tmp_path_factory.mktemp("mcp") / "data", KUMIHO_CE_SEARCH__EMBEDDER="minilm") as running:
        yield running


def run(app: Running, steps: Any) -> Any:
    return in_http_session(app.base_url, steps)


def test_tools_list_is_one_page_with_every_tool_and_its_schema(app: Running) -> None:
    async def steps(session: Any) -> Any:
        return await session.list_tools()

    listed = run(app, steps)
    assert listed.next_cursor is None
    names = {t.name for t in listed.tools}
    # every operation but those behind a switch the test process does not set (KUMIHO_MEMORY_DECISIONS)
    assert names == set(tools()) == {name for name, op in operations().items() if op.gate is None}
    engage = next(t for t in listed.tools if t.name == "kumiho_memory_engage")
    assert engage.input_schema["required"] == ["query"]
    assert engage.annotations.read_only_hint is True
    dream = next(t for t in listed.tools if t.name == "kumiho_memory_dream_state")
    assert dream.annotations.destructive_hint is True


def test_engage_reflect_engage_finds_what_was_reflected_and_links_its_sources(app: Running) -> None:
    async def steps(session: Any) -> dict[str, Any]:
        seed = await call(session, "kumiho_memory_reflect", session_id="s-loop", response="Noted.", captures=[
            {"type": "decision", "title": "Chose gRPC for the transport service on 2026-03-27",
             "content": "We chose gRPC over REST for the internal transport service because of streaming.",
             "space_hint": "decisions"}])
        first = await call(session, "kumiho_memory_engage", query="which protocol did we pick for transport?")
        reflected = await call(session, "kumiho_memory_reflect", session_id="s-loop",
                               response="The transport service uses gRPC.", source_krefs=first["source_krefs"],
                               captures=[{"type": "fact", "title": "Transport service speaks gRPC on port 7443",
                                          "content": "The transport service listens for gRPC on port 7443.",
                                          "space_hint": "facts"}])
        again = await call(session, "kumiho_memory_engage", query="what port does the transport service use?")
        edges = await call(session, "kumiho_get_edges", revision_kref=reflected["stored_krefs"][0],
                           direction="outgoing")
        return {"seed": seed, "first": first, "reflected": reflected, "again": again, "edges": edges}

    out = run(app, steps)
    assert out["seed"]["captures_stored"] == 1 and out["seed"]["buffered"] is True
    assert out["seed"]["edge_discovery"].startswith("skipped: no local model")
    first = out["first"]
    assert first["count"] >= 1 and first["source_krefs"][0] == out["seed"]["stored_krefs"][0]
    assert "Chose gRPC" in first["context"] and first["results"][0]["content"]
    assert {"buffered", "captures_stored", "edges_discovered", "stored_krefs"} <= set(out["reflected"])
    assert out["again"]["results"][0]["kref"] == out["reflected"]["stored_krefs"][0]
    targets = {e["target_kref"] for e in out["edges"]["edges"] if e["edge_type"] == "DERIVED_FROM"}
    assert targets == set(first["source_krefs"])


def test_storing_a_similar_memory_stacks_revision_2_instead_of_a_duplicate(app: Running) -> None:
    text = ("The nightly backup job runs at 02:00 UTC and copies the graph directory to the NAS share "
            "named archive, keeping fourteen daily snapshots.")

    async def steps(session: Any) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        one = await call(session, "kumiho_memory_store", user_text=text, title="Nightly backup schedule",
                         space_path="ops", memory_type="fact")
        two = await call(session, "kumiho_memory_store", title="Nightly backup schedule",
                         user_text=text.replace("fourteen", "fifteen"), space_path="ops", memory_type="fact")
        tagged = await call(session, "kumiho_get_revision_by_tag", item_kref=two["item_kref"])
        return one, two, tagged

    one, two, tagged = run(app, steps)
    assert one["stacked"] is False and one["revision_kref"].endswith("?r=1")
    assert two["stacked"] is True and two["item_kref"] == one["item_kref"], two
    assert two["revision_kref"].endswith("?r=2") and two["previous_revision_kref"] == one["revision_kref"]
    assert two["stack_score"] >= 0.75
    assert tagged["kref"] == two["revision_kref"] and tagged["published"] is True


def test_deprecation_hides_a_memory_from_search_and_restore_brings_it_back(app: Running) -> None:
    async def steps(session: Any) -> list[dict[str, Any]]:
        stored = await call(session, "kumiho_memory_store", title="Favourite tea",
                            user_text="Alex drinks oolong tea every afternoon.", space_path="preferences")
        seen = []
        for deprecated in (None, True, False):
            if deprecated is not None:
                await call(session, "kumiho_deprecate_item", item_kref=stored["item_kref"], deprecated=deprecated)
            found = await call(session, "kumiho_memory_recall", query="what tea does Alex drink?")
            seen.append({r["item_kref"] for r in found["results"]} & {stored["item_kref"]})
        return seen

    before, hidden, restored = run(app, steps)
    assert before and not hidden and restored


def test_fulltext_search_tolerates_typos_and_filters_by_context(app: Running) -> None:
    async def steps(session: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        await call(session, "kumiho_memory_store", title="Transport layer notes",
                   user_text="The transport layer retries three times.", space_path="notes/network")
        typo = await call(session, "kumiho_fulltext_search", query="transprot layer")
        elsewhere = await call(session, "kumiho_fulltext_search", query="transport layer",
                               context="CognitiveMemory/preferences")
        return typo, elsewhere

    typo, elsewhere = run(app, steps)
    assert any(r["item"]["space"] == "CognitiveMemory/notes/network" for r in typo["results"])
    assert all(r["item"]["space"].startswith("CognitiveMemory/preferences") for r in elsewhere["results"])


def test_fulltext_search_finds_items_by_name_as_the_grpc_search_does(app: Running) -> None:
    """An item whose name says what its text does not (``transport-schedule`` holding "the night bus
    timetable") is found by its name, typos included, through MCP as through Kumiho's gRPC Search."""
    async def steps(session: Any) -> dict[str, Any]:
        await call(session, "kumiho_create_space", project_name="CognitiveMemory", space_name="travel")
        item = await call(session, "kumiho_create_item", space_path="/CognitiveMemory/travel",
                          item_name="transport-schedule", kind="note")
        await call(session, "kumiho_create_revision", item_kref=item["item"]["kref"],
                   metadata={"title": "Night bus", "summary": "The night bus timetable changes in winter."})
        return await call(session, "kumiho_fulltext_search", query="transprot", context="CognitiveMemory/travel")

    found = run(app, steps)
    assert [(r["item"]["item_name"], r["matched_in"]) for r in found["results"]] == [("transport-schedule", "item")]
    with grpc.insecure_channel(app.base_url.removeprefix("http://")) as channel:
        search = channel.unary_unary("/kumiho.KumihoService/Search",
                                     request_serializer=message("SearchRequest").SerializeToString,
                                     response_deserializer=message("SearchResponse").FromString)
        answer = search(message("SearchRequest")(query="transprot", context_filter="CognitiveMemory/travel"),
                        timeout=30)
    assert [(r.item.item_name, round(r.score, 4)) for r in answer.results] == [
        ("transport-schedule", found["results"][0]["score"])]


def test_credentials_are_replaced_before_anything_is_written(app: Running) -> None:
    secret = "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4"

    async def steps(session: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        stored = await call(session, "kumiho_memory_store", title="Deploy key",
                            user_text=f"The deploy uses the key {secret} for the registry.", space_path="ops")
        found = await call(session, "kumiho_get_revision_by_tag", item_kref=stored["item_kref"])
        return stored, found

    stored, found = run(app, steps)
    assert stored["redacted"] and secret not in json.dumps(found)
    assert "[secret]" in found["metadata"]["summary"]
    for path in (app.data_dir / "artifacts").rglob("*.md"):
        assert secret not in path.read_text()


@pytest.mark.parametrize(("tool", "arguments", "field"), [
    ("kumiho_get_revision_by_tag", {"item_kref": "kref://CognitiveMemory/nowhere/missing.conversation"}, None),
    ("kumiho_memory_reflect", {"session_id": "s", "response": "r",
                               "captures": [{"type": "Big Decision", "title": "t", "content": "c"}]},
     "captures[0].type"),
    ("kumiho_memory_recall", {"query": "anything", "limit": -1}, "limit"),
    ("kumiho_memory_engage", {"query": "anything", "space_paths": ["no-such-space"]}, "space_paths"),
    ("kumiho_memory_engage", {}, "query"),
    ("kumiho_resolve_kref", {"kref": "kref://CognitiveMemory/../etc"}, "kref"),
])
def test_bad_input_is_a_tool_error_that_says_what_to_change(app: Running, tool: str, arguments: dict[str, Any],
                                                            field: str | None) -> None:
    async def steps(session: Any) -> Any:
        return await session.call_tool(tool, arguments)

    result = run(app, steps)
    assert result.is_error is True
    error = json.loads(result.content[0].text)["error"]
    assert set(error) >= {"code", "message"} and "Traceback" not in error["message"]
    if field:
        assert error["message"].startswith(field), error


def test_a_reflect_batch_with_one_bad_capture_writes_nothing(app: Running) -> None:
    good = [{"type": "fact", "title": f"Batch fact {i}", "content": f"Batch fact number {i} about zebras.",
             "space_hint": "batch"} for i in range(4)]

    async def steps(session: Any) -> tuple[Any, dict[str, Any]]:
        bad = await session.call_tool("kumiho_memory_reflect", {
            "session_id": "s-batch", "response": "r",
            "captures": [*good, {"type": "fact", "title": "", "content": "no title"}]})
        found = await call(session, "kumiho_fulltext_search", query="zebras")
        return bad, found

    bad, found = run(app, steps)
    assert bad.is_error and "captures[4].title" in bad.content[0].text
    assert found["count"] == 0


def test_revka_like_client_handshake_engage_and_reflect(app: Running) -> None:
    with RevkaLikeClient(app.base_url) as client:
        revka_round_trip(client)


def revka_round_trip(client: RevkaLikeClient) -> None:
    init = client.handshake()
    assert init["protocolVersion"] == "2024-11-05"
    listed = client.post("tools/list").json()["result"]
    assert "nextCursor" not in listed or listed["nextCursor"] is None
    assert all("inputSchema" in t for t in listed["tools"])
    assert "kumiho_memory_engage" in {t["name"] for t in listed["tools"]}
    reflected = json.loads(client.tool_text("kumiho_memory_reflect", {
        "session_id": "revka-1", "response": "Got it.", "captures": [
            {"type": "preference", "title": "User prefers metric units",
             "content": "The user wants distances in kilometres, never miles.", "space_hint": "preferences"}]}))
    assert reflected["captures_stored"] == 1
    engaged = json.loads(client.tool_text("kumiho_memory_engage", {
        "query": "which units does the user want for distances?", "space_paths": ["CognitiveMemory"],
        "recall_mode": "summarized", "limit": 3}))
    assert engaged["context"] and all(r["title"] and r["content"] for r in engaged["results"])
    error = json.loads(client.tool_text("kumiho_memory_engage", {"limit": 3}))
    assert "error" in error and "query" in error["error"]["message"]


def test_operator_engage_floors_min_score_and_caps_limit(app: Running) -> None:
    async def steps(session: Any) -> dict[str, Any]:
        for i in range(5):
            await call(session, "kumiho_memory_store", title=f"Coffee habit {i}",
                       user_text=f"Sam drinks coffee number {i} with oat milk in the morning.",
                       space_path=f"habits/{i}")
        return await call(session, "memory_engage", query="how does Sam take coffee?", limit=50, min_score=0.0)

    result = run(app, steps)
    assert result["limit"] == 3 and result["min_score"] == 0.4
    assert result["count"] <= 3 and all(r["score"] >= 0.4 for r in result["results"])
    assert set(result) >= {"context", "results", "source_krefs", "count"}


def test_memory_graph_returns_the_dashboard_shape(app: Running) -> None:
    async def steps(session: Any) -> dict[str, Any]:
        return await call(session, "memory_graph", limit=50)

    graph = run(app, steps)
    assert graph["spaces"][0] == "CognitiveMemory"
    kinds = {n["kind"] for n in graph["nodes"]}
    assert "space" in kinds and "conversation" in kinds
    ids = {n["id"] for n in graph["nodes"]}
    assert all(e["source"] in ids and e["target"] in ids for e in graph["edges"])
    assert {"BELONGS_TO", "CHILD_OF"} <= {e["edge_type"] for e in graph["edges"]}
    assert graph["stats"]["kinds"]["space"] == len(graph["spaces"])


def test_the_http_endpoint_refuses_foreign_hosts(app: Running) -> None:
    answer = httpx.post(app.base_url + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                        headers={"host": "evil.example", "accept": "application/json, text/event-stream"})
    assert answer.status_code in (400, 403, 421)


def test_working_memory_survives_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"

    async def ingest(running: Running, message: str) -> dict[str, Any]:
        async with http_session(running.base_url) as session:
            return await call(session, "kumiho_memory_ingest", user_id="alex", message=message,
                              session_id="alex-session")

    with serve(data) as first:
        anyio.run(ingest, first, "Remember that my flight is on Friday.")
        assert first.stop() == 0
    with serve(data) as second:
        after = anyio.run(ingest, second, "And the hotel is in Lyon.")
    assert [m["content"] for m in after["working_memory"]] == [
        "Remember that my flight is on Friday.", "And the hotel is in Lyon."]


def test_retrieve_modes_search_latest_and_first(app: Running) -> None:
    async def steps(session: Any) -> dict[str, dict[str, Any]]:
        for day in ("01", "02", "03"):
            await call(session, "kumiho_memory_store", title=f"Standup on March {day}",
                       user_text=f"Standup notes for March {day}: the glacier migration progressed.",
                       space_path="standups", stack_revisions=False)
        return {mode: await call(session, "kumiho_memory_retrieve", query="glacier migration standup",
                                 space_paths=["standups"], mode=mode, limit=2)
                for mode in ("search", "latest", "first")}

    out = run(app, steps)
    assert len(out["search"]["item_krefs"]) == 2 and len(out["search"]["scores"]) == 2
    assert out["latest"]["created_at"] == sorted(out["latest"]["created_at"], reverse=True)
    assert "March 03" in out["latest"]["results"][0]["title"]
    assert len(out["first"]["item_krefs"]) == 1 and "scores" not in out["first"]
    assert out["first"]["item_krefs"][0] != out["latest"]["item_krefs"][0]


def test_store_execution_records_action_or_error_with_a_log_artifact(app: Running) -> None:
    async def steps(session: Any) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        ok = await call(session, "kumiho_memory_store_execution", task="make test", status="done", exit_code=0,
                        stdout="210 passed", space_hint="ci")
        bad = await call(session, "kumiho_memory_store_execution", task="make lint", status="failed",
                         exit_code=2, stderr="E501 line too long", space_hint="ci")
        located = await call(session, "kumiho_resolve_kref", kref=bad["store_result"]["revision_kref"])
        return ok, bad, located

    ok, bad, located = run(app, steps)
    assert ok["memory_type"] == "action" and bad["memory_type"] == "error"
    assert bad["store_result"]["summary"].startswith("Attempted 'make lint' but failed: E501")
    log = Path(located["location"]).read_text()
    assert located["resolved"] and "# Tool Execution: make lint" in log and "E501" in log


def test_the_same_execution_stored_twice_is_two_revisions_not_an_error(app: Running) -> None:
    """Identical text lands on the same item (its name hashes the text); its topic bundle already holds it."""
    execution = {"task": "nightly backup", "status": "failed", "exit_code": 1, "stderr": "disk full",
                 "topics": ["backups"], "space_hint": "ops"}

    async def steps(session: Any) -> list[Any]:
        return [await session.call_tool("kumiho_memory_store_execution", execution) for _ in range(2)]

    first, second = run(app, steps)
    assert not first.is_error and not second.is_error, second.content[0].text
    stored = [json.loads(r.content[0].text)["store_result"] for r in (first, second)]
    assert stored[0]["item_kref"] == stored[1]["item_kref"] and stored[0]["bundle_kref"] == stored[1]["bundle_kref"]
    assert stored[0]["revision_kref"] != stored[1]["revision_kref"]


def test_ingest_add_response_and_consolidate_with_an_agent_summary(app: Running) -> None:
    async def steps(session: Any) -> dict[str, Any]:
        first = await call(session, "kumiho_memory_ingest", user_id="kim", message="My email is kim@example.org")
        sid = first["session_id"]
        added = await call(session, "kumiho_memory_add_response", session_id=sid, response="Noted, Kim.")
        skipped = await call(session, "kumiho_memory_add_response", session_id=sid, response="[cron:nightly] ok")
        without = await session.call_tool("kumiho_memory_consolidate", {"session_id": sid})
        done = await call(session, "kumiho_memory_consolidate", session_id=sid, summary={
            "title": "Kim shared contact details", "summary": "Kim gave an email address for follow-ups.",
            "classification": {"topics": ["contacts"], "entities": ["Kim"]}})
        empty = await session.call_tool("kumiho_memory_consolidate", {"session_id": sid})
        located = await call(session, "kumiho_resolve_kref", kref=done["store_result"]["revision_kref"])
        return {"first": first, "added": added, "skipped": skipped, "without": without, "done": done,
                "empty": empty, "located": located}

    out = run(app, steps)
    assert out["first"]["session_id_source"] == "generated" and out["added"]["message_count"] == 2
    assert out["skipped"]["success"] is False and "cron" in out["skipped"]["skipped"]
    assert out["without"].is_error and "summary" in out["without"].content[0].text
    assert out["done"]["success"] is True and out["done"]["cleared_messages"] == 2
    assert out["empty"].is_error and "No messages to consolidate" in out["empty"].content[0].text
    transcript = Path(out["located"]["location"]).read_text()
    # D5: the transcript artifact is PII-redacted, names included (spaCy); the summary keeps names
    assert "Noted, [person]." in transcript and "kim@example.org" not in transcript and "[email]" in transcript
    assert out["done"]["summary"].startswith("Kim gave an email address")


def test_model_backed_tools_say_plainly_what_they_skipped(app: Running) -> None:
    async def steps(session: Any) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any], Any, dict[str, Any]]:
        stored = await call(session, "kumiho_memory_store", title="Edge seed", user_text="A memory to link.")
        edges = await call(session, "kumiho_memory_discover_edges", revision_kref=stored["revision_kref"],
                           summary="A memory to link.")
        dry = await call(session, "kumiho_memory_dream_state", dry_run=True)
        wet = await call(session, "kumiho_memory_dream_state")
        remote = await session.call_tool("kumiho_memory_dream_state", {"base_url": "https://api.example.com/v1"})
        recalled = await call(session, "kumiho_memory_recall", query="memory to link", graph_augmented=True)
        return edges, dry, wet, remote, recalled

    edges, dry, wet, remote, recalled = run(app, steps)
    assert recalled["count"] >= 1 and recalled["graph_augmented"]["used"] is False
    assert recalled["graph_augmented"]["note"].startswith("unavailable: no local model")
    assert edges["count"] == 0 and edges["skipped"].startswith("no local model")
    assert dry["success"] is True and dry["would_assess"] >= 1 and dry["deprecated"] == 0
    assert wet["success"] is False and "no local model" in wet["skipped"]
    assert remote.is_error and "only the configured endpoint" in remote.content[0].text  # no other server


def test_operator_lookup_tools(app: Running) -> None:
    async def steps(session: Any) -> dict[str, Any]:
        stored = await call(session, "memory_store", title="Operator note", summary="Kept by the operator.",
                            space_path="operator")
        reflected = await call(session, "memory_reflect", session_id="op", response="done", captures=[
            {"type": "lesson", "title": "Restart the worker after config edits",
             "content": "Config edits need a worker restart.", "space_hint": "operator"}])
        return {
            "stored": stored, "reflected": reflected,
            "item": await call(session, "memory_get_item", kref=stored["item_kref"]),
            "resolved": await call(session, "memory_resolve_kref", kref=stored["revision_kref"]),
            "tagged": await call(session, "memory_get_revision_by_tag", item_kref=stored["item_kref"]),
            "search": await call(session, "memory_search", context_filter="CognitiveMemory/operator"),
            "fulltext": await call(session, "memory_fulltext", query="worker restart"),
            "retrieve": await call(session, "memory_retrieve", query="operator note", space_paths=["operator"]),
            "no_title": await session.call_tool("memory_store", {"user_text": "x"}),
        }

    out = run(app, steps)
    assert out["item"]["kref"] == out["stored"]["item_kref"] and out["resolved"]["resolved"] is True
    assert out["tagged"]["kref"] == out["stored"]["revision_kref"]
    assert out["reflected"]["capture_results"][0]["space_path"] == "CognitiveMemory/operator"
    assert out["search"]["count"] == 2
    assert any("restart" in r["item"]["item_name"] for r in out["fulltext"]["results"])
    assert out["retrieve"]["item_krefs"][0] == out["stored"]["item_kref"]
    assert out["no_title"].is_error and "title" in out["no_title"].content[0].text


def test_start_up_refuses_a_tool_without_a_service_and_a_service_without_a_tool() -> None:
    """The server is built only when the served catalogue and the handler table agree, both ways."""
    def performed(args: Any, client: Any) -> dict[str, Any]:
        return {}

    table = {name: performed for name in tools()}
    assert build_server(table, "CognitiveMemory")  # complete: it starts
    without = {name: h for name, h in table.items() if name != "kumiho_memory_engage"}
    with pytest.raises(RuntimeError, match="no service performs kumiho_memory_engage"):
        build_server(without, "CognitiveMemory")
    with pytest.raises(RuntimeError, match="no operation declares kumiho_made_up"):
        build_server({**table, "kumiho_made_up": performed}, "CognitiveMemory")
    gated = {name for name, op in operations().items() if op.gate}  # behind a switch that is off: not served
    assert build_server({**table, **{name: performed for name in gated}}, "CognitiveMemory")
