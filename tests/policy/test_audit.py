"""The audit trail (``[memory] audit_enabled``, ``audit_retention_days``) on real stores: one row per committed
write transaction, atomic with it; ``GET /api/v1/audit`` with its filters and bounds; the ``audit_prune`` job;
and a data directory of schema version 1 upgraded to one that records it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from appliance.core.caller import Caller, calling
from appliance.errors import StorageError
from appliance.graph import GraphStore, NewRevision
from appliance.graph.write_policy import MAX_CHANGES, WritePolicy
from appliance.jobs import JobQueue
from appliance.services.audit import AuditRetention
from tests.fixtures.make_fixture import unpack
from tests.inprocess import InProcess, serve_in_process, wait_job
from tests.mcp_api.clients import call, in_http_session

FIXTURES = Path(__file__).parent.parent / "fixtures"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[GraphStore]:
    with GraphStore.open(tmp_path / "g.kuzu", buffer_pool_mb=64, readers=1) as graph:
        graph.policy = WritePolicy(audit=True)
        yield graph


def mcp(app: InProcess, tool: str, **arguments: Any) -> dict[str, Any]:
    return in_http_session(app.base_url, lambda s: call(s, tool, **arguments))  # type: ignore[no-any-return]


def test_one_row_per_committed_transaction_and_none_for_a_rolled_back_one(store: GraphStore) -> None:
    def capture() -> None:
        item = store.create_item("/P/notes", "a", "note").kref
        revision = store.create_revision(item, {"title": "a"}).kref
        store.tag_revision(revision, "published")

    store.ensure_space("/P/notes")
    with calling(Caller("memory_api", "curl/8", "POST /api/v1/memories")):
        store.atomic(capture)
    rows = store.audit_entries()
    assert len(rows) == 2  # ensure_space, then the capture: one row each
    row = rows[-1]
    assert (row.door, row.client, row.operation) == ("memory_api", "curl/8", "POST /api/v1/memories")
    assert [c.routing_key for c in row.changes] == ["item.created", "revision.created", "revision.tagged"]
    assert row.events == 3 and row.last_event == store.last_event_seq() and row.first_event == row.last_event - 2

    def half_then_fail() -> None:
        store.create_item("/P/notes", "b", "note")
        raise StorageError("disk full")

    events = store.last_event_seq()
    with pytest.raises(StorageError):
        store.atomic(half_then_fail)
    assert len(store.audit_entries()) == 2 and store.last_event_seq() == events  # nothing of it stayed


def test_a_large_transaction_lists_its_first_changes_and_counts_them_all(store: GraphStore) -> None:
    store.ensure_space("/P/bulk")
    result = store.create_revisions([NewRevision(f"kref://P/bulk/n{i}.note", {"i": str(i)}) for i in range(150)])
    assert not result.failures
    row = store.audit_entries()[-1]
    assert row.events == 150 and len(row.changes) == MAX_CHANGES and row.changes_truncated
    assert row.last_event - row.first_event + 1 == 150
    assert store.audit_entries(kref="kref://P/bulk/n7.note")[0].seq == row.seq  # an item kref finds its revisions


def test_audit_off_records_nothing(tmp_path: Path) -> None:
    with serve_in_process(tmp_path / "data", None) as app:
        assert "error" not in mcp(app, "kumiho_memory_store", title="t", user_text="not audited")
        body = httpx.get(app.base_url + "/api/v1/audit", timeout=30).json()
        assert body["enabled"] is False and body["entries"] == [] and body["count"] == 0


@pytest.fixture
def audited(tmp_path: Path) -> Iterator[InProcess]:
    with serve_in_process(tmp_path / "data", None, memory={"audit_enabled": True}) as running:
        yield running


def test_the_audit_route_filters_pages_and_bounds_its_parameters(audited: InProcess) -> None:
    stored = mcp(audited, "kumiho_memory_store", title="Coffee", user_text="Alice likes coffee", space_path="notes")
    with httpx.Client(base_url=audited.base_url, timeout=30) as http:
        made = http.post("/api/v1/spaces", json={"parent_path": "/CognitiveMemory", "name": "other"},
                         headers={"X-Kumiho-Client": "revka/0.9"})
        assert made.status_code in (200, 201), made.text
        every = http.get("/api/v1/audit").json()
        assert every["enabled"] is True and every["retention_days"] == 30
        doors = [(e["door"], e["operation"]) for e in every["entries"]]
        assert ("mcp", "kumiho_memory_store") in doors and ("kumiho_rest", "kumiho_create_space") in doors
        by_mcp = http.get("/api/v1/audit", params={"door": "mcp"}).json()["entries"]
        assert {e["door"] for e in by_mcp} == {"mcp"}
        item = stored["item_kref"] if "item_kref" in stored else stored["revision_kref"].split("?")[0]
        by_kref = http.get("/api/v1/audit", params={"kref": item}).json()["entries"]
        assert [e["operation"] for e in by_kref] == ["kumiho_memory_store"]
        first = http.get("/api/v1/audit", params={"limit": 1}).json()
        assert first["count"] == 1 and first["next_after"] == first["entries"][0]["seq"]
        rest = http.get("/api/v1/audit", params={"after": first["next_after"], "limit": 1000}).json()
        assert [e["seq"] for e in rest["entries"]] == [e["seq"] for e in every["entries"][1:]]
        assert rest["next_after"] is None
        later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
        assert http.get("/api/v1/audit", params={"since": later}).json()["entries"] == []
        for params, field in [({"limit": 0}, "limit"), ({"limit": 1001}, "limit"), ({"door": "telnet"}, "door"),
                              ({"kref": "not a kref"}, "kref"), ({"since": "yesterday"}, "since"),
                              ({"after": -2}, "after")]:
            refused = http.get("/api/v1/audit", params=params)
            assert refused.status_code == 400, (params, refused.text)
            assert refused.json().get("field") == field or field in refused.json()["detail"], refused.json()


def test_the_prune_job_runs_on_schedule_and_shows_in_the_jobs_api(audited: InProcess) -> None:
    mcp(audited, "kumiho_memory_store", title="t", user_text="kept: younger than the retention")
    queued = [job for job in audited.services.maintenance.tick() if job.kind == "audit_prune"]
    assert len(queued) == 1
    job = wait_job(audited, queued[0].id)
    assert job["state"] == "done" and job["result"]["deleted"] == 0
    listed = audited.get("/api/v1/jobs?kind=audit_prune")["jobs"]
    assert [j["job_id"] for j in listed] == [queued[0].id]
    assert audited.get("/api/v1/audit")["count"] > 0
    assert [j for j in audited.services.maintenance.tick() if j.kind == "audit_prune"] == []  # hourly, not per tick


def test_retention_deletes_rows_older_than_the_setting_and_zero_keeps_them(tmp_path: Path) -> None:
    moment = [datetime(2026, 1, 1, tzinfo=UTC)]
    with GraphStore.open(tmp_path / "g.kuzu", buffer_pool_mb=64, readers=1, clock=lambda: moment[0]) as graph:
        graph.policy = WritePolicy(audit=True)
        graph.ensure_space("/P/old")
        moment[0] = datetime(2026, 3, 1, tzinfo=UTC)
        graph.ensure_space("/P/new")
        jobs = JobQueue()
        jobs.start()
        try:
            assert AuditRetention(graph, jobs, 0).tick(moment[0]) is None  # 0 = keep every row
            retention = AuditRetention(graph, jobs, 30, clock=lambda: moment[0])
            job = retention.tick(moment[0])
            assert job is not None and jobs.wait(job, 60) and job.state == "done", job.error
            assert job.kind == "audit_prune" and job.result["deleted"] == 1
        finally:
            jobs.stop()
        assert [c.kref for row in graph.audit_entries() for c in row.changes] == ["kref://P/new"]


def test_a_version_1_data_directory_is_upgraded_and_audits_from_then_on(tmp_path: Path) -> None:
    path = unpack(FIXTURES / "schema_v1.tar.xz", tmp_path)
    with GraphStore.open(path, buffer_pool_mb=64, readers=1) as graph:
        assert graph.schema_version() >= 2
        assert graph.audit_entries() == []  # no history is invented for what came before
        graph.policy = WritePolicy(audit=True)
        graph.create_revision("kref://CognitiveMemory/personal/coffee-a1b2c3d4.conversation")
        assert [c.routing_key for row in graph.audit_entries() for c in row.changes] == ["revision.created"]
