"""Export → import into an empty appliance → export, through the admin API of in-process appliances (real
Kùzu and LanceDB in tmp dirs); the imported memories are found by the MCP engage; a second import changes
nothing; a conflicting record is refused before anything is written."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from appliance.portability import records
from tests.inprocess import InProcess, serve_in_process, wait_job
from tests.mcp_api.clients import call, in_http_session
from tests.portability.graphs import populate

NDJSON = {"content-type": "application/x-ndjson"}


def export(app: InProcess, **params: str) -> str:
    answer = httpx.get(app.base_url + "/api/v1/export", params=params, timeout=60)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("application/x-ndjson")
    return answer.text


def upload(app: InProcess, text: str, **params: str) -> dict[str, Any]:
    """POST the file as the body; the import job's final view."""
    answer = httpx.post(app.base_url + "/api/v1/imports", content=text.encode(), headers=NDJSON, params=params,
                        timeout=60)
    assert answer.status_code == 202, answer.text
    assert answer.json()["kind"] == "import"
    return wait_job(app, answer.json()["job_id"])


def comparable(text: str, data_dir: Path, *, seq: bool = True) -> list[str]:
    """The file without its documented differences: the header's ``exported_at`` and the data directory in
    the location of artifacts whose file the export carries; without ``seq``, the events' sequence numbers
    too (the importing store numbers events itself: they match a whole export imported into a fresh
    appliance, not one project's)."""
    lines = text.splitlines()
    header = json.loads(lines[0])
    header.pop("exported_at")
    kept = [json.dumps(header)]
    for line in lines[1:]:
        record = json.loads(line)
        if record.get("type") == "artifact" and "file" in record:
            root = str((data_dir / "artifacts").resolve()) + "/"
            assert record["location"] == root + record["file"]["path"], record
            record["location"] = "<artifacts>/" + record["file"]["path"]
            line = json.dumps(record)
        if record.get("type") == "event" and not seq:
            record.pop("seq")
            line = json.dumps(record)
        kept.append(line)
    return kept


async def _memories(session: Any) -> list[dict[str, Any]]:
    one = await call(session, "kumiho_memory_store", user_text="The boiler service is due every October",
                     title="Boiler service", memory_type="fact", space_path="house", tags=["home"])
    two = await call(session, "kumiho_memory_store", user_text="Grandma's birthday is on the 3rd of May",
                     title="Grandma birthday", space_path="family", source_revision_krefs=[one["revision_kref"]])
    return [one, two]


ENTRIES = (  # Memory API entries (what /api/v1/memories and Revka read): namespaces, sessions, supersession, forget
    {"key": "boiler", "content": "The boiler is serviced in October", "category": "core", "importance": 0.9},
    {"key": "boiler_new", "content": "The boiler is serviced in November now", "category": "core",
     "supersedes": "boiler"},
    {"key": "standup", "content": "Standup moved to 9:30", "category": "daily", "namespace": "work",
     "session_id": "s-1"},
    {"key": "chat_1", "content": "We talked about the garden", "category": "conversation", "session_id": "s-2"},
    {"key": "mood", "content": "Feeling fine", "category": "diary", "metadata": {"source": "phone"}},
)


def _memory_api_entries(app: InProcess) -> None:
    for body in ENTRIES:
        stored = httpx.post(app.base_url + "/api/v1/memories", json=body, timeout=30)
        assert stored.status_code == 201, stored.text
    forgotten = httpx.delete(app.base_url + "/api/v1/memories/mood", timeout=30)
    assert forgotten.status_code == 200, forgotten.text


