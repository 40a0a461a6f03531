"""What the appliance writes to disk, through its front doors: consolidation archives every message it
clears; artifact files are fsynced (file and folder) before the graph commit that points at them, and
what a crash between the two leaves is swept at start; a project name can never lead a write outside the
data directory. Real Kùzu, LanceDB and SQLite in tmp dirs; the official MCP client over real HTTP."""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from appliance.fsutil import write_durably
from appliance.inference.chat import ScriptedCall, ScriptedModel
from tests.appliance_process import Running, serve
from tests.inprocess import InProcess, serve_in_process, wait_job
from tests.mcp_api.clients import RevkaLikeClient, call, http_session
from tests.mcp_api.clients import in_http_session as run

MESSAGES = 1200  # more than the 1,000 the buffer was once read with


def line(n: int) -> str:
    return f"message number {n:04d} of the long session"


def fill(app: InProcess, session_id: str, count: int) -> None:
    """``count`` messages in the session's buffer: the last through kumiho_memory_add_response, the others
    straight into the working memory the tool appends to (1,200 tool calls would take a minute)."""
    project = app.services.settings.kumiho.default_project
    for n in range(1, count):
        app.services.working.append(project, session_id, "assistant", line(n))
    answer = run(app.base_url, lambda s: call(s, "kumiho_memory_add_response", session_id=session_id,
                                              response=line(count)))
    assert answer["message_count"] == count


def transcript_of(app: InProcess, revision_kref: str) -> str:
    located = run(app.base_url, lambda s: call(s, "kumiho_resolve_kref", kref=revision_kref))
    return Path(located["location"]).read_text(encoding="utf-8")


def assert_every_message_archived(text: str, count: int) -> None:
    positions = [text.find(line(n)) for n in range(1, count + 1)]
    missing = [n for n, at in enumerate(positions, 1) if at < 0]
    assert not missing, f"{len(missing)} messages missing from the transcript, first {missing[:5]}"
    assert positions == sorted(positions), "the transcript is out of order"


# -- consolidation archives exactly what it clears ---------------------------------------------------------

@pytest.fixture
def summaries() -> list[ScriptedCall]:
    return []


@pytest.fixture
def app(tmp_path: Path, summaries: list[ScriptedCall]) -> Iterator[InProcess]:
    def summarise(scripted: ScriptedCall) -> dict[str, Any]:
        summaries.append(scripted)
        return {"type": "summary", "title": "A long session", "summary": "Twelve hundred numbered messages.",
                "topics": ["numbers"], "entities": [], "facts": [], "decisions": [], "events": [],
                "implications": []}

    with serve_in_process(tmp_path / "data", ScriptedModel([summarise] * 10),
                          maintenance={"idle_consolidation_minutes": 0}) as running:
        yield running


def test_consolidating_an_agent_summary_archives_every_message_it_clears(app: InProcess) -> None:
    fill(app, "s-long", MESSAGES)
    done = run(app.base_url, lambda s: call(s, "kumiho_memory_consolidate", session_id="s-long",
                                            summary="Twelve hundred numbered messages."))
    assert done["success"] is True and done["cleared_messages"] == MESSAGES
    assert_every_message_archived(transcript_of(app, done["store_result"]["revision_kref"]), MESSAGES)
    assert done["store_result"]["summary"].startswith("Twelve hundred")
    assert app.services.working.count(app.services.settings.kumiho.default_project, "s-long") == 0


def test_consolidating_with_the_model_archives_every_message_and_bounds_the_prompt(
        app: InProcess, summaries: list[ScriptedCall]) -> None:
    fill(app, "s-model", MESSAGES)
    done = run(app.base_url, lambda s: call(s, "kumiho_memory_consolidate", session_id="s-model"))
    if "job_id" in done and "store_result" not in done:  # went on in the background
        done = {**done, **wait_job(app, done["job_id"])["result"]}
    assert done["cleared_messages"] == MESSAGES and done["summarized_by"] == "scripted"
    assert_every_message_archived(transcript_of(app, done["store_result"]["revision_kref"]), MESSAGES)
    prompt = summaries[0].messages[-1]["content"]  # the model reads the start and the end, the middle cut
    assert line(1) in prompt and line(MESSAGES) in prompt and "messages omitted" in prompt


