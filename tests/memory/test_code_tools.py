"""The code-decision tools, offered only with KUMIHO_MEMORY_DECISIONS=1, through the official MCP client on
real stores and a real git repository; a ScriptedModel plays the model that mines commits and sessions."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from appliance.inference.chat import ScriptedCall, ScriptedModel
from appliance.operations.catalogue import operations
from tests.appliance_process import free_port
from tests.inprocess import InProcess, serve_in_process
from tests.mcp_api.clients import call, in_http_session, stdio_session
from tests.mcp_api.test_bounds import _unbounded
from tests.mcp_api.test_stdio import stop_background_appliance

CODE_TOOLS = {"kumiho_code_why", "kumiho_code_ingest", "kumiho_code_capture", "kumiho_code_mine_session"}


def mcp(app: InProcess, tool: str, **arguments: Any) -> dict[str, Any]:
    return in_http_session(app.base_url, lambda s: call(s, tool, **arguments))  # type: ignore[no-any-return]


def listed(app: InProcess) -> set[str]:
    async def steps(session: Any) -> set[str]:
        return {t.name for t in (await session.list_tools()).tools}

    return in_http_session(app.base_url, steps)  # type: ignore[no-any-return]


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@example.org", "HOME": "/nonexistent",
                               "PATH": "/usr/bin:/bin"}).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repos" / "shop"
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    for n, message in enumerate(["Use SQLite for the cart\n\nPostgres was too heavy for one node.",
                                 "Fix typo in README", "Cache prices for 60 s\n\nThe price API is rate limited."]):
        (root / f"file{n}.txt").write_text(message)
        git(root, "add", ".")
        git(root, "commit", "-q", "-m", message)
    return root


class Miner:
    """The model's answers: one decision for every numbered source whose text holds a 'because' line."""

    def __init__(self) -> None:
        self.calls: list[ScriptedCall] = []

    def __call__(self, scripted: ScriptedCall) -> dict[str, Any]:
        self.calls.append(scripted)
        material = scripted.messages[-1]["content"]
        found = []
        for title in ("Use SQLite for the cart", "Cache prices for 60 s"):
            if title in material:
                index = next(i for i in range(1, 6) if f"{i}. commit" in material
                             and title in material.split(f"{i}. commit", 1)[1].split("\n\n")[0])
                found.append({"source": index, "title": title, "decision": title, "rationale": "stated"})
        if "Session transcript" in material and "we chose gRPC" in material:
            found.append({"source": 1, "title": "gRPC transport", "decision": "Use gRPC", "rationale": "streaming"})
        return {"decisions": found}


@pytest.fixture
def miner() -> Miner:
    return Miner()


@pytest.fixture
def app(tmp_path: Path, repo: Path, miner: Miner, monkeypatch: pytest.MonkeyPatch) -> Iterator[InProcess]:
    monkeypatch.setenv("KUMIHO_MEMORY_DECISIONS", "1")
    with serve_in_process(tmp_path / "data", ScriptedModel([miner] * 100),
                          maintenance={"idle_consolidation_minutes": 0,
                                       "code_repo_roots": [str(repo.parent)]}) as running:
        yield running


def test_the_code_tools_are_offered_only_with_their_switch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUMIHO_MEMORY_DECISIONS", raising=False)
    with serve_in_process(tmp_path / "off", None) as app:
        assert not listed(app) & CODE_TOOLS
        refused = mcp(app, "kumiho_code_why", question="why sqlite")
        assert refused["error"]["code"] == "not_found" and "unknown tool" in refused["error"]["message"]
    monkeypatch.setenv("KUMIHO_MEMORY_DECISIONS", "1")
    with serve_in_process(tmp_path / "on", None) as app:
        assert listed(app) >= CODE_TOOLS
        assert mcp(app, "kumiho_code_why", question="why sqlite")["count"] == 0


def test_the_switch_reaches_an_appliance_the_stdio_shim_starts(tmp_path: Path) -> None:
    data = tmp_path / "data"

    async def steps() -> set[str]:
        async with stdio_session(data, free_port(), KUMIHO_MEMORY_DECISIONS="1") as session:
            return {t.name for t in (await session.list_tools()).tools}

    try:
        names = anyio.run(steps)
    finally:
        stop_background_appliance(data)
    assert names >= CODE_TOOLS


def test_every_input_of_the_code_tools_has_a_bound() -> None:
    assert [m for name in CODE_TOOLS for m in _unbounded(operations()[name].input_schema, name)] == []