def _entries(app: InProcess) -> dict[str, Any]:
    """Every live Memory API entry by namespace and key, and the counts, as the Memory API answers them."""
    seen: dict[str, Any] = {}
    for namespace in ("default", "work"):
        listed = httpx.get(app.base_url + "/api/v1/memories", params={"namespace": namespace, "limit": 100},
                           timeout=30)
        assert listed.status_code == 200, listed.text
        seen.update({f"{namespace}/{e['key']}": e for e in listed.json()["entries"]})
        count = httpx.get(app.base_url + "/api/v1/memories/count", params={"namespace": namespace}, timeout=30)
        assert count.status_code == 200, count.text
        seen[f"{namespace} count"] = count.json()
    return seen


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[InProcess, str]]:
    """An appliance holding every record type: the graph fixture plus memories stored through MCP (their
    artifact files written by the appliance itself)."""
    with serve_in_process(tmp_path_factory.mktemp("source") / "data", None) as app:
        populate(app.services.graph, app.services.data_dir.root / "artifacts")
        in_http_session(app.base_url, _memories)
        _memory_api_entries(app)
        yield app, export(app)


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory, source: tuple[InProcess, str]
           ) -> Iterator[tuple[InProcess, dict[str, Any]]]:
    """An empty appliance that imported the source's export."""
    with serve_in_process(tmp_path_factory.mktemp("target") / "data", None) as app:
        yield app, upload(app, source[1])


def test_the_export_holds_every_record_type_in_dependency_order(source: tuple[InProcess, str]) -> None:
    lines = source[1].splitlines()
    header = json.loads(lines[0])
    assert list(header)[:2] == ["format", "version"] and header["format"] == records.FORMAT
    assert header["version"] == records.VERSION and header["schema_version"] >= 1
    body = [json.loads(line) for line in lines[1:-1]]
    assert json.loads(lines[-1]) == {"type": "end", "records": len(body)}
    kinds = [r["type"] for r in body]
    assert set(kinds) == set(records.TYPES)
    first = {kind: kinds.index(kind) for kind in records.TYPES}
    assert first["project"] < first["space"] < first["item"] < first["revision"] < first["edge"] < first["event"]
    assert max(i for i, k in enumerate(kinds) if k in ("item", "revision", "tag", "artifact")) < first["edge"]
    defined: set[str] = set()
    for record in body:  # every reference points to a line above it
        for field in ("item_kref", "revision_kref", "source_kref", "target_kref", "bundle_kref"):
            if field in record and record["type"] != "event":
                ref = record[field]
                assert ref in defined, (record, field)
        if "kref" in record and record["type"] != "event":
            defined.add(record["kref"])
    spans = [r for r in body if r["type"] == "tag" and r["tag"] == "published" and "plan.note" in r["item_kref"]]
    assert len(spans) == 2 and sum(r["until"] is None for r in spans) == 1, "the published tag moved once"
    members = [r for r in body if r["type"] == "bundle_member" and r["bundle_kref"].endswith("/reading.bundle")]
    assert sorted(r["removed_in_revision"] is None for r in members) == [False, True]
    assert any(r["type"] == "item" and r["deprecated"] for r in body)
    assert any(r["type"] == "revision" and r["deprecated"] for r in body)
    assert {r["edge_type"] for r in body if r["type"] == "edge"} >= {"DERIVED_FROM", "DEPENDS_ON", "REFERENCED"}
    carried = [r for r in body if r["type"] == "artifact" and "file" in r]
    assert len(carried) >= 3 and all(r["file"]["content_base64"] for r in carried)
    assert any(r["type"] == "artifact" and "file" not in r and r["location"].startswith("https://") for r in body)


def test_export_then_import_into_an_empty_appliance_then_export_gives_the_same_file(
        source: tuple[InProcess, str], target: tuple[InProcess, dict[str, Any]]) -> None:
    app, job = target
    assert job["state"] == "done", job
    assert job["result"]["adopted"] >= 1  # the memory project the fresh appliance made at its first start
    assert job["kind"] == "import" and job["progress"]["done"] == job["progress"]["total"] > 0, job
    again = export(app)
    assert comparable(again, app.services.data_dir.root) == comparable(source[1], source[0].services.data_dir.root)
    assert json.loads(again.splitlines()[0])["exported_at"] != json.loads(source[1].splitlines()[0])["exported_at"]