def test_a_message_buffered_while_the_model_summarises_stays_for_the_next_consolidation(
        tmp_path: Path) -> None:
    late: list[str] = []

    def summarise_while_a_message_arrives(scripted: ScriptedCall) -> dict[str, Any]:
        async def arrive(session: Any) -> None:
            await call(session, "kumiho_memory_add_response", session_id="s-race", response="arrived late")

        anyio.run(lambda: _in_session(running.base_url, arrive))
        late.append("sent")
        return {"type": "summary", "title": "Race", "summary": "Two early messages.", "topics": [],
                "entities": [], "facts": [], "decisions": [], "events": [], "implications": []}

    with serve_in_process(tmp_path / "data", ScriptedModel([summarise_while_a_message_arrives])) as running:
        fill(running, "s-race", 2)
        done = run(running.base_url, lambda s: call(s, "kumiho_memory_consolidate", session_id="s-race"))
        if "store_result" not in done:
            done = {**done, **wait_job(running, done["job_id"])["result"]}
        assert late == ["sent"] and done["cleared_messages"] == 2
        assert "arrived late" not in transcript_of(running, done["store_result"]["revision_kref"])
        left = running.services.working.all_messages(running.services.settings.kumiho.default_project, "s-race")
        assert [m.content for m in left] == ["arrived late"]


async def _in_session(base_url: str, steps: Any) -> Any:
    async with http_session(base_url) as session:
        return await steps(session)


# -- artifact files are durable ------------------------------------------------------------------------