def test_capture_anchors_decisions_to_a_commit_and_why_finds_them(app: InProcess, repo: Path) -> None:
    head = git(repo, "rev-parse", "HEAD")
    stored = mcp(app, "kumiho_code_capture", repo_path=str(repo), commit_ref="main", decisions=[
        {"title": "SQLite for the cart", "decision": "The cart lives in SQLite", "rationale": "one node, no server",
         "files": ["src/cart/store.py:10-40"], "symbols": ["CartStore"], "confidence": "high",
         "evidence": [{"kind": "benchmark", "text": "3x faster startup"}]},
        {"title": "Price cache", "decision": "Prices are cached for 60 s", "files": ["src/prices.py"]}])
    assert stored["captured"] == 2 and stored["commit"] == head and stored["commit_resolved"] is True
    assert stored["project"] == "CognitiveMemory-decisions" and stored["repo"] == "shop"
    by_line = mcp(app, "kumiho_code_why", file="src/cart/store.py", line=25)
    assert [d["title"] for d in by_line["decisions"]] == ["SQLite for the cart"]
    first = by_line["decisions"][0]
    assert first["evidence"] == [{"kind": "benchmark", "text": "3x faster startup"}] and first["commit"] == head
    assert "one node, no server" in by_line["context"] and "benchmark: 3x faster startup" in by_line["context"]
    by_question = mcp(app, "kumiho_code_why", question="why are prices cached?", commit=head[:10])
    assert by_question["decisions"][0]["title"] == "Price cache"
    assert mcp(app, "kumiho_code_why", file="src/unknown.py")["count"] == 0
    # a repository outside the roots is never read: the commit is kept as given
    outside = mcp(app, "kumiho_code_capture", repo_path="/etc", commit_ref="HEAD",
                  decisions=[{"title": "Elsewhere", "decision": "x"}])
    assert outside["commit"] == "HEAD" and outside["commit_resolved"] is False and "code_repo_roots" in outside["note"]
    assert mcp(app, "kumiho_code_why", limit=3)["error"]["field"] == "question"
    assert mcp(app, "kumiho_code_capture", decisions=[{"title": "t", "decision": "d"}],
               commit_ref="--output=/tmp/x")["error"]["field"] == "commit_ref"
    assert mcp(app, "kumiho_code_capture", decisions=[])["error"]["field"] == "decisions"


def test_ingest_mines_new_commits_once_with_the_model(app: InProcess, repo: Path, miner: Miner) -> None:
    mined = mcp(app, "kumiho_code_ingest", repo_path="shop", max_commits=10)
    assert mined["commits_scanned"] == 3 and mined["commits_skipped"] == 0 and mined["decisions_stored"] == 2
    titles = {d["title"] for d in mined["decisions"]}
    assert titles == {"Use SQLite for the cart", "Cache prices for 60 s"}
    assert "Postgres was too heavy" in miner.calls[0].messages[-1]["content"]
    why = mcp(app, "kumiho_code_why", question="why SQLite for the cart")
    sqlite = why["decisions"][0]
    assert sqlite["title"] == "Use SQLite for the cart" and sqlite["source"] == "git"
    assert sqlite["commit"] == git(repo, "rev-parse", "HEAD~2")
    again = mcp(app, "kumiho_code_ingest", repo_path="shop")
    assert again["commits_skipped"] == 3 and again["decisions_stored"] == 0 and len(miner.calls) == 1
    forced = mcp(app, "kumiho_code_ingest", repo_path="shop", rev_range="HEAD~1..HEAD", force=True)
    assert forced["commits_scanned"] == 1 and forced["decisions_stored"] == 1
    assert mcp(app, "kumiho_code_ingest", repo_path="/etc")["error"]["field"] == "repo_path"
    assert mcp(app, "kumiho_code_ingest", repo_path="shop", rev_range="-p")["error"]["field"] == "rev_range"
    assert mcp(app, "kumiho_code_ingest", repo_path="shop", rev_range="nope..main")["error"]["field"] == "rev_range"
    assert mcp(app, "kumiho_code_ingest", repo_path="shop", max_commits=501)["error"]["field"] == "max_commits"


def test_an_ingest_batch_is_one_transaction(app: InProcess, miner: Miner) -> None:
    """A batch's decisions and the mark that its commits are mined commit together, so a failure or a crash
    part-way can never leave decisions whose commits the next ingest would mine (and store) again."""
    app.services.index_worker.stop()  # its own commits (rows marked indexed) would be counted too
    commits: list[int] = []
    app.services.graph.subscribe(lambda: commits.append(1))
    mined = mcp(app, "kumiho_code_ingest", repo_path="shop", max_commits=10)
    assert mined["commits_scanned"] == 3 and mined["decisions_stored"] == 2 and len(miner.calls) == 1
    assert len(commits) == 1  # one batch (up to five commits): one graph transaction
    again = mcp(app, "kumiho_code_ingest", repo_path="shop")
    assert again["decisions_stored"] == 0 and again["commits_skipped"] == 3 and len(commits) == 1