def test_memory_api_entries_arrive_as_the_memory_api_reads_them(
        source: tuple[InProcess, str], target: tuple[InProcess, dict[str, Any]]) -> None:
    app, job = target
    assert job["state"] == "done", job
    before, after = _entries(source[0]), _entries(app)
    assert set(before) >= {"default/boiler", "default/boiler_new", "default/chat_1", "work/standup"}
    assert "default/mood" not in before  # forgotten
    assert after == before
    assert after["default/boiler"]["superseded_by"] == "boiler_new" and after["default/boiler"]["importance"] == 0.9
    was, now = (httpx.get(a.base_url + "/api/v1/memories/mood", timeout=30) for a in (source[0], app))
    assert was.status_code == 404 and (now.status_code, now.json()) == (was.status_code, was.json())  # forgotten
    assert app.services.index_worker.wait_synced(60)
    recalled = httpx.post(app.base_url + "/api/v1/memories/recall", json={"query": "when is the boiler serviced",
                                                                         "limit": 5}, timeout=30)
    assert recalled.status_code == 200, recalled.text
    assert "boiler_new" in [e["key"] for e in recalled.json()["entries"]], recalled.json()


def test_artifact_files_arrive_with_their_bytes(source: tuple[InProcess, str],
                                               target: tuple[InProcess, dict[str, Any]]) -> None:
    app, _ = target
    for line in source[1].splitlines()[1:-1]:
        record = json.loads(line)
        if record["type"] == "artifact" and "file" in record:
            copy = app.services.data_dir.root / "artifacts" / record["file"]["path"]
            original = source[0].services.data_dir.root / "artifacts" / record["file"]["path"]
            assert copy.read_bytes() == original.read_bytes()


def test_importing_the_same_file_again_changes_nothing(source: tuple[InProcess, str],
                                                       target: tuple[InProcess, dict[str, Any]]) -> None:
    app, _ = target
    before, stats = export(app), app.services.graph.stats()
    job = upload(app, source[1])
    assert job["state"] == "done", job
    assert job["result"]["new"] == {} and job["result"]["unchanged"] == job["result"]["records"]
    assert app.services.graph.stats() == stats
    assert comparable(export(app), app.services.data_dir.root) == comparable(before, app.services.data_dir.root)


def test_the_imported_memories_are_found_by_the_mcp_engage(target: tuple[InProcess, dict[str, Any]]) -> None:
    app, _ = target
    assert app.services.index_worker.wait_synced(60)

    async def engage(session: Any) -> dict[str, Any]:
        return await call(session, "kumiho_memory_engage", query="when is the boiler service due?")

    found = in_http_session(app.base_url, engage)
    assert any("Boiler" in json.dumps(result) for result in found["results"]), found


def test_a_conflicting_record_is_refused_before_anything_is_written(
        source: tuple[InProcess, str], target: tuple[InProcess, dict[str, Any]]) -> None:
    app, _ = target
    lines = source[1].splitlines()
    changed = next(i for i, line in enumerate(lines) if '"type":"item"' in line and "plan.note" in line)
    record = json.loads(lines[changed])
    record["metadata"]["title"] = "Another plan"
    lines[changed] = records.encode(record).rstrip("\n")
    new_item = {**json.loads(lines[changed]), "kref": "kref://Alpha/notes/fresh.note", "item_name": "fresh"}
    lines.insert(changed, records.encode(new_item).rstrip("\n"))
    lines[-1] = records.encode({"type": "end", "records": len(lines) - 2}).rstrip("\n")
    stats = app.services.graph.stats()
    job = upload(app, "\n".join(lines) + "\n")
    assert job["state"] == "failed" and job["error"]["code"] == "conflict", job
    message = job["error"]["message"]
    assert f"line {changed + 2}: kref://Alpha/notes/plan.note is held with other metadata" in message, message
    assert "nothing was written" in message
    assert app.services.graph.stats() == stats  # the new item of the same file was not written either
    with pytest.raises(Exception, match="fresh"):
        app.services.graph.get_item("kref://Alpha/notes/fresh.note")


