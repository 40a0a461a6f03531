"""The whole story an operator lives through, compared record by record through the export: export the memory,
back it up while MCP clients keep writing over HTTP, wipe the stores, restore the backup with the CLI, export
again. The second export holds the first, every write acknowledged before the backup began, and nothing that
no one wrote; the restored appliance recalls what it holds."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

from appliance.backup import archive
from tests.appliance_process import cli_env, kumiho_ce
from tests.backup.helpers import backup_now
from tests.inprocess import serve_in_process
from tests.mcp_api.clients import call, http_session, in_http_session
from tests.portability.test_roundtrip import comparable, export, upload

WRITERS = 2


class Acknowledged:
    """Every MCP write the test made: (when its answer arrived, marker, item kref), across threads."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.writes: list[tuple[float, str, str]] = []

    def add(self, marker: str, kref: str) -> None:
        with self.lock:
            self.writes.append((time.monotonic(), marker, kref))

    def count(self) -> int:
        with self.lock:
            return len(self.writes)

    def before(self, moment: float) -> list[tuple[str, str]]:
        with self.lock:
            return [(marker, kref) for at, marker, kref in self.writes if at < moment]

    def krefs(self) -> set[str]:
        with self.lock:
            return {kref for _, _, kref in self.writes}


async def _store(session: Any, marker: str) -> str:
    answer = await call(session, "kumiho_memory_store", user_text=f"The kiwi {marker} was fed at noon",
                        title=f"kiwi {marker}", space_path="aviary")
    assert answer.get("stored"), answer
    return str(answer["item_kref"])


def _writer(base_url: str, worker: int, done: Acknowledged, stop: threading.Event,
            failures: list[BaseException]) -> None:
    """One MCP client (the official SDK over streamable HTTP) storing memories until told to stop."""
    async def main() -> None:
        async with http_session(base_url) as session:
            n = 0
            while not stop.is_set():
                marker = f"w{worker}n{n}q"
                done.add(marker, await _store(session, marker))
                n += 1

    try:
        anyio.run(main)
    except BaseException as exc:  # reported by the test's assertion
        failures.append(exc)


def _body(text: str) -> list[str]:
    """The export's records without the header and the end line."""
    return text.splitlines()[1:-1]


def _named(lines: set[str] | list[str]) -> list[str]:
    """A few records, by type and kref (a failure message, not the whole records)."""
    return [f"{r['type']} {r.get('kref')}" for r in (json.loads(line) for line in sorted(lines)[:10])]


def _belongs_to(line: str, written: set[str]) -> bool:
    """Whether a record describes one of the written items: the item, its revisions, artifacts, edges, events."""
    def refers(value: object) -> bool:
        return isinstance(value, str) and any(value == kref or value.startswith(kref + "?") for kref in written)
    return any(refers(value) for value in json.loads(line).values())


def test_backup_under_mcp_writes_then_wipe_and_restore_gives_the_export_plus_the_acknowledged_writes(
        tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = Acknowledged()
    stop = threading.Event()
    failures: list[BaseException] = []
    with serve_in_process(data, None) as app:
        async def seed(session: Any) -> None:
            for n in range(3):
                done.add(f"seed{n}q", await _store(session, f"seed{n}q"))
        in_http_session(app.base_url, seed)
        entry = httpx.post(app.base_url + "/api/v1/memories", json={
            "key": "feeding_rota", "content": "The kiwis are fed at noon", "category": "core"}, timeout=30)
        assert entry.status_code == 201, entry.text
        before_all = export(app)
        writers = [threading.Thread(target=_writer, args=(app.base_url, w, done, stop, failures))
                   for w in range(WRITERS)]
        for thread in writers:
            thread.start()
        try:
            while done.count() < 3 + 20 and not failures:
                time.sleep(0.01)
            began = time.monotonic()
            job = backup_now(app)
            at_end = done.count()
            while done.count() < at_end + 2 * WRITERS and not failures:  # writes go on after the backup
                time.sleep(0.01)
        finally:
            stop.set()
            for thread in writers:
                thread.join(60)
        assert not failures, failures
        saved = tmp_path / "saved.tar.gz"
        shutil.copyfile(app.services.backups.path_of(job["result"]["name"]), saved)
    archive.verify(saved)
    for part in archive.PARTS:  # the stores wiped; the token and the configuration stay
        shutil.rmtree(data / part)

    restored = kumiho_ce("restore", "--yes", str(saved), env=cli_env(data))
    assert restored.returncode == 0, restored.stderr

    acknowledged_before = done.before(began)
    assert len(acknowledged_before) >= 3 + 20
    written = done.krefs()
    with serve_in_process(data, None) as app:
        after = export(app)
        first, second = comparable(before_all, data), comparable(after, data)
        assert first[0] == second[0]  # the header, without the time of the export
        first_records, second_records = set(_body("\n".join(first))), set(_body("\n".join(second)))
        lost = first_records - second_records
        assert not lost, f"records of the export before the backup missing after the restore: {_named(lost)}"
        items = {json.loads(line)["kref"] for line in second_records if json.loads(line)["type"] == "item"}
        missing = [marker for marker, kref in acknowledged_before if kref not in items]
        assert not missing, f"acknowledged before the backup began, yet not in the restored export: {missing}"
        unknown = [line for line in second_records - first_records if not _belongs_to(line, written)]
        assert not unknown, f"records after the restore that no write of the test made: {_named(unknown)}"
        assert done.writes[-1][2] not in items, "a write acknowledged after the backup ended is in it"

        again = upload(app, before_all)  # the export made before the backup is all held by the restored store
        assert again["state"] == "done" and again["result"]["new"] == {}, again
        assert again["result"]["unchanged"] == again["result"]["records"], again["result"]

        assert app.services.index_worker.wait_idle(60)
        marker, kref = acknowledged_before[-1]

        async def recall(session: Any) -> dict[str, Any]:
            return await call(session, "kumiho_memory_recall", query=f"kiwi {marker}", limit=5)
        answer = in_http_session(app.base_url, recall)
        assert kref in json.dumps(answer), answer
