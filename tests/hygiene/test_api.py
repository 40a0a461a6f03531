"""``POST /api/v1/hygiene`` over real HTTP (the app in this process on real Kùzu and LanceDB): 202 with a job of
kind ``hygiene`` that ``GET /api/v1/jobs`` lists; a dry run changes nothing; a pass archives and purges, and
what it purged is gone from the search index too; bad bodies are refused naming the field."""

from __future__ import annotations

from pathlib import Path

import httpx

from appliance.core.search import SearchFilter, SearchRequest
from tests.hygiene.entries import Clock, state_of, store_entry
from tests.inprocess import serve_in_process, wait_job
from tests.problems import problem


def test_post_hygiene_runs_a_pass_as_a_job(tmp_path: Path) -> None:
    with serve_in_process(tmp_path / "data", None, inference={"chat_model": "none"},
                          memory={"archive_after_days": 7, "conversation_retention_days": 30}) as app:
        graph = app.services.graph
        daily = store_entry(graph, "standup", "daily", content="standup notes about the zebra migration")
        talk = store_entry(graph, "chat turn", "conversation", content="conversation about the quokka picnic")
        clock = Clock()
        clock.advance(days=31)
        app.services.hygiene.clock = clock

        answer = httpx.post(app.base_url + "/api/v1/hygiene", json={"dry_run": True}, timeout=30)
        assert answer.status_code == 202, answer.text
        started = answer.json()
        assert started["kind"] == "hygiene" and started["dry_run"] is True
        job = wait_job(app, started["job_id"])
        assert job["state"] == "done" and job["kind"] == "hygiene"
        assert (job["result"]["archived"], job["result"]["purged"]) == (1, 1)
        assert state_of(graph, daily) == state_of(graph, talk) == "live"

        app.services.index_worker.wait_synced(60)
        assert found(app, "quokka picnic"), "indexed before the pass"
        answer = httpx.post(app.base_url + "/api/v1/hygiene", json={}, timeout=30)
        assert answer.status_code == 202 and answer.json()["dry_run"] is False
        job = wait_job(app, answer.json()["job_id"])
        assert job["state"] == "done", job
        assert job["result"]["archived"] == 1 and job["result"]["purged"] == 1
        assert job["progress"] == {"done": 2, "total": 2}
        assert state_of(graph, daily) == "archived" and state_of(graph, talk) == "gone"
        listed = app.get("/api/v1/jobs?kind=hygiene")
        assert {j["job_id"] for j in listed["jobs"]} == {started["job_id"], job["job_id"]}
        app.services.index_worker.wait_synced(60)
        assert not found(app, "quokka picnic"), "a purged entry leaves the search index"
        assert not found(app, "zebra migration"), "an archived entry leaves recall"


def test_post_hygiene_refuses_bad_bodies_naming_the_field_and_takes_none(tmp_path: Path) -> None:
    with serve_in_process(tmp_path / "data", None, inference={"chat_model": "none"}) as app:
        url = app.base_url + "/api/v1/hygiene"
        for body in ({"dry_run": "perhaps"}, {"dry_run": True, "purge_everything": True}):
            answer = httpx.post(url, json=body, timeout=30)
            assert answer.status_code == 400, answer.text
            refusal = problem(answer)
            assert "dry_run" in str(refusal) or "purge_everything" in str(refusal)
        answer = httpx.post(url, content=b"dry_run=true", headers={"content-type": "text/plain"}, timeout=30)
        assert answer.status_code == 415
        assert app.services.jobs.list(kind="hygiene") == []
        answer = httpx.post(url, timeout=30)  # no body: a pass, as {"dry_run": false}
        assert answer.status_code == 202 and answer.json()["dry_run"] is False
        assert wait_job(app, answer.json()["job_id"])["state"] == "done"


def found(app: object, text: str) -> bool:
    services = app.services  # type: ignore[attr-defined]
    hits = services.search.search(SearchRequest(text, SearchFilter(None, (), (), (), (), False), "text", 5, 0.0))
    return bool(hits)


def test_a_pass_asked_for_over_http_is_audited_as_its_callers(tmp_path: Path) -> None:
    with serve_in_process(tmp_path / "data", None, inference={"chat_model": "none"},
                          memory={"conversation_retention_days": 30, "audit_enabled": True}) as app:
        talk = store_entry(app.services.graph, "chat turn", "conversation")
        clock = Clock()
        clock.advance(days=31)
        app.services.hygiene.clock = clock
        answer = httpx.post(app.base_url + "/api/v1/hygiene", json={}, timeout=30,
                            headers={"X-Kumiho-Client": "ops-cron/1", "User-Agent": "python-httpx"})
        assert answer.status_code == 202, answer.text
        assert wait_job(app, answer.json()["job_id"])["state"] == "done"
        assert state_of(app.services.graph, talk) == "gone"
        rows = httpx.get(app.base_url + "/api/v1/audit", params={"kref": talk}, timeout=30).json()["entries"]
        purge = rows[-1]  # the entry's last change: its deletion
        assert len(rows) >= 2 and rows[0]["door"] == "internal", "stored through the graph, before the pass"
        assert (purge["door"], purge["client"], purge["operation"]) == ("console", "ops-cron/1",
                                                                         "POST /api/v1/hygiene")