def test_a_dry_run_counts_and_writes_nothing(source: tuple[InProcess, str], tmp_path: Path) -> None:
    with serve_in_process(tmp_path / "data", None) as app:
        stats = app.services.graph.stats()
        job = upload(app, source[1], dry_run="true")
        assert job["state"] == "done" and job["result"]["dry_run"] is True, job
        assert job["result"]["new"]["item"] == sum('"type":"item"' in line for line in source[1].splitlines())
        assert app.services.graph.stats() == stats


def test_one_project_exports_and_imports_alone(source: tuple[InProcess, str], tmp_path: Path) -> None:
    text = export(source[0], project="Alpha")
    body = [json.loads(line) for line in text.splitlines()[1:-1]]
    assert json.loads(text.splitlines()[0])["project"] == "Alpha"
    assert {r["name"] for r in body if r["type"] == "project"} == {"Alpha"}
    assert all(r["project"] == "Alpha" for r in body if r["type"] in ("space", "item"))
    assert all(r["target_kref"].startswith("kref://Alpha/") for r in body if r["type"] == "edge")
    with serve_in_process(tmp_path / "data", None) as app:
        job = upload(app, text)
        assert job["state"] == "done", job
        assert comparable(export(app, project="Alpha"), app.services.data_dir.root, seq=False) == comparable(
            text, source[0].services.data_dir.root, seq=False)
        missing = httpx.get(app.base_url + "/api/v1/export", params={"project": "Nope"}, timeout=30)
        assert missing.status_code == 404 and missing.json()["field"] == "project"


def test_a_file_staged_in_the_imports_folder_is_imported_by_name(source: tuple[InProcess, str],
                                                                tmp_path: Path) -> None:
    with serve_in_process(tmp_path / "data", None) as app:
        folder = app.services.data_dir.root / "imports"
        folder.mkdir()
        (folder / "home.jsonl").write_text(source[1])
        answer = httpx.post(app.base_url + "/api/v1/imports", json={"file": "home.jsonl"}, timeout=30)
        assert answer.status_code == 202, answer.text
        assert wait_job(app, answer.json()["job_id"])["state"] == "done"
        assert (folder / "home.jsonl").exists(), "a file the operator staged is left where it is"
        for name, status in (("../graph", 400), ("/etc/passwd", 400), ("absent.jsonl", 404)):
            refused = httpx.post(app.base_url + "/api/v1/imports", json={"file": name}, timeout=30)
            assert refused.status_code == status and refused.json()["field"] == "file", refused.text
        plain = httpx.post(app.base_url + "/api/v1/imports", content=b"x", headers={"content-type": "text/csv"},
                           timeout=30)
        assert plain.status_code == 400 and plain.json()["field"] == "body", plain.text


def test_a_whole_export_merges_into_an_appliance_that_holds_memories(source: tuple[InProcess, str],
                                                                     tmp_path: Path) -> None:
    with serve_in_process(tmp_path / "data", None) as app:
        async def store(session: Any) -> dict[str, Any]:
            return await call(session, "kumiho_memory_store", user_text="The router reboots on Sundays",
                              title="Router reboots", space_path="house")

        mine = in_http_session(app.base_url, store)
        job = upload(app, source[1])
        assert job["state"] == "done", job
        # the memory project, its root space and the space both stored into are this appliance's own: kept,
        # not conflicts
        assert job["result"]["kept"] == 3 and job["result"]["adopted"] == 0, job["result"]
        graph = app.services.graph
        assert graph.get_item(mine["item_kref"]).item_name
        assert graph.get_item("kref://Alpha/notes/plan.note").metadata["priority"] == "high"
        assert upload(app, source[1])["result"]["new"] == {}


def test_an_upload_larger_than_the_body_limit_is_refused(source: tuple[InProcess, str], tmp_path: Path) -> None:
    with serve_in_process(tmp_path / "data", None, http={"max_body_bytes": 1024}) as app:
        answer = httpx.post(app.base_url + "/api/v1/imports", content=source[1].encode(), headers=NDJSON,
                            timeout=30)
        assert answer.status_code == 413, answer.text
        assert "http.max_body_bytes" in answer.json()["detail"]
        assert app.services.jobs.list(kind="import") == []