def test_mine_session_reads_the_buffered_session(app: InProcess, miner: Miner) -> None:
    mcp(app, "kumiho_memory_ingest", user_id="dev", session_id="s-code", message="For the transport we chose gRPC")
    mcp(app, "kumiho_memory_add_response", session_id="s-code", response="Noted: we chose gRPC for streaming")
    mined = mcp(app, "kumiho_code_mine_session", session_id="s-code", repo_path="shop", ingest_first=False)
    assert mined["decisions_stored"] == 1 and mined["commit_resolved"] is True and mined["ingest_first"] == "no"
    assert len(miner.calls) == 1  # the session only
    assert mcp(app, "kumiho_code_why", question="gRPC transport")["decisions"][0]["decision"] == "Use gRPC"
    assert mcp(app, "kumiho_code_mine_session", session_id="empty")["error"]["field"] == "session_id"
    assert mcp(app, "kumiho_code_mine_session")["error"]["field"] == "session_id"


def test_mine_session_mines_the_history_first_and_a_session_once_unless_forced(app: InProcess,
                                                                               miner: Miner) -> None:
    mcp(app, "kumiho_memory_ingest", user_id="dev", session_id="s-first", message="For the transport we chose gRPC")
    first = mcp(app, "kumiho_code_mine_session", session_id="s-first", repo_path="shop")  # ingest_first: default
    history = first["ingest_first"]
    assert history["commits_scanned"] == 3 and history["decisions_stored"] == 2, history
    assert first["decisions_stored"] == 1 and len(miner.calls) == 2  # one batch of commits, then the session
    why = mcp(app, "kumiho_code_why", question="why SQLite for the cart")
    assert why["decisions"][0]["title"] == "Use SQLite for the cart" and why["decisions"][0]["source"] == "git"
    # the same transcript again: not mined again, and said so
    again = mcp(app, "kumiho_code_mine_session", session_id="s-first", repo_path="shop")
    assert again["decisions_stored"] == 0 and "force" in again["skipped"] and len(miner.calls) == 2
    # force mines it again; the history is mined already, so ingest_first finds nothing new
    forced = mcp(app, "kumiho_code_mine_session", session_id="s-first", repo_path="shop", force=True)
    assert forced["decisions_stored"] == 1 and len(miner.calls) == 3
    assert forced["ingest_first"]["commits_skipped"] == 3 and forced["ingest_first"]["decisions_stored"] == 0
    # a session that grew is mined again without force
    mcp(app, "kumiho_memory_add_response", session_id="s-first", response="Noted: we chose gRPC for streaming")
    grown = mcp(app, "kumiho_code_mine_session", session_id="s-first", repo_path="shop")
    assert grown["decisions_stored"] == 1 and len(miner.calls) == 4
    # without a readable repository the history cannot be mined first: the answer says why
    outside = mcp(app, "kumiho_code_mine_session", session_id="s-first", repo_path="/etc", force=True)
    assert outside["ingest_first"].startswith("skipped: ") and "code_repo_roots" in outside["ingest_first"]
    assert outside["commit_resolved"] is False


def test_without_a_model_mining_is_skipped_and_capture_still_works(tmp_path: Path, repo: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUMIHO_MEMORY_DECISIONS", "1")
    with serve_in_process(tmp_path / "data", None, maintenance={"code_repo_roots": [str(repo.parent)]}) as app:
        skipped = mcp(app, "kumiho_code_ingest", repo_path="shop")
        assert skipped["success"] is False and "no local model" in skipped["skipped"]
        assert mcp(app, "kumiho_code_capture", decisions=[{"title": "t", "decision": "d"}],
                   repo_path="shop")["commit_resolved"] is True


def test_a_root_inside_another_repository_does_not_open_that_repository(tmp_path: Path, repo: Path, miner: Miner,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The allowed root is a plain directory inside a git repository (a home directory kept in git): git must
    not walk up into the outer repository, so nothing of its history is read."""
    outer = tmp_path / "home"
    inner = outer / "projects"
    inner.mkdir(parents=True)
    git(outer, "init", "-q", "-b", "main")
    (outer / "secret.txt").write_text("dotfiles")
    git(outer, "add", ".")
    git(outer, "commit", "-q", "-m", "Use SQLite for the cart\n\nA private commit of the outer repository.")
    monkeypatch.setenv("KUMIHO_MEMORY_DECISIONS", "1")
    with serve_in_process(tmp_path / "data", ScriptedModel([miner] * 10),
                          maintenance={"code_repo_roots": [str(inner)]}) as app:
        for repo_path in (str(inner), "."):
            refused = mcp(app, "kumiho_code_ingest", repo_path=repo_path)
            assert refused["error"]["code"] == "invalid_argument" and refused["error"]["field"] == "repo_path"
            assert "code_repo_roots" in refused["error"]["message"]
        captured = mcp(app, "kumiho_code_capture", repo_path=str(inner), commit_ref="HEAD",
                       decisions=[{"title": "t", "decision": "d"}])
        assert captured["commit"] == "HEAD" and captured["commit_resolved"] is False
    assert miner.calls == []  # the outer repository's commits never reached the model
