"""No credential is kept anywhere: secrets of every kind ``core/redaction.py`` recognises go through every
argument of every tool, over MCP HTTP, into a real ``kumiho-ce serve`` process; then every byte of the data
directory (graph files and WAL, index files, working-memory WAL, artifacts, caches), the server's log,
``config show`` and every answer are searched for each secret's distinctive part — while the appliance runs
(the WALs hold the newest bytes) and again after it stopped. Names and references (projects, spaces,
sessions, krefs) holding a credential are refused, with nothing written. Consolidation transcripts lose
structured PII as well."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from appliance.core import redaction
from tests.appliance_process import Running, cli_env, kumiho_ce, serve
from tests.mcp_api.clients import in_http_session

# One credential of each kind the redactor knows, and the part of it that must be found nowhere afterwards.
SECRETS: dict[str, tuple[str, str]] = {
    "private_key": ("-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEAprivacyKeyBodyQ1w2e3\n"
                    "-----END RSA PRIVATE KEY-----", "privacyKeyBodyQ1w2e3"),
    "url_password": ("postgres://admin:Hunter2pw0rdQz@db.internal:5432/app", "Hunter2pw0rdQz"),
    "aws_access_key": ("AKIAQWERTYUIOPASDFGH", "AKIAQWERTYUIOPASDFGH"),
    "aws_secret_key": ("aws_secret_access_key = wJalrXUtnFEMIK7MDENGbPxRfiCYzEXAMPLEKEY",
                       "wJalrXUtnFEMIK7MDENG"),
    "bearer_token": ("Bearer 7f3a9c2e1b4d8f6a0c5e9d", "7f3a9c2e1b4d8f6a0c5e9d"),
    "authorization_header": ("Authorization: Basic cHJpdmFjeTpzdWl0ZXB3", "cHJpdmFjeTpzdWl0ZXB3"),
    "api_key": ("sk-proj-Zx81Qw72Er63Ty54Ui45Op36", "Zx81Qw72Er63Ty54Ui45Op36"),
    "jwt": ("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJwcml2YWN5In0.c2lnbmF0dXJlcHJpdmFjeQ",
            "c2lnbmF0dXJlcHJpdmFjeQ"),
    "google_api_key": ("AIzaSyPrivacySuite0123456789abcdefghijk", "SyPrivacySuite0123456789"),
    "slack_token": ("xoxb-2048-privacyslack-Tk9", "privacyslack-Tk9"),
    "prefixed_token": ("glpat-PrivacyGitLab0123456789 hf_PrivacyHuggingFace0123456789abcdef "
                       "npm_PrivacyNpm0123456789abcdefghijklmnopqr whsec_PrivacyWebhook0123456789ab",
                       "PrivacyGitLab0123456789"),
    "github_token": ("ghp_PrivacyGitHub0123456789abcdefghijklmn", "PrivacyGitHub0123456789"),
    "password_assignment": ("DB_PASSWORD=CorrectHorse9Battery", "CorrectHorse9Battery"),
}
# The parts of the prefixed tokens other than the GitLab one, which SECRETS' entry names.
EXTRA_NEEDLES = ("PrivacyHuggingFace0123456789", "PrivacyNpm0123456789", "PrivacyWebhook0123456789")
NEEDLES = tuple(needle for _, needle in SECRETS.values()) + EXTRA_NEEDLES
BATTERY = "creds: " + " ; ".join(text for text, _ in SECRETS.values()) + " ; end"
SHORT = "password: Tr0ub4dor&3xyz"  # a short one, as a field value of its own
SHORT_NEEDLE = "Tr0ub4dor"
UNLABELLED = "hunter2x9zz"  # no credential by its look: only the metadata key "password" says it is one

# PII that consolidation transcripts must not keep (memories themselves may: they are about people).
EMAIL, PHONE = "ngozi.privacy@example.org", "+44 20 7946 0958"


def test_the_battery_holds_every_kind_the_redactor_knows() -> None:
    """What the suite feeds is what redaction recognises: one of each kind, none left after a pass."""
    text, kinds = redaction.redact_secrets(BATTERY)
    assert set(kinds) == {p.kind for p in redaction.SECRET_PATTERNS} == set(SECRETS)
    assert not [needle for needle in (*NEEDLES, SHORT_NEEDLE) if needle in text + redaction.redact_secrets(SHORT)[0]]


def _write_calls(kind: str, secret: str) -> list[tuple[str, dict[str, Any]]]:
    """Every write tool, and the reads that reach the model or its cache, with ``secret`` in every free-text
    argument (names and references stay clean: they are refused, see below)."""
    session = f"privacy-{kind}"
    # tags and metadata keys are one line of at most 128 and 256 characters: one per credential
    lines = [text.replace("\n", " ") for text, _ in SECRETS.values() if text in secret]
    # a memory holds at most 8 tags and a bundle name 128 characters: the one-round battery puts six kinds in
    # tags and one in the bundle name; each kind's own round (make test-privacy) puts it in every field
    tagged = [line[:120] for line in lines[:6]]
    titled = secret if len(secret) <= 150 else lines[0]  # titles, user ids, topics: 200-256 characters
    fitting = [line for line in lines if len(line) <= 32]  # an event date holds 32 characters
    dated = {"event_date": fitting[0]} if fitting else {}
    metadata = {"note": f"note {secret}", "password": UNLABELLED, "api_key": SHORT, "nested": {"deeper": [secret]},
                **{f"k{i} {line}": "key of its own" for i, line in enumerate(lines)}}
    stored = {"summary": f"Summary {secret}", "user_text": f"User {secret}", "assistant_text": f"Assistant {secret}",
              "tags": [*tagged, SHORT, "published"], "metadata": metadata, "bundle_name": f"b {tagged[0]}",
              "memory_type": "fact", "space_path": f"privacy/{kind}"}
    captures = [{"type": "fact", "title": f"Capture {kind} {titled}", "content": f"Captured {secret}",
                 "tags": [*tagged, SHORT], **dated}]
    summary = {"title": f"Consolidated {titled}", "summary": f"Summary {secret}", "type": "summary",
               "classification": {"topics": [f"t {titled}"], "entities": [titled]},
               "events": [{"when": "2026", "event": secret}], "knowledge": {"facts": [secret], "decisions": [secret]},
               "implications": [secret]}
    return [
        ("kumiho_memory_store", {**stored, "title": f"Store {kind} {titled}"}),
        ("kumiho_memory_store", {**stored, "title": f"Located {kind} {titled}", "artifact_location": f"at {secret}"}),
        ("memory_store", {**stored, "title": f"Operator {kind} {titled}"}),
        ("kumiho_memory_reflect", {"session_id": session, "response": f"Reply {secret}", "captures": captures,
                                   "user_id": f"user {titled}", "context": "privacy"}),
        ("memory_reflect", {"session_id": session, "response": f"Operator reply {secret}", "captures": captures}),
        ("kumiho_memory_ingest", {"user_id": f"alice {titled}", "context": "privacy", "session_id": session,
                                  "message": f"Ingested {secret} mail {EMAIL} call {PHONE}",
                                  "source": f"source {secret}", "evidence_level": "unverified"}),
        ("kumiho_memory_add_response", {"session_id": session, "response": f"Added {secret} {EMAIL}",
                                        "user_id": f"u {titled}"}),
        ("kumiho_memory_store_execution", {"task": f"Task {secret}", "status": "failed", "exit_code": 1,
                                           "stdout": f"out {secret}", "stderr": f"err {secret}",
                                           "tools": [titled, SHORT], "topics": [f"topic {titled}"],
                                           "space_hint": "executions"}),
        ("kumiho_memory_consolidate", {"session_id": session, "source": f"src {secret}", "user_id": f"u {titled}",
                                       "implications": [secret], "summary": summary}),
        ("kumiho_memory_discover_edges", {"revision_kref": "", "summary": secret}),  # filled in with a stored one
        ("kumiho_memory_dream_state", {"dry_run": True, "extra_instructions": f"Mind {secret}"}),
        ("kumiho_memory_dream_state", {"api_key": secret, "extra_instructions": secret}),  # refused: api_key
        ("kumiho_memory_engage", {"query": f"what about {secret}", "graph_augmented": True, "include_insights": True,
                                  "current_context": secret, "goals": [secret]}),
        ("kumiho_memory_recall", {"query": secret}),
        ("kumiho_memory_retrieve", {"query": secret, "keywords": [titled], "topics": [titled]}),
        ("kumiho_fulltext_search", {"query": secret, "auth_token": secret}),
        ("memory_engage", {"query": secret, "keywords": [titled]}),
    ]


def _found(data: bytes, where: str) -> list[str]:
    return [f"{needle} in {where}" for needle in (*NEEDLES, SHORT_NEEDLE, UNLABELLED) if needle.encode() in data]


def _grep_tree(root: Path, searched: dict[str, int] | None = None) -> list[str]:
    """Every file under ``root`` as bytes, whatever it is (graph, WAL, .lance, SQLite and its WAL, Markdown)."""
    hits: list[str] = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        hits += _found(data, str(path.relative_to(root)))
        if searched is not None:
            searched["files"] = searched.get("files", 0) + 1
            searched["bytes"] = searched.get("bytes", 0) + len(data)
    return hits


@pytest.fixture
def app(tmp_path: Path) -> Iterator[Running]:
    with serve(tmp_path / "data") as running:
        yield running


def run(app: Running, steps: Any) -> Any:
    return in_http_session(app.base_url, steps)


def _settle(app: Running) -> None:
    """Wait until the index has taken in every write (the .lance files hold what they ever will)."""
    for _ in range(600):
        if httpx.get(app.base_url + "/api/_ready", timeout=10).json()["search"]["pending"] == 0:
            return
        anyio.run(anyio.sleep, 0.1)
    raise AssertionError("the index did not catch up")


def test_no_credential_is_kept_anywhere_while_running_and_after_a_stop(app: Running) -> None:
    """Every kind at once in every field (one round)."""
    _no_credential_kept(app, {"all": BATTERY})


@pytest.mark.long
def test_no_credential_of_each_kind_is_kept_anywhere(app: Running) -> None:
    """One round per kind, the credential alone in every field (`make test-privacy`)."""
    _no_credential_kept(app, {kind: secret for kind, (secret, _) in SECRETS.items()})


def _no_credential_kept(app: Running, rounds: dict[str, str]) -> None:
    async def steps(session: Any) -> list[tuple[str, str, bool]]:
        answers = []
        for kind, secret in rounds.items():
            stored_kref = ""
            for tool, arguments in _write_calls(kind, secret):
                if tool == "kumiho_memory_discover_edges":
                    arguments = {**arguments, "revision_kref": stored_kref}
                result = await session.call_tool(tool, arguments)
                answers.append((tool, result.content[0].text, bool(result.is_error)))
                if tool == "kumiho_memory_store" and not stored_kref:
                    assert not result.is_error, result.content[0].text[:500]
                    stored_kref = json.loads(result.content[0].text)["revision_kref"]
        stored = json.loads(answers[0][1])
        for tool, arguments in (("kumiho_get_revision_by_tag", {"item_kref": stored["item_kref"]}),
                                ("kumiho_deprecate_item", {"item_kref": stored["item_kref"]}),
                                ("kumiho_get_edges", {"revision_kref": stored["revision_kref"]}),
                                ("memory_search", {"context_filter": "CognitiveMemory", "include_metadata": True}),
                                ("memory_graph", {"limit": 500})):
            result = await session.call_tool(tool, arguments)
            answers.append((tool, result.content[0].text, bool(result.is_error)))
        return answers

    answers = run(app, steps)
    errors = [(tool, json.loads(text)["error"]) for tool, text, failed in answers if failed]
    # only the per-call api_key is refused (Dream State uses the configured model); everything else worked
    assert {tool for tool, _ in errors} == {"kumiho_memory_dream_state"} and len(errors) == len(rounds), errors
    assert all(error["field"] == "api_key" for _, error in errors)
    results = [(tool, json.loads(text)) for tool, text, failed in answers if not failed]
    stores = [result for tool, result in results if tool == "kumiho_memory_store"]
    assert all(r["redacted"] for r in stores) and all(r.get("bundle_kref") for r in stores)
    consolidated = [result for tool, result in results if tool == "kumiho_memory_consolidate"]
    assert len(consolidated) == len(rounds) and all(r["success"] for r in consolidated)

    _settle(app)
    search = httpx.get(app.base_url + "/api/v1/search", params={"q": "store secret", "limit": 50}, timeout=30)
    assert search.status_code == 200 and search.json()["results"]
    hits = [hit for tool, text, _ in answers for hit in _found(text.encode(), f"the answer of {tool}")]
    hits += _found(search.content, "/api/v1/search")
    running: dict[str, int] = {}
    hits += _grep_tree(app.data_dir, running)  # while running: the graph WAL, the SQLite WAL, unoptimised index files
    assert not hits, hits
    assert app.stop() == 0
    log = app.data_dir.parent / f"{app.data_dir.name}.log"
    stopped: dict[str, int] = {}
    hits = _grep_tree(app.data_dir, stopped) + _found(log.read_bytes(), "the server log")
    assert not hits, hits
    print(json.dumps({"privacy": {"rounds": len(rounds), "tool_calls": len(answers), "credential_kinds": len(SECRETS),
                                  "needles": len(NEEDLES) + 2, "searched_while_running": running,
                                  "searched_after_stop": stopped, "log_bytes": log.stat().st_size, "found": 0}}))
    transcripts = [p.read_text() for p in (app.data_dir / "artifacts").rglob("*.md") if "### User" in p.read_text()]
    assert len(transcripts) == len(rounds)  # one consolidation transcript a round: structured PII is gone
    assert not [t for t in transcripts if EMAIL in t or PHONE in t or "[email]" not in t]


def test_config_show_and_the_debug_log_hold_no_credential(tmp_path: Path) -> None:
    key, token = SECRETS["api_key"][0], "tok-" + "Q7w8E9r0T1y2U3i4O5p6A7s8"
    env = cli_env(tmp_path / "data", KUMIHO_CE_INFERENCE__ENDPOINT_API_KEY=key, KUMIHO_CE_API_TOKEN=token)
    shown = kumiho_ce("config", "show", env=env)
    assert shown.returncode == 0 and "endpoint_api_key" in shown.stdout
    assert key not in shown.stdout + shown.stderr and token not in shown.stdout + shown.stderr
    with serve(tmp_path / "data", KUMIHO_CE_INFERENCE__ENDPOINT_API_KEY=key, KUMIHO_CE_API_TOKEN=token,
               KUMIHO_CE_LOG_LEVEL="debug") as running:
        # at debug level access lines show query strings, percent-encoded
        searched = httpx.get(running.base_url + "/api/v1/search", params={"q": f"where is {BATTERY}"}, timeout=30)
        assert searched.status_code == 200
        stored = _call(running, "kumiho_memory_store", {"title": "Debug", "user_text": f"Logged? {BATTERY}"})
        assert stored["stored"] is True
        assert running.stop() == 0
    log = (tmp_path / "data.log").read_text()
    assert "GET /api/v1/search?q=where is creds: [secret]" in log  # the line is there, redacted
    assert "listening" in log and key not in log and token not in log
    assert not _found(log.encode(), "the debug log")


def test_a_name_or_reference_holding_a_credential_is_refused_and_nothing_is_written(names_app: Running) -> None:
    project, session = "P." + SECRETS["api_key"][0], f"s.{SECRETS['jwt'][0]}"  # glued on, none is found
    refused = [
        ("kumiho_memory_store", {"title": "x", "user_text": "y", "project": project}, "project"),
        ("kumiho_memory_store", {"title": "x", "user_text": "y", "space_path": SECRETS["github_token"][0]},
         "space_path"),
        ("kumiho_memory_store", {"title": "x", "user_text": "y", "space_hint": f"h {SECRETS['aws_access_key'][0]}"},
         "space_hint"),
        ("kumiho_memory_store", {"title": "x", "user_text": "y",
                                 "source_revision_krefs": [f"kref://P/s/{SECRETS['api_key'][0]}.conversation?r=1"]},
         "source_revision_krefs"),
        ("kumiho_memory_reflect", {"session_id": session, "response": "ok"}, "session_id"),
        ("kumiho_memory_reflect", {"session_id": "s", "response": "ok", "captures": [
            {"type": "fact", "title": "t", "content": "c", "space_hint": SECRETS["slack_token"][0]}]},
         "captures[0].space_hint"),
        ("kumiho_memory_ingest", {"user_id": "u", "message": "m", "context": SECRETS["password_assignment"][0]},
         "context"),
        ("kumiho_memory_dream_state", {"model": f"/models/{SECRETS['api_key'][0]}.gguf"}, "model"),
    ]
    before = _state(names_app)
    for tool, arguments, field in refused:
        payload = _call(names_app, tool, arguments)
        assert payload["error"]["field"] == field, (tool, payload)
        assert "credential" in payload["error"]["message"] and not _found(json.dumps(payload).encode(), tool)
    # the forwarded headers (a stdio shim's KUMIHO_PROJECT / session) are names too
    for header in ("x-kumiho-project", "x-kumiho-session"):
        payload = _call(names_app, "kumiho_memory_store", {"title": "x", "user_text": "y"},
                        {header: f"P-{SECRETS['github_token'][0]}"})
        assert payload["error"]["field"] == header and not _found(json.dumps(payload).encode(), header)
    assert _state(names_app) == before
    assert not _grep_tree(names_app.data_dir)


@pytest.fixture(scope="module")
def names_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with serve(tmp_path_factory.mktemp("names") / "data") as running:
        yield running


def _call(app: Running, tool: str, arguments: dict[str, Any], headers: dict[str, str] | None = None
          ) -> dict[str, Any]:
    """One tools/call over plain HTTP (stateless JSON MCP), with the headers a stdio shim forwards."""
    answer = httpx.post(app.base_url + "/mcp", timeout=30, json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": tool, "arguments": arguments}},
        headers={"accept": "application/json, text/event-stream", **(headers or {})})
    return json.loads(answer.json()["result"]["content"][0]["text"])  # type: ignore[no-any-return]


def _state(app: Running) -> tuple[Any, ...]:
    """What a write would change: the items of every project, the artifact files, the working memory's rows."""
    items = _call(app, "memory_search", {})
    files = sorted(str(p.relative_to(app.data_dir)) for p in (app.data_dir / "artifacts").rglob("*") if p.is_file())
    with closing(sqlite3.connect(f"file:{app.data_dir / 'working' / 'working.sqlite3'}?mode=ro", uri=True)) as db:
        rows = [db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                for table in ("sessions", "messages", "active_pointers", "sequences")]
    return items["total"], files, rows
