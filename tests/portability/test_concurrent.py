"""Export and import while the appliance is written to (real Kùzu and LanceDB in tmp dirs): an export taken
during writes imports (it leaves out what refers to records written after it read them), and an import whose
reference is deleted after its check reports a conflict instead of failing its bulk load; an upload whose job
is cancelled before it starts is removed; an import writes one audit row per batch."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from appliance.errors import Conflict
from appliance.graph import GraphStore
from appliance.portability import staging
from appliance.portability.exporter import export_lines
from appliance.portability.importer import Importer
from tests.inprocess import InProcess, serve_in_process, wait_job
from tests.portability.graphs import populate
from tests.portability.test_roundtrip import NDJSON, export, upload


@pytest.fixture
def source(tmp_path: Path) -> Iterator[InProcess]:
    with serve_in_process(tmp_path / "source", None) as app:
        yield app


@pytest.fixture
def target(tmp_path: Path) -> Iterator[InProcess]:
    with serve_in_process(tmp_path / "target", None, memory={"audit_enabled": True}) as app:
        yield app


def _types(text: str) -> list[str]:
    return [json.loads(line).get("type", "header") for line in text.splitlines()]


def test_an_export_taken_while_the_appliance_is_written_to_imports(source: InProcess, target: InProcess) -> None:
    graph = source.services.graph
    krefs = populate(graph, source.services.data_dir.root / "artifacts")
    lines = export_lines(graph, source.services.data_dir.root / "artifacts")
    taken = [next(lines), next(lines)]  # the header and the first project: the projects have been read
    # a project, and its space and item, made after the export read the projects
    graph.create_project("Gamma")
    graph.create_space("/Gamma", "later")
    late = graph.create_item("/Gamma/later", "late", "note")
    late_rev = graph.create_revision(late.kref, {"text": "late"})
    while '"type":"item"' not in taken[-1]:  # the items' page (and their revisions) has been read
        taken.append(next(lines))
    # written after that read, before the edges and bundle members are read
    newer = graph.create_revision(krefs["plan"], {"text": "plan version 4"})
    graph.create_edge(newer.kref, krefs["revision"], "DERIVED_FROM")
    graph.create_edge(krefs["revision"], late_rev.kref, "REFERENCED")
    fresh = graph.create_item("/Alpha/notes", "fresh", "note")
    graph.add_bundle_member(krefs["bundle"], fresh.kref)
    text = "".join([*taken, *lines])

    records = json.dumps([json.loads(line) for line in text.splitlines() if '"type":"event"' not in line])
    assert "Gamma" not in records and newer.kref not in records and fresh.kref not in records  # events name them
    assert _types(text).count("edge") == 3  # populate's own three
    job = upload(target, text)
    assert job["state"] == "done", job
    assert target.services.graph.get_revision(krefs["revision"]).kref == krefs["revision"]


def _file_referring_to_an_item_the_target_holds(source: InProcess, target: InProcess) -> tuple[str, str]:
    """A file whose one new record, a revision, belongs to an item the target holds and the file does not
    (the target made it itself; the file's project and space are kept containers)."""
    for app in (source, target):
        app.services.graph.create_project("Shared")
        app.services.graph.create_space("/Shared", "s")
        item = app.services.graph.create_item("/Shared/s", "x", "note")
    revision = source.services.graph.create_revision(item.kref, {"text": "from the source"})
    kept = [line for line in export(source, project="Shared").splitlines()[:-1]
            if json.loads(line).get("type") in (None, "project", "space", "revision")]
    kept.append(json.dumps({"type": "end", "records": len(kept) - 1}))
    return "\n".join(kept) + "\n", revision.kref


def test_a_reference_deleted_after_the_check_is_a_conflict_not_a_failed_bulk_load(
        source: InProcess, target: InProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    text, revision = _file_referring_to_an_item_the_target_holds(source, target)
    path = tmp_path / "shared.jsonl"
    path.write_text(text)
    graph: GraphStore = target.services.graph
    item = revision.rsplit("?", 1)[0]

    original = graph.portable_nodes
    calls: list[str] = []

    def portable_nodes(table: str, keys: list[str]) -> dict[str, Any]:
        found = original(table, keys)
        calls.append(table if keys else "")
        if calls.count("Item") == 1 and table == "Item" and keys:  # the check found the item: someone deletes it
            graph.delete_item(item, force=True)
        return found

    graph.portable_nodes = portable_nodes  # type: ignore[method-assign]  # a hook that writes, not a stand-in
    try:
        with pytest.raises(Conflict) as refused:
            Importer(graph, target.services.data_dir.root / "artifacts").run(path)
    finally:
        del graph.portable_nodes
    assert "field item_kref: " + item in refused.value.message
    assert "no longer in this appliance" in refused.value.message
    assert "rolled back" not in caplog.text  # the bulk load never ran, so it was never rolled back
    assert graph.portable_nodes("Revision", [revision[len("kref://"):]]) == {}


def test_a_write_of_the_same_record_after_the_check_is_seen_inside_the_load(
        source: InProcess, target: InProcess, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The same revision written by someone else between the import's decision and its load: the decision is
    made inside the load's transaction, so the other write waits for it and is refused, not the load."""
    text, revision = _file_referring_to_an_item_the_target_holds(source, target)
    path = tmp_path / "shared.jsonl"
    path.write_text(text)
    graph: GraphStore = target.services.graph
    item = revision.rsplit("?", 1)[0]
    calls: list[int] = []
    other: list[BaseException | str] = []
    original = graph.portable_nodes

    def concurrent_write() -> None:
        try:
            other.append(graph.create_revision(item, {"text": "from someone else"}).kref)
        except BaseException as exc:  # the id is taken by then
            other.append(exc)

    def portable_nodes(table: str, keys: list[str]) -> dict[str, Any]:
        found = original(table, keys)
        if table == "Revision" and keys:
            calls.append(1)
            if len(calls) == 2:  # the write pass has decided the revision is new: someone writes it now
                writer = threading.Thread(target=concurrent_write)
                writer.start()
                if threading.current_thread().name != "kuzu-writer":  # the decision runs outside the load
                    writer.join(60)
        return found

    graph.portable_nodes = portable_nodes  # type: ignore[method-assign]  # a hook that writes, not a stand-in
    try:
        Importer(graph, target.services.data_dir.root / "artifacts").run(path)
    finally:
        del graph.portable_nodes
    for _ in range(600):
        if other:
            break
        threading.Event().wait(0.1)
    assert "rolled back" not in caplog.text
    assert graph.get_revision(revision).metadata["text"] == "from the source"
    assert other and other[0] != revision, other  # the other write came after: a new number, or refused


def test_an_import_writes_one_audit_row_per_batch(source: InProcess, target: InProcess) -> None:
    krefs = populate(source.services.graph, source.services.data_dir.root / "artifacts")
    job = upload(target, export(source))
    assert job["state"] == "done", job
    rows = [row for row in target.services.graph.audit_entries() if row.operation == "import"]
    assert len(rows) == 1, rows  # one batch
    row = rows[0]
    written = sum(job["result"]["new"].values()) + job["result"]["adopted"]
    assert row.door == "console" and row.events == written and len(row.changes) == min(written, 100)
    assert ("item.imported", krefs["plan"]) in {(c.routing_key, c.kref) for c in row.changes}
    assert row.first_event >= 0 and row.last_event >= row.first_event
    assert target.services.graph.audit_entries(kref=krefs["plan"])  # found by the kref filter


def test_an_upload_whose_job_is_cancelled_before_it_starts_is_removed(target: InProcess) -> None:
    jobs = target.services.jobs
    started, release = threading.Event(), threading.Event()

    def hold(job: Any) -> None:  # keeps the background lane busy, so the import stays queued
        started.set()
        release.wait(60)

    blocker = jobs.submit("test_hold", hold)
    assert started.wait(60)
    try:
        answer = httpx.post(target.base_url + "/api/v1/imports", content=b'{"format": "x"}\n', headers=NDJSON,
                            timeout=60)
        assert answer.status_code == 202, answer.text
        folder = staging.imports_dir(target.services.data_dir)
        assert len(list(folder.iterdir())) == 1
        cancelled = httpx.post(f"{target.base_url}/api/v1/jobs/{answer.json()['job_id']}/cancel", timeout=60)
        assert cancelled.status_code < 300, cancelled.text
    finally:
        release.set()
    assert jobs.wait(blocker, 60)
    job = wait_job(target, answer.json()["job_id"])
    assert job["state"] == "cancelled", job
    assert list(folder.iterdir()) == []
