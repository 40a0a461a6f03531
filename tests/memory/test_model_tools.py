"""The model-backed tools through the official MCP client over HTTP, on real stores, with a ScriptedModel
(a real ``ChatModel`` that returns prepared answers) so that every branch and guardrail is driven exactly:
consolidate, discover_edges (tool and after reflect, D12), graph-augmented recall, Dream State."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from appliance.core.ports import ModelOutputError
from appliance.inference.chat import ScriptedCall, ScriptedModel
from appliance.maintenance import Maintenance, next_daily
from tests.inprocess import InProcess, serve_in_process, wait_job
from tests.mcp_api.clients import call, in_http_session

Answer = dict[str, Any] | BaseException | Callable[[ScriptedCall], Any]


class Script:
    """Answers by task (recognised from the prompt), so tests need not know the order of model calls."""

    def __init__(self) -> None:
        self.answers: dict[str, Answer] = {}
        self.calls: dict[str, list[ScriptedCall]] = {}

    def __call__(self, scripted: ScriptedCall) -> Any:
        system = scripted.messages[0]["content"]
        task = ("summary" if "summarise a conversation" in system else "implications" if "connect its memories"
                in system else "angles" if "search its memory" in system else "dream")
        self.calls.setdefault(task, []).append(scripted)
        answer = self.answers.get(task)
        if answer is None:
            raise AssertionError(f"the test gave no answer for a {task} call")
        return answer(scripted) if callable(answer) and not isinstance(answer, BaseException) else answer


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def app(tmp_path: Path, script: Script) -> Iterator[InProcess]:
    model = ScriptedModel([script] * 1000)
    with serve_in_process(tmp_path / "data", model, maintenance={"dream_state_min_age_days": 0,
                                                                 "idle_consolidation_minutes": 0}) as running:
        yield running


def run(app: InProcess, steps: Callable[[Any], Any]) -> Any:
    return in_http_session(app.base_url, steps)


SUMMARY = {"type": "decision", "title": "Home server migration plan",
           "summary": "Moving the home server to Debian 12 on 14 March; Postgres stays on port 5432.",
           "topics": ["homelab", "migration"], "entities": ["Debian", "Postgres"],
           "facts": ["Postgres listens on 5432"],
           "decisions": ["Use Debian 12"], "events": [{"when": "2026-03-14", "event": "migration day"}],
           "implications": ["Upgrading the database later"]}


# -- consolidate -----------------------------------------------------------------------------------------

def test_consolidate_summarises_with_the_model_links_what_was_recalled_and_clears_the_buffer(
        app: InProcess, script: Script) -> None:
    script.answers["summary"] = SUMMARY

    async def steps(session: Any) -> dict[str, Any]:
        known = await call(session, "kumiho_memory_store", title="Postgres port",
                           user_text="Postgres runs on port 5432 on the home server", space_path="homelab")
        first = await call(session, "kumiho_memory_ingest", user_id="ana",
                           message="Plan the home server migration; Postgres on 5432. Mail me at ana@example.org")
        sid = first["session_id"]
        await call(session, "kumiho_memory_add_response", session_id=sid, response="Debian 12 it is, Maria Lopez.")
        done = await call(session, "kumiho_memory_consolidate", session_id=sid)
        again = await session.call_tool("kumiho_memory_consolidate", {"session_id": sid})
        edges = await call(session, "kumiho_get_edges", revision_kref=done["store_result"]["revision_kref"],
                           direction="outgoing")
        tagged = await call(session, "kumiho_get_revision_by_tag", item_kref=done["store_result"]["item_kref"],
                            tag="summarized")
        located = await call(session, "kumiho_resolve_kref", kref=done["store_result"]["revision_kref"])
        return {"known": known, "first": first, "done": done, "again": again, "edges": edges, "tagged": tagged,
                "located": located}

    out = run(app, steps)
    done = out["done"]
    assert done["success"] is True and done["cleared_messages"] == 2 and done["summarized_by"] == "scripted"
    assert done["summary"].startswith("Moving the home server to Debian 12")
    for section in ("Key events:\n- [2026-03-14] migration day", "Key facts:\n- Postgres listens on 5432",
                    "Decisions:\n- Use Debian 12", "Future relevance:\n- Upgrading the database later"):
        assert section in done["summary"]
    assert out["again"].is_error and "No messages to consolidate" in out["again"].content[0].text
    assert {"summarized", "published"} <= set(out["tagged"]["tags"])
    assert out["tagged"]["metadata"]["session_id"] == out["first"]["session_id"]
    assert json.loads(out["tagged"]["metadata"]["entities"]) == ["Debian", "Postgres"]
    # the summary links to what the session recalled
    recalled = {r["kref"] for r in out["first"]["long_term_memory"]}
    assert out["known"]["revision_kref"] in recalled
    assert {e["target_kref"] for e in out["edges"]["edges"] if e["edge_type"] == "REFERENCED"} == recalled
    # the model read no structured PII; the transcript artifact has none, nor names (D5)
    prompt = script.calls["summary"][0].messages[-1]["content"]
    assert "ana@example.org" not in prompt and "[email]" in prompt
    transcript = Path(out["located"]["location"]).read_text()
    assert "ana@example.org" not in transcript and "[email]" in transcript
    assert "Maria Lopez" not in transcript and "Debian 12 it is, [person]." in transcript


def test_a_failed_summary_is_a_clear_error_and_keeps_the_buffer(app: InProcess, script: Script) -> None:
    script.answers["summary"] = ModelOutputError("scripted used all 448 tokens before its JSON answer was complete")

    async def steps(session: Any) -> tuple[Any, dict[str, Any]]:
        await call(session, "kumiho_memory_ingest", user_id="bo", session_id="s-fail", message="Remember the VPN")
        failed = await session.call_tool("kumiho_memory_consolidate", {"session_id": "s-fail"})
        still = await call(session, "kumiho_memory_ingest", user_id="bo", session_id="s-fail", message="and DNS")
        return failed, still

    failed, still = run(app, steps)
    error = json.loads(failed.content[0].text)["error"]
    assert failed.is_error and error["code"] == "model_output_invalid" and "448 tokens" in error["message"]
    assert [m["content"] for m in still["working_memory"]] == ["Remember the VPN", "and DNS"]
    assert app.services.jobs.list(kind="consolidate")[0].state == "failed"


def test_idle_sessions_are_consolidated_in_the_background(app: InProcess, script: Script) -> None:
    script.answers["summary"] = SUMMARY
    run(app, lambda s: call(s, "kumiho_memory_ingest", user_id="cy", session_id="s-idle", message="Backups at 2am"))
    services = app.services
    settings = services.settings.maintenance.model_copy(update={"idle_consolidation_minutes": 0.0005})
    maintenance = Maintenance(services.maintenance.dreams, services.jobs, settings, "CognitiveMemory",
                              consolidator=services.maintenance.consolidator)
    time.sleep(0.1)  # older than 0.03 s
    jobs = maintenance.tick()
    assert [j.kind for j in jobs] == ["consolidate"]
    assert maintenance.tick() == []  # one job per session at a time
    assert wait_job(app, jobs[0].id)["state"] == "done"
    assert services.working.count("CognitiveMemory", "s-idle") == 0
    assert jobs[0].result["store_result"]["revision_kref"]


def test_a_failing_idle_session_is_retried_later_not_every_tick(app: InProcess, script: Script) -> None:
    script.answers["summary"] = ModelOutputError("garbage")
    run(app, lambda s: call(s, "kumiho_memory_ingest", user_id="dee", session_id="s-bad", message="Keep me"))
    services = app.services
    settings = services.settings.maintenance.model_copy(update={"idle_consolidation_minutes": 0.0005})
    moments = [datetime(2026, 3, 1, 12, 0).astimezone()]
    maintenance = Maintenance(services.maintenance.dreams, services.jobs, settings, "CognitiveMemory",
                              clock=lambda: moments[0], consolidator=services.maintenance.consolidator)
    time.sleep(0.1)
    first = maintenance.tick()
    assert wait_job(app, first[0].id)["state"] == "failed"
    assert maintenance.tick() == []  # backing off
    moments[0] += timedelta(minutes=3)
    assert len(maintenance.tick()) == 1
    assert services.working.count("CognitiveMemory", "s-bad") == 1  # never dropped


def test_dream_state_is_scheduled_daily_at_the_configured_time(app: InProcess, script: Script) -> None:
    script.answers["dream"] = assess
    now = datetime(2026, 3, 1, 2, 0).astimezone()
    assert next_daily("03:30", now) == now.replace(hour=3, minute=30)
    assert next_daily("01:00", now) == now.replace(hour=1) + timedelta(days=1)
    assert next_daily("", now) is None
    moments = [now]
    services = app.services
    maintenance = Maintenance(services.maintenance.dreams, services.jobs, services.settings.maintenance,
                              "CognitiveMemory", clock=lambda: moments[0],
                              consolidator=services.maintenance.consolidator)
    assert maintenance.tick() == []
    moments[0] = now.replace(hour=3, minute=31)
    jobs = maintenance.tick()
    assert [j.kind for j in jobs] == ["dream_state"] and wait_job(app, jobs[0].id)["state"] == "done"
    assert maintenance.next_dream == now.replace(hour=3, minute=30) + timedelta(days=1)


# -- discover_edges ---------------------------------------------------------------------------------------

def test_discover_edges_links_the_best_hits_in_scope_with_query_and_score(app: InProcess, script: Script) -> None:
    script.answers["implications"] = {"queries": ["database port for the home server", "postgres upgrade",
                                                  "quarterly tax filing"]}

    async def steps(session: Any) -> dict[str, Any]:
        async def store(title: str, text: str, space: str) -> str:
            found = await call(session, "kumiho_memory_store", title=title, user_text=text, space_path=space,
                               stack_revisions=False)
            return str(found["revision_kref"])

        source = await store("Postgres version", "The home server runs Postgres 16", "homelab")
        port = await store("Database port", "The home server database port is 5432 for postgres", "homelab")
        upgrade = await store("Postgres upgrade", "A postgres upgrade needs a dump first", "homelab")
        elsewhere = await store("Postgres at work", "database port for the home server postgres upgrade", "work")
        found = await call(session, "kumiho_memory_discover_edges", revision_kref=source, max_edges=2,
                           min_score=0.2, summary="The home server runs Postgres 16")
        edges = await call(session, "kumiho_get_edges", revision_kref=source, direction="outgoing")
        return {"found": found, "edges": edges, "port": port, "upgrade": upgrade, "elsewhere": elsewhere,
                "source": source}

    out = run(app, steps)
    found = out["found"]
    assert found["count"] == 2 and {e["target"] for e in found["edges"]} == {out["port"], out["upgrade"]}
    assert all(e["score"] >= 0.2 and e["edge_type"] == "REFERENCED" for e in found["edges"])
    assert found["queries"] == script.answers["implications"]["queries"]  # type: ignore[index]
    made = {e["target_kref"]: e for e in out["edges"]["edges"]}
    assert out["elsewhere"] not in made and out["source"] not in made  # scope: the memory's own space
    assert "Postgres 16" in script.calls["implications"][0].messages[-1]["content"]
    assert made[out["port"]]["metadata"]["query"] in script.answers["implications"]["queries"]  # type: ignore[index]
    assert float(made[out["port"]]["metadata"]["score"]) >= 0.2


def test_reflect_queues_edge_discovery_and_returns_at_once(app: InProcess, script: Script) -> None:
    script.answers["implications"] = {"queries": ["transport protocol choice"]}

    async def steps(session: Any) -> dict[str, Any]:
        await call(session, "kumiho_memory_store", title="Transport protocol choice",
                   user_text="transport protocol choice: gRPC with streaming", space_path="decisions")
        return await call(session, "kumiho_memory_reflect", session_id="s-r", response="ok", captures=[
            {"type": "decision", "title": "gRPC for the transport", "content": "We picked gRPC for the transport "
             "protocol", "space_hint": "decisions"}])

    reflected = run(app, steps)
    assert reflected["edge_discovery"] == "queued" and reflected["edges_discovered"] == 0
    job = wait_job(app, reflected["edge_discovery_job"])
    assert job["state"] == "done" and job["result"]["edges"][0]["source"] == reflected["stored_krefs"][0]
    edges = run(app, lambda s: call(s, "kumiho_get_edges", revision_kref=reflected["stored_krefs"][0],
                                    direction="outgoing"))
    assert [e["edge_type"] for e in edges["edges"]] == ["REFERENCED"]


# -- graph-augmented recall ------------------------------------------------------------------------------

def test_graph_augmented_recall_merges_angles_and_walks_provenance_edges(app: InProcess, script: Script) -> None:
    script.answers["angles"] = {"queries": ["sleep trouble after night shifts", "what helped with insomnia"]}

    async def steps(session: Any) -> dict[str, Any]:
        base = await call(session, "kumiho_memory_store", title="Night shifts", space_path="health",
                          user_text="Started night shifts at the hospital in January")
        cause = await call(session, "kumiho_memory_store", title="Melatonin", space_path="health",
                           user_text="Melatonin helped with insomnia, 3 mg before bed")
        linked = await call(session, "kumiho_memory_store", title="Roster", space_path="health",
                            user_text="The roster rotates every fortnight",
                            source_revision_krefs=[base["revision_kref"]])
        plain = await call(session, "kumiho_memory_recall", query="why am I tired", limit=5)
        augmented = await call(session, "kumiho_memory_recall", query="why am I tired", limit=5,
                               graph_augmented=True)
        return {"base": base, "cause": cause, "linked": linked, "plain": plain, "augmented": augmented}

    out = run(app, steps)
    report = out["augmented"]["graph_augmented"]
    assert report["used"] is True and report["queries"][1:] == script.answers["angles"]["queries"]  # type: ignore[index]
    krefs = [r["kref"] for r in out["augmented"]["results"]]
    assert out["cause"]["revision_kref"] in krefs and out["base"]["revision_kref"] in krefs
    walked = [r for r in out["augmented"]["results"] if r.get("graph_augmented")]
    assert all(r["score"] == 0.0 and r["from_kref"] in krefs for r in walked)
    assert len(krefs) == len(set(krefs)) and "graph_augmented" not in out["plain"]


def test_graph_augmented_recall_without_an_answer_falls_back_with_a_note(app: InProcess, script: Script) -> None:
    script.answers["angles"] = ModelOutputError("garbage")
    run(app, lambda s: call(s, "kumiho_memory_store", title="Ferry", user_text="The ferry leaves at 7"))
    out = run(app, lambda s: call(s, "kumiho_memory_engage", query="ferry time", graph_augmented=True))
    assert out["count"] == 1 and out["graph_augmented"]["queries"] == ["ferry time"]
    assert "original query alone" in out["graph_augmented"]["note"]


# -- Dream State ----------------------------------------------------------------------------------------

def _memories(app: InProcess, titles: list[str], **extra: Any) -> list[dict[str, Any]]:
    async def steps(session: Any) -> list[dict[str, Any]]:
        return [await call(session, "kumiho_memory_store", title=t, user_text=f"{t}: details", stack_revisions=False,
                           space_path="dream", **extra) for t in titles]

    return run(app, steps)  # type: ignore[no-any-return]


def assess(scripted: ScriptedCall, by_title: dict[str, dict[str, Any]] | None = None,
           **every: Any) -> dict[str, Any]:
    """A Dream State answer for the batch the call shows: one entry per memory, in order; ``by_title`` sets
    fields of some (``related`` by title), ``every`` of all."""
    titles = _shown(scripted)
    entries = []
    for title in titles:
        wanted = {**every, **(by_title or {}).get(title, {})}
        deprecate = bool(wanted.get("deprecate"))
        entries.append({"title": title[:60], "verdict": "duplicate" if deprecate else "keep",
                        "reason": wanted.get("reason", "duplicate of another memory" if deprecate else ""),
                        "relevance": wanted.get("relevance", 5), "tags": wanted.get("tags", []),
                        "related": [titles.index(t) for t in wanted.get("related", [])],
                        "relationship": wanted.get("relationship", "")})
    return {"assessments": entries}


def _shown(scripted: ScriptedCall) -> list[str]:
    listed = scripted.messages[-1]["content"].split("with its index):\n", 1)[1]
    return [json.loads(line)["title"] for line in listed.splitlines() if line.startswith("{")]


def _current(app: InProcess, kref: str) -> Any:
    return app.services.graph.get_revision(kref)


def test_dream_state_applies_only_what_the_guardrails_allow(app: InProcess, script: Script) -> None:
    unpublished = _memories(app, ["Release on May 2", "Said hello", "Release moved to May 16", "Linked note"],
                            tags=["draft"])
    published = _memories(app, ["Published fact"])
    app.services.graph.ensure_project("Elsewhere")
    other = run(app, lambda s: call(s, "kumiho_memory_store", title="Other project memory", user_text="x",
                                    project="Elsewhere"))
    krefs = [m["revision_kref"] for m in unpublished + published]
    script.answers["dream"] = lambda c: assess(c, {
        "Release on May 2": {"deprecate": True, "relevance": 1, "reason": "superseded by the May 16 memory"},
        "Said hello": {"deprecate": True, "relevance": 0, "reason": "trivial greeting"},
        "Release moved to May 16": {"tags": ["release", "Release Dates!"], "related": ["Linked note"],
                                    "relationship": "SUPERSEDES"},
        "Linked note": {"deprecate": True, "relevance": 2},
        "Published fact": {"deprecate": True, "relevance": 0}})
    report = run(app, lambda s: call(s, "kumiho_memory_dream_state", max_deprecation_ratio=0.3))
    guards = {g["kref"]: g["guard"] for g in report["deprecations_guarded"]}
    # 5 assessed x 0.3 -> one deprecation: the least relevant allowed one
    assert report["revisions_assessed"] == 5 and report["deprecated"] == 1
    assert _current(app, krefs[1]).deprecated is True
    assert guards == {krefs[0]: "ratio", krefs[3]: "reference", krefs[4]: "published"}
    assert not any(_current(app, k).deprecated for k in (krefs[0], krefs[3], krefs[4]))
    assert {"release", "release-dates"} <= set(_current(app, krefs[2]).tags) and report["tags_added"] == 2
    edges = app.services.graph.get_edges(krefs[2], direction="outgoing").items
    assert [(e.target_kref, e.edge_type) for e in edges] == [(krefs[3], "SUPERSEDES")]
    assert report["malformed_assessments"] == 0 and report["errors"] == []
    assert _current(app, other["revision_kref"]).tags == ["latest", "published"]  # another project: untouched
    assert Path(report["report_path"]).read_text().startswith("# Dream State — CognitiveMemory")
    cursor = app.services.graph.get_revision(report["report_kref"])
    assert cursor.metadata["deprecated"] == "1" and cursor.metadata["type"] == "dream_state_report"
    # the cursor: the next run looks only at what is new
    _memories(app, ["A new memory"])
    script.answers["dream"] = assess
    second = run(app, lambda s: call(s, "kumiho_memory_dream_state"))
    assert second["revisions_assessed"] == 1 and second["cursor"] == cursor.metadata["run_at"]


def test_dream_state_dry_run_changes_nothing(app: InProcess, script: Script) -> None:
    made = _memories(app, ["Old plan", "Newer plan"], tags=["draft"])
    script.answers["dream"] = lambda c: assess(c, {"Old plan": {"deprecate": True, "tags": ["plans"],
                                                                 "related": ["Newer plan"]}})
    before = app.services.graph.stats()
    events = len(app.services.graph.events(limit=10000))
    dry = run(app, lambda s: call(s, "kumiho_memory_dream_state", dry_run=True, max_deprecation_ratio=0.5))
    assert dry["dry_run"] is True and dry["revisions_assessed"] == 2
    assert [d["kref"] for d in dry["would_deprecate"]] == [made[0]["revision_kref"]]
    assert dry["would_tag"] == {made[0]["revision_kref"]: ["plans"]} and len(dry["would_link"]) == 1
    assert app.services.graph.stats() == before and len(app.services.graph.events(limit=10000)) == events
    again = run(app, lambda s: call(s, "kumiho_memory_dream_state", dry_run=True))
    assert again["revisions_assessed"] == 2  # a dry run does not move the cursor
    assert not _current(app, made[0]["revision_kref"]).deprecated


def test_dream_state_never_deprecates_young_or_official_memories(tmp_path: Path, script: Script) -> None:
    with serve_in_process(tmp_path / "data", ScriptedModel([script] * 100),
                          maintenance={"idle_consolidation_minutes": 0}) as app:  # default minimum age: 7 days
        made = _memories(app, ["Fresh memory", "Another fresh one"], tags=["draft"])
        script.answers["dream"] = lambda c: assess(c, deprecate=True)
        report = run(app, lambda s: call(s, "kumiho_memory_dream_state", max_deprecation_ratio=0.9))
        assert report["deprecated"] == 0 and {g["guard"] for g in report["deprecations_guarded"]} == {"min_age"}
        assert not any(_current(app, m["revision_kref"]).deprecated for m in made)


def test_dream_state_rejects_bad_ratios_and_any_model_the_operator_did_not_set_up(app: InProcess,
                                                                                  tmp_path: Path) -> None:
    """A per-call model is neither an oracle (a path that exists is refused like one that does not, and
    nothing opens it) nor a relay (a loopback base_url is refused and never contacted)."""
    _memories(app, ["Something to assess"])
    existing = tmp_path / "present.gguf"
    existing.write_bytes(b"GGUF not really")
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    relay = f"http://127.0.0.1:{listener.getsockname()[1]}/v1"

    async def steps(session: Any) -> list[Any]:
        return [await session.call_tool("kumiho_memory_dream_state", args) for args in (
            {"max_deprecation_ratio": 0.95}, {"base_url": "https://api.example.com/v1"},
            {"provider": "anthropic"}, {"model": "/nonexistent/model.gguf"}, {"model": str(existing)},
            {"base_url": relay, "api_key": "sk-test-secret-key-123456"}, {"provider": "openai", "base_url": relay})]

    try:
        ratio, remote, provider, missing, present, loopback, openai = run(app, steps)
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
    finally:
        listener.close()
    assert ratio.is_error and "max_deprecation_ratio" in ratio.content[0].text
    assert provider.is_error and "provider" in provider.content[0].text
    assert missing.is_error and present.is_error and missing.content[0].text == present.content[0].text
    assert json.loads(missing.content[0].text)["error"]["field"] == "model"
    for refused, field in ((remote, "base_url"), (loopback, "api_key"), (openai, "base_url")):
        assert refused.is_error and json.loads(refused.content[0].text)["error"]["field"] == field
        assert "sk-test" not in refused.content[0].text
    assert "configured endpoint" in remote.content[0].text and "configured endpoint" in openai.content[0].text
    assert not app.services.jobs.list(kind="dream_state")  # no run started


def test_jobs_and_model_status_are_visible_in_the_admin_api(app: InProcess, script: Script) -> None:
    script.answers["dream"] = assess
    run(app, lambda s: call(s, "kumiho_memory_dream_state", dry_run=True))
    jobs = app.get("/api/v1/jobs")
    assert jobs["count"] >= 1 and jobs["jobs"][0]["kind"] == "dream_state"
    assert jobs["jobs"][0]["state"] == "done" and jobs["jobs"][0]["progress"]["done"] >= 0
    model = app.get("/api/v1/model")
    assert model["chat"]["model_id"] == "scripted" and model["chat"]["available"] is True
