"""``[memory.policy] read_only_namespaces`` through the front doors, on real stores: every MCP write-tool family
and Kumiho's REST are refused (permission_denied / 403, naming the namespace, the setting and the fix), nothing
of a refused write stays (no event, no audit row, no artifact file), writes elsewhere go on, the operator's
restore/import still write, and a scheduled Dream State run leaves the namespace alone instead of failing."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from appliance.graph.write_policy import WritePolicy
from appliance.inference.chat import ScriptedCall, ScriptedModel
from tests.inprocess import InProcess, serve_in_process, wait_job
from tests.mcp_api.clients import call, in_http_session

PROJECT = "CognitiveMemory"
VAULT = f"/{PROJECT}/Memory/vault"
OPEN = f"/{PROJECT}/Memory/open"
ITEM = f"kref://{PROJECT}/Memory/vault/secret.conversation"
REV = ITEM + "?r=1"
BUNDLE = f"kref://{PROJECT}/Memory/vault/set.bundle"
OPEN_ITEM = f"kref://{PROJECT}/Memory/open/plain.conversation"
OPEN_REV = OPEN_ITEM + "?r=1"


def tag_everything(scripted: ScriptedCall) -> dict[str, Any]:
    count = scripted.schema["properties"]["assessments"]["minItems"]
    return {"assessments": [{"title": "m", "verdict": "keep", "reason": "", "relevance": 5, "tags": ["reviewed"],
                             "related": [], "relationship": ""} for _ in range(count)]}


@pytest.fixture
def app(tmp_path: Path) -> Iterator[InProcess]:
    with serve_in_process(tmp_path / "data", ScriptedModel([tag_everything] * 100),
                          memory={"audit_enabled": True, "policy": {"read_only_namespaces": ["vault"]}},
                          maintenance={"dream_state_min_age_days": 0, "idle_consolidation_minutes": 0}) as running:
        seed(running)
        yield running


def seed(app: InProcess) -> None:
    """What the namespace holds, written before the operator made it read-only (no door may write it now)."""
    g = app.services.graph
    policy, g.policy = g.policy, WritePolicy(audit=g.policy.audit)
    try:
        g.ensure_space(VAULT)
        g.ensure_space(OPEN)
        g.create_item(VAULT, "secret", "conversation")
        g.create_item(OPEN, "plain", "conversation")
        g.create_revision(ITEM, {"title": "vault memory", "type": "fact"})
        g.create_revision(OPEN_ITEM, {"title": "open memory", "type": "fact"})
        g.tag_revision(REV, "kept")
        g.create_artifact(REV, "doc", "/tmp/doc.md")
        g.create_bundle(VAULT, "set")
        g.add_bundle_member(BUNDLE, OPEN_ITEM)
        g.create_edge(REV, OPEN_REV, "DERIVED_FROM")
        g.create_edge(OPEN_REV, REV, "REFERENCED")
    finally:
        g.policy = policy


def mcp(app: InProcess, tool: str, **arguments: Any) -> dict[str, Any]:
    return in_http_session(app.base_url, lambda s: call(s, tool, **arguments))  # type: ignore[no-any-return]


# one call per write-tool family: memories, items, revisions, tags, metadata, edges (both ends), artifacts,
# bundles, deprecation, deletion of revisions, items and spaces (the namespace's own and the one holding it)
REFUSED_CALLS: list[tuple[str, dict[str, Any]]] = [
    ("kumiho_memory_store", {"title": "t", "user_text": "into the vault", "space_path": "Memory/vault"}),
    ("memory_store", {"title": "t", "user_text": "into the vault", "space_path": "Memory/vault"}),
    ("kumiho_create_item", {"space_path": VAULT, "item_name": "new", "kind": "note"}),
    ("kumiho_create_revision", {"item_kref": ITEM, "metadata": {"title": "changed"}}),
    ("kumiho_tag_revision", {"revision_kref": REV, "tag": "reviewed"}),
    ("kumiho_untag_revision", {"revision_kref": REV, "tag": "kept"}),
    ("kumiho_set_metadata", {"kref": REV, "metadata": {"title": "changed"}}),
    ("kumiho_set_metadata", {"kref": ITEM, "metadata": {"owner": "me"}}),
    ("kumiho_create_edge", {"source_kref": OPEN_REV, "target_kref": REV, "edge_type": "SUPPORTS"}),
    ("kumiho_create_edge", {"source_kref": REV, "target_kref": OPEN_REV, "edge_type": "SUPPORTS"}),
    ("kumiho_delete_edge", {"source_kref": REV, "target_kref": OPEN_REV, "edge_type": "DERIVED_FROM"}),
    ("kumiho_delete_edge", {"source_kref": OPEN_REV, "target_kref": REV, "edge_type": "REFERENCED"}),
    ("kumiho_create_artifact", {"revision_kref": REV, "name": "more", "location": "/tmp/more.md"}),
    ("kumiho_delete_artifact", {"artifact_kref": REV + "&a=doc"}),
    ("kumiho_create_bundle", {"space_path": VAULT, "bundle_name": "other"}),
    ("kumiho_add_bundle_member", {"bundle_kref": BUNDLE, "item_kref": ITEM}),
    ("kumiho_remove_bundle_member", {"bundle_kref": BUNDLE, "item_kref": OPEN_ITEM}),
    ("kumiho_deprecate_item", {"item_kref": ITEM, "deprecated": True}),
    ("kumiho_delete_revision", {"revision_kref": REV, "force": True}),
    ("kumiho_delete_item", {"item_kref": ITEM, "force": True}),
    ("kumiho_create_space", {"project_name": PROJECT, "parent_path": VAULT, "space_name": "sub"}),
    ("kumiho_delete_space", {"space_path": VAULT, "force": True}),
    ("kumiho_delete_space", {"space_path": f"/{PROJECT}/Memory", "force": True}),
]


def _artifact_files(app: InProcess) -> list[Path]:
    root = app.services.data_dir.root / "artifacts"
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def test_every_mcp_write_family_is_refused_and_leaves_nothing(app: InProcess) -> None:
    events, files = app.services.graph.last_event_seq(), _artifact_files(app)
    audited = len(app.services.graph.audit_entries())
    for tool, arguments in REFUSED_CALLS:
        error = mcp(app, tool, **arguments).get("error")
        assert error is not None, f"{tool} {arguments} was not refused"
        assert error["code"] == "permission_denied", (tool, error)
        assert "'vault' is read-only" in error["message"] and "read_only_namespaces" in error["message"], error
        assert "remove 'vault'" in error["message"], error  # the fix
    graph = app.services.graph
    assert graph.last_event_seq() == events  # no change recorded: every refused transaction rolled back
    assert len(graph.audit_entries()) == audited  # a refusal is not a change
    assert _artifact_files(app) == files  # memory_store's artifact file was removed with its transaction
    assert graph.get_revision(REV).metadata["title"] == "vault memory" and "kept" in graph.get_revision(REV).tags
    assert not graph.get_item(ITEM).deprecated


def test_writes_outside_the_namespace_go_on_and_are_audited_with_their_door(app: InProcess) -> None:
    stored = mcp(app, "kumiho_memory_store", title="fine", user_text="into the open namespace",
                 space_path="Memory/open")
    assert "error" not in stored, stored
    rows = app.services.graph.audit_entries(door="mcp")
    assert [row.operation for row in rows] == ["kumiho_memory_store"]  # one row for the whole capture
    assert rows[0].client  # the MCP client's User-Agent
    assert all("/Memory/open/" in change.kref or change.kref.endswith("/Memory/open") for change in rows[0].changes)
    assert rows[0].events == rows[0].last_event - rows[0].first_event + 1 >= 3


def test_kumiho_rest_refuses_with_403_and_names_the_setting(app: InProcess) -> None:
    headers = {"X-Kumiho-Client": "revka/0.9"}
    with httpx.Client(base_url=app.base_url, timeout=30, headers=headers) as http:
        refused = [
            http.post("/api/v1/spaces", json={"parent_path": VAULT, "name": "sub"}),
            http.post("/api/v1/items/deprecate", params={"kref": ITEM, "deprecated": "true"}, json={}),
            http.delete("/api/v1/items/by-kref", params={"kref": ITEM, "force": "true"}),
        ]
        for response in refused:
            assert response.status_code == 403, response.text
            problem = response.json()
            assert problem["code"] == "permission_denied" and "read_only_namespaces" in problem["detail"], problem
        made = http.post("/api/v1/spaces", json={"parent_path": OPEN, "name": "sub"})
        assert made.status_code in (200, 201), made.text
    rows = app.services.graph.audit_entries(door="kumiho_rest")
    assert len(rows) == 1 and rows[0].client == "revka/0.9" and rows[0].operation == "kumiho_create_space"
    assert not app.services.graph.get_item(ITEM).deprecated


def _import(app: InProcess, text: str) -> dict[str, Any]:
    answer = httpx.post(app.base_url + "/api/v1/imports", content=text.encode(),
                        headers={"content-type": "application/x-ndjson"}, timeout=60)
    assert answer.status_code == 202, answer.text
    return wait_job(app, answer.json()["job_id"])


def test_an_import_into_a_read_only_namespace_is_refused_before_anything_is_written(
        app: InProcess, tmp_path: Path) -> None:
    """An import is a write like any other: refused in its check, naming the namespace and the setting; a file
    that only adds to other namespaces (and holds the vault's records unchanged) is imported."""
    with serve_in_process(tmp_path / "other", None) as other:
        g = other.services.graph
        g.ensure_space(VAULT)
        g.ensure_space(OPEN)
        g.create_item(OPEN, "first", "conversation")  # sorts before the vault's item: written first if at all
        g.create_item(VAULT, "smuggled", "conversation")
        g.create_revision(f"kref://{PROJECT}/Memory/vault/smuggled.conversation", {"title": "into the vault"})
        text = httpx.get(other.base_url + "/api/v1/export", timeout=60).text
    graph = app.services.graph
    events = graph.portable_next_event_seq(-1), len(graph.portable_events(-1, 10_000))
    job = _import(app, text)
    assert job["state"] == "failed" and job["error"]["code"] == "permission_denied", job
    message = job["error"]["message"]
    assert "namespace 'vault' is read-only ([memory.policy] read_only_namespaces)" in message, message
    assert "nothing was written" in message and "smuggled.conversation" in message
    assert "remove 'vault' from read_only_namespaces" in message
    assert graph.portable_nodes("Item", [f"{PROJECT}/Memory/open/first.conversation"]) == {}  # nothing at all
    assert (graph.portable_next_event_seq(-1), len(graph.portable_events(-1, 10_000))) == events
    assert not [row for row in graph.audit_entries() if row.operation == "import"]

    dry = httpx.post(app.base_url + "/api/v1/imports?dry_run=true", content=text.encode(),
                     headers={"content-type": "application/x-ndjson"}, timeout=60)
    assert wait_job(app, dry.json()["job_id"])["error"]["code"] == "permission_denied"


def test_a_scheduled_dream_state_run_leaves_read_only_namespaces_alone(app: InProcess) -> None:
    maintenance = app.services.maintenance
    maintenance.next_dream = datetime.now().astimezone() - timedelta(minutes=1)
    queued = [job for job in maintenance.tick() if job.kind == "dream_state"]
    assert len(queued) == 1
    job = wait_job(app, queued[0].id)
    assert job["state"] == "done", job
    graph = app.services.graph
    assert "reviewed" in graph.get_revision(OPEN_REV).tags  # the run did its work …
    assert "reviewed" not in graph.get_revision(REV).tags  # … and never chose the vault's memory
    dream_rows = graph.audit_entries(door="maintenance")
    assert dream_rows and {row.operation for row in dream_rows} == {"dream_state"}
