"""``kumiho-ce backup`` against a running appliance (real ``kumiho-ce serve``) and without one; ``restore`` refused
while an appliance runs, with the command to run; ``snapshots list``; the backups routes."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from appliance.backup import archive
from appliance.datadir import DataDir
from tests.appliance_process import Running, cli_env, kumiho_ce, serve
from tests.backup.helpers import backup_now, store
from tests.inprocess import InProcess, serve_in_process, wait_job
from tests.mcp_api.hostile import RawMcp


def _store_over_mcp(base_url: str, text: str) -> None:
    mcp = RawMcp(base_url)
    try:
        answer = mcp.call("kumiho_memory_store", {"project": "demo", "space_path": "notes", "user_text": text})
        assert answer.payload and answer.payload.get("stored"), answer.text
    finally:
        mcp.close()


@pytest.fixture(scope="module")
def running(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with serve(tmp_path_factory.mktemp("cli") / "data") as appliance:
        try:
            _store_over_mcp(appliance.base_url, "The boiler is serviced every October")
            yield appliance
        finally:
            appliance.stop()


def test_backup_against_a_running_appliance_writes_the_file_and_leaves_no_copy_behind(running: Running) -> None:
    target = running.data_dir.parent / "live.tar.gz"
    done = kumiho_ce("backup", str(target), env=cli_env(running.data_dir))
    assert done.returncode == 0, done.stderr
    assert f"backup written to {target}" in done.stdout
    manifest = archive.verify(target)
    assert manifest.reason == "manual" and manifest.counts["items"] == 1
    assert httpx.get(running.base_url + "/api/v1/backups", timeout=30).json()["count"] == 0  # downloaded, removed
    jobs = httpx.get(running.base_url + "/api/v1/jobs?kind=backup", timeout=30).json()["jobs"]
    assert jobs and jobs[0]["state"] == "done"  # it ran as a job of the appliance, which kept serving
    assert httpx.get(running.base_url + "/api/_live", timeout=30).status_code == 200


def test_backup_refuses_to_overwrite_a_file(running: Running) -> None:
    target = running.data_dir.parent / "exists.tar.gz"
    target.write_text("mine")
    done = kumiho_ce("backup", str(target), env=cli_env(running.data_dir))
    assert done.returncode == 2 and "exists; choose another name" in done.stderr
    assert target.read_text() == "mine"


def test_restore_is_refused_while_the_appliance_runs_with_the_command_to_run(running: Running) -> None:
    target = running.data_dir.parent / "for-restore.tar.gz"
    assert kumiho_ce("backup", str(target), env=cli_env(running.data_dir)).returncode == 0
    done = kumiho_ce("restore", "--yes", str(target), env=cli_env(running.data_dir))
    assert done.returncode == 2
    assert "stop the appliance (pid" in done.stderr
    assert f"then run `kumiho-ce restore {target}`" in done.stderr
    assert not list(running.data_dir.glob("pre-restore-*"))
    assert httpx.get(running.base_url + "/api/_live", timeout=30).status_code == 200


def test_backup_without_a_running_appliance_and_snapshots_list(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serve_in_process(data, None) as app:
        store(app.services, "offlinex")
    target = tmp_path / "out"
    target.mkdir()
    done = kumiho_ce("backup", str(target), env=cli_env(data))  # a directory: the archive keeps its name there
    assert done.returncode == 0, done.stderr
    written = list(target.glob("kumiho-ce-*-manual.tar.gz"))
    assert len(written) == 1 and archive.verify(written[0]).counts["items"] == 1
    assert DataDir(data).holder_pid() is None  # the command released the data directory

    listed = kumiho_ce("snapshots", "list", "--json", env=cli_env(data))
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["backups"] == []  # the CLI's backup is FILE; none stays in the data dir
    shutil.copyfile(written[0], data / "backups" / written[0].name)
    listed = kumiho_ce("snapshots", "list", env=cli_env(data))
    assert written[0].name in listed.stdout and "manual" in listed.stdout


@pytest.fixture
def app(tmp_path: Path) -> Iterator[InProcess]:
    with serve_in_process(tmp_path / "data", None) as running_app:
        store(running_app.services, "apix")
        yield running_app


def test_the_routes_list_download_delete_and_refuse_restore(app: InProcess, tmp_path: Path) -> None:
    name = backup_now(app)["result"]["name"]
    listing = httpx.get(app.base_url + "/api/v1/backups", timeout=30).json()
    assert listing["count"] == 1
    entry = listing["backups"][0]
    assert entry["name"] == name and entry["reason"] == "manual" and entry["counts"]["items"] == 1
    assert entry["schema_version"] >= 1 and entry["size"] > 0 and entry["created_at"]

    download = httpx.get(f"{app.base_url}/api/v1/backups/{name}", timeout=30)
    assert download.status_code == 200 and download.headers["content-type"] == "application/octet-stream"
    (tmp_path / "dl.tar.gz").write_bytes(download.content)
    assert archive.verify(tmp_path / "dl.tar.gz").counts["items"] == 1

    refused = httpx.post(f"{app.base_url}/api/v1/backups/{name}/restore", timeout=30)
    assert refused.status_code == 409
    body = refused.json()
    assert body["command"].endswith(f"restore {app.services.backups.directory / name}")
    assert "stop the appliance, then run" in body["detail"]

    assert httpx.delete(f"{app.base_url}/api/v1/backups/{name}", timeout=30).json()["name"] == name
    assert httpx.get(app.base_url + "/api/v1/backups", timeout=30).json()["count"] == 0


@pytest.mark.parametrize("name", ["nope.tar.gz", "..%2F..%2Ftoken", "%2Fetc%2Fpasswd", "graph", "x" * 257])
def test_a_name_not_in_the_listing_reaches_no_file(app: InProcess, name: str) -> None:
    (app.services.data_dir.root / "backups").mkdir(exist_ok=True)
    for method in ("GET", "DELETE"):
        answer = httpx.request(method, f"{app.base_url}/api/v1/backups/{name}", timeout=30)
        assert answer.status_code in (400, 404), (method, answer.text)
        assert answer.headers["content-type"].startswith("application/problem+json")
    assert (app.services.data_dir.root / "graph" / "graph.kuzu").exists()


def test_a_backup_asked_for_while_another_clients_runs_gets_its_own_job_and_file(tmp_path: Path) -> None:
    """`kumiho-ce backup` deletes the file of the job its POST answered: that job must be its own, never a
    backup another client asked for and will download."""
    with serve_in_process(tmp_path / "data", None) as app:
        store(app.services, "ownx")
        one_at_a_time = app.services.backups._one_at_a_time  # held: the first backup is still being written
        one_at_a_time.acquire()
        try:
            theirs = httpx.post(app.base_url + "/api/v1/backups", timeout=30).json()
            while app.get(f"/api/v1/jobs/{theirs['job_id']}")["state"] == "queued":
                time.sleep(0.05)
            mine = httpx.post(app.base_url + "/api/v1/backups", timeout=30).json()
        finally:
            one_at_a_time.release()
        assert mine["job_id"] != theirs["job_id"] and mine["kind"] == "backup"
        names = {wait_job(app, job["job_id"])["result"]["name"] for job in (theirs, mine)}
        assert len(names) == 2  # two files: deleting mine leaves theirs
        mine_name = wait_job(app, mine["job_id"])["result"]["name"]
        assert httpx.delete(f"{app.base_url}/api/v1/backups/{mine_name}", timeout=30).status_code == 200
        left = [entry["name"] for entry in httpx.get(app.base_url + "/api/v1/backups", timeout=30).json()["backups"]]
        assert left == list(names - {mine_name})