def test_write_durably_fsyncs_the_file_before_the_rename_and_the_folder_after(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "a" / "b" / "memory.md"
    synced: list[tuple[str, str, bool]] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        kind = "dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
        synced.append((kind, os.readlink(f"/proc/self/fd/{fd}"), target.exists()))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    write_durably(target, "hello")
    assert target.read_text() == "hello"
    files = [s for s in synced if s[0] == "file"]
    assert len(files) == 1 and files[0][1].endswith(".tmp") and files[0][2] is False  # before the rename
    assert ("dir", str(target.parent), True) == synced[-1]  # the rename is made durable last
    # the folders it created were synced into their parents
    assert {str(tmp_path), str(tmp_path / "a")} <= {path for kind, path, _ in synced if kind == "dir"}
    assert list(target.parent.iterdir()) == [target]  # no temporary file left


def test_a_stored_memory_is_on_disk_before_the_graph_points_at_it(
        app: InProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    graph = app.services.graph
    synced: list[tuple[str, set[str]]] = []  # (the path synced, the artifact locations the graph held then)
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append((os.readlink(f"/proc/self/fd/{fd}"), graph.artifact_locations()))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    stored = run(app.base_url, lambda s: call(s, "kumiho_memory_store", user_text="The NAS backs up at 02:00",
                                              space_path="homelab"))
    location = run(app.base_url, lambda s: call(s, "kumiho_resolve_kref", kref=stored["revision_kref"]))["location"]
    assert "The NAS backs up at 02:00" in Path(location).read_text()
    file_syncs = [known for path, known in synced if path.startswith(location + ".") and path.endswith(".tmp")]
    folder_syncs = [known for path, known in synced if path == str(Path(location).parent)]
    assert len(file_syncs) == 1 and folder_syncs, synced
    assert all(location not in known for known in file_syncs + folder_syncs), "fsync came after the commit"
    assert location in graph.artifact_locations()


def _paths(root: Path) -> set[str]:
    """Every file and folder under ``root`` but the appliance's log."""
    return {str(p.relative_to(root)) for p in root.rglob("*")} - {"data.log"}


@pytest.fixture
def stopped_data_dir(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    """A data directory holding two memories and a transcript, its appliance stopped."""
    data = tmp_path / "data"
    with serve_in_process(data, None) as running:
        async def steps(session: Any) -> list[str]:
            one = await call(session, "kumiho_memory_store", user_text="Router admin page is on 10.0.0.1",
                             space_path="homelab")
            two = await call(session, "kumiho_memory_store", user_text="The printer is in the hall")
            await call(session, "kumiho_memory_add_response", session_id="s-kill", response="a line to archive")
            three = await call(session, "kumiho_memory_consolidate", session_id="s-kill", summary="One line.")
            return [one["revision_kref"], two["revision_kref"], three["store_result"]["revision_kref"]]

        krefs = run(running.base_url, steps)
        locations = {k: run(running.base_url, lambda s, k=k: call(s, "kumiho_resolve_kref", kref=k))["location"]
                     for k in krefs}
    yield data, locations


def test_start_sweeps_what_an_interrupted_write_left_and_keeps_every_referenced_file(
        stopped_data_dir: tuple[Path, dict[str, str]]) -> None:
    data, locations = stopped_data_dir
    artifacts = data / "artifacts"
    referenced = {loc: hashlib.sha256(Path(loc).read_bytes()).hexdigest() for loc in locations.values()}
    # what a kill -9 between the file write and the graph commit leaves: a cut-short temporary file, and
    # a complete file whose memory was never committed (so never acknowledged)
    homelab = Path(next(iter(locations.values()))).parent
    (homelab / "cut-short-1a2b3c4d.md.9f8e7d6c.tmp").write_text("---\ntitle: half")
    (homelab / "never-committed-5e6f7a8b.md").write_text("---\ntitle: never acknowledged\n---\n")
    (artifacts / "CognitiveMemory" / "new-space").mkdir(parents=True)
    (artifacts / "CognitiveMemory" / "new-space" / "lost-0a0b0c0d.md").write_text("orphan")

    with serve(data) as running:
        listed = run(running.base_url, lambda s: call(s, "kumiho_memory_engage", query="router admin page"))
        running.stop()

    assert {loc: hashlib.sha256(Path(loc).read_bytes()).hexdigest() for loc in locations.values()} == referenced
    assert not list(artifacts.rglob("*.tmp"))
    orphaned = artifacts / ".orphaned"
    assert (orphaned / homelab.relative_to(artifacts) / "never-committed-5e6f7a8b.md").read_text().startswith("---")
    assert (orphaned / "CognitiveMemory" / "new-space" / "lost-0a0b0c0d.md").read_text() == "orphan"
    outside = {str(p) for p in artifacts.rglob("*.md") if orphaned not in p.parents}
    assert outside == set(referenced)
    assert listed["count"] >= 1
    assert "moved 2 file(s)" in (data.parent / "data.log").read_text()


# -- a project name cannot lead a write outside the data directory --------------------------------------

BAD_PROJECTS = ["../../escape", "../escape", "/tmp/escape", "a/../../b", "..", "bad name"]


def _tool_error(text: str) -> dict[str, Any]:
    payload = json.loads(text)
    assert "error" in payload, payload
    return payload["error"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def http_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with serve(tmp_path_factory.mktemp("paths") / "data") as running:
        yield running


@pytest.mark.parametrize("project", BAD_PROJECTS)
def test_a_bad_project_argument_is_refused_before_any_file_is_touched(http_app: Running, project: str) -> None:
    sandbox = http_app.data_dir.parent
    before = _paths(sandbox)
    with RevkaLikeClient(http_app.base_url) as client:
        client.handshake()
        answers = [(tool, client.tool_text(tool, arguments)) for tool, arguments in (
            ("kumiho_memory_store", {"project": project, "user_text": "The NAS backs up at 02:00"}),
            ("kumiho_memory_store", {"project": project, "user_text": "The NAS backs up", "stack_revisions": False}),
            ("memory_store", {"project": project, "title": "NAS", "user_text": "The NAS backs up at 02:00"}),
            ("kumiho_memory_retrieve", {"project": project, "query": "NAS"}),
            ("memory_reflect", {"project": project, "session_id": "s-p", "response": "ok", "captures": [
                {"type": "fact", "title": "NAS", "content": "The NAS backs up at 02:00", "space_hint": "x"}]}),
        )]
    assert _paths(sandbox) == before  # nothing created, outside the data directory or in it
    for tool, text in answers:
        error = _tool_error(text)
        assert error["code"] == "invalid_argument" and error.get("field") == "project", (tool, error)
        assert error["message"].startswith("project:") and "Traceback" not in text, (tool, error)


@pytest.mark.parametrize("project", BAD_PROJECTS)
def test_a_bad_project_header_is_refused_before_any_file_is_touched(http_app: Running, project: str) -> None:
    sandbox = http_app.data_dir.parent
    before = _paths(sandbox)
    with RevkaLikeClient(http_app.base_url) as client:
        client.http.headers["X-Kumiho-Project"] = project
        client.handshake()
        answers = [(tool, client.tool_text(tool, arguments)) for tool, arguments in (
            ("kumiho_memory_store", {"user_text": "The NAS backs up at 02:00"}),
            ("kumiho_memory_reflect", {"session_id": "s-h", "response": "ok", "captures": [
                {"type": "fact", "title": "NAS", "content": "The NAS backs up at 02:00"}]}),
            ("kumiho_memory_ingest", {"user_id": "ana", "session_id": "s-h", "message": "hello"}),
            ("kumiho_memory_add_response", {"session_id": "s-h", "response": "hi"}),
            ("kumiho_memory_consolidate", {"session_id": "s-h", "summary": "A greeting."}),
            ("kumiho_memory_store_execution", {"task": "backup", "status": "done"}),
            ("kumiho_memory_engage", {"query": "NAS"}),
        )]
    assert _paths(sandbox) == before  # nothing created, outside the data directory or in it
    for tool, text in answers:
        error = _tool_error(text)
        assert error["code"] == "invalid_argument" and error.get("field") == "project", (tool, error)
        assert "X-Kumiho-Project header" in error["message"] and "Traceback" not in text, (tool, error)
