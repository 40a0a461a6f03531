"""A damaged search index, through real ``kumiho-ce`` processes: start-up, a running appliance, ``reindex`` and
``doctor`` find it, move it aside (never delete it) and rebuild it from the graph; no memory is lost and no
answer is a 500 or a traceback."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.appliance_process import Running, cli_env, kumiho_ce, serve
from tests.mcp_api.clients import call, in_http_session
from tests.problems import problem
from tests.search.damage import delete_a_data_file, delete_every_data_file, truncate_latest_manifest

MEMORIES = {  # title → text; each found by a query on its own words
    "Staging database": "Staging runs Postgres 16 on host db-stage.",
    "Favourite tea": "Alex drinks oolong tea every afternoon.",
    "Backup schedule": "The nightly backup of the wiki starts at two in the morning.",
}
INTERNAL = ("lance error", "Traceback", ".rs:", "RuntimeError", "internal")


def mcp(app: Running, steps: Callable[[Any], Any]) -> Any:
    return in_http_session(app.base_url, steps)


def store(app: Running, memories: dict[str, str]) -> dict[str, str]:
    """title → item kref."""
    async def steps(session: Any) -> dict[str, str]:
        stored = {}
        for title, text in memories.items():
            result = await call(session, "kumiho_memory_store", title=title, user_text=text, space_path="facts")
            stored[title] = result["item_kref"]
        return stored

    return mcp(app, steps)  # type: ignore[no-any-return]


def ready(app: Running) -> dict[str, Any]:
    response = httpx.get(app.base_url + "/api/_ready", timeout=10)
    assert response.status_code == 200, response.text
    return response.json()["search"]  # type: ignore[no-any-return]


def wait_indexed(app: Running, rows: int, timeout: float = 90) -> dict[str, Any]:
    """Until the index holds ``rows`` rows, nothing is pending and no rebuild is running."""
    deadline = time.monotonic() + timeout
    while True:
        search = ready(app)
        if search.get("state", "ok") == "ok" and search["pending"] == 0 and search["rows"] == rows:
            return search
        assert time.monotonic() < deadline, f"the index did not settle within {timeout}s: {search}"
        time.sleep(0.2)


def search(app: Running, query: str) -> httpx.Response:
    return httpx.get(app.base_url + "/api/v1/search", params={"q": query, "mode": "text"}, timeout=30)


def found_items(app: Running, query: str) -> set[str]:
    response = search(app, query)
    assert response.status_code == 200, response.text
    return {hit["revision_kref"].split("?")[0] for hit in response.json()["results"]}


def assert_every_memory_found(app: Running, stored: dict[str, str]) -> None:
    for title, item in stored.items():
        assert item in found_items(app, MEMORIES[title]), title


def damaged_copies(data_dir: Path) -> list[Path]:
    return sorted(data_dir.glob("index.damaged-*"))


def filled_data_dir(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A stopped appliance's data directory holding MEMORIES, indexed (several table versions)."""
    data = tmp_path / "data"
    with serve(data) as app:
        stored = store(app, MEMORIES)
        wait_indexed(app, rows=len(MEMORIES))
        assert app.stop() == 0
    return data, stored


@pytest.mark.parametrize("damage", [truncate_latest_manifest, delete_a_data_file])
def test_start_moves_a_damaged_index_aside_and_rebuilds_it_from_the_graph(
        tmp_path: Path, damage: Callable[[Path], None]) -> None:
    data, stored = filled_data_dir(tmp_path)
    damage(data)
    with serve(data) as app:
        wait_indexed(app, rows=len(MEMORIES))
        assert_every_memory_found(app, stored)
        more = store(app, {"Parking": "Visitors park on level two of the east garage."})  # writes go on
        wait_indexed(app, rows=len(MEMORIES) + 1)
        assert more["Parking"] in found_items(app, "visitors park east garage")
    copies = damaged_copies(data)
    assert len(copies) == 1 and (copies[0] / "revisions.lance").is_dir()  # kept for the operator
    log = (tmp_path / "data.log").read_text()
    assert "the search index was damaged" in log and str(copies[0]) in log


def test_a_data_file_deleted_under_a_running_appliance_is_repaired_without_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with serve(data) as app:
        stored = store(app, MEMORIES)
        wait_indexed(app, rows=len(MEMORIES))
        delete_every_data_file(data)
        # an index write that must read the table: the deprecation of a stored memory
        mcp(app, lambda s: call(s, "kumiho_deprecate_item", item_kref=stored["Favourite tea"]))
        added = store(app, {"Parking": "Visitors park on level two of the east garage."})
        answers: list[httpx.Response] = []
        deadline = time.monotonic() + 60
        while True:
            answers.append(search(app, "oolong tea afternoon"))
            settled = ready(app)
            if answers[-1].status_code == 200 and settled.get("state", "ok") == "ok" and settled["pending"] == 0 \
                    and stored["Favourite tea"] not in found_items(app, "oolong tea afternoon"):
                break
            assert time.monotonic() < deadline, f"not repaired within 60 s: {settled}"
            time.sleep(0.2)
        for answer in answers:  # while it was damaged: answers from the rows there, or a clean "try again"
            assert answer.status_code in (200, 503), answer.text
            assert not any(word in answer.text for word in INTERNAL), answer.text
            if answer.status_code == 503:
                assert "try again shortly" in problem(answer)["message"]
        assert added["Parking"] in found_items(app, "visitors park east garage")  # the new write is there
        assert_every_memory_found(app, {t: k for t, k in stored.items() if t != "Favourite tea"})
    assert len(damaged_copies(data)) == 1


def test_doctor_reports_a_damaged_index_and_reindex_rebuilds_it(tmp_path: Path) -> None:
    data, stored = filled_data_dir(tmp_path)
    truncate_latest_manifest(data)
    env = cli_env(data)

    doctor = kumiho_ce("doctor", "--json", env=env)
    index = next(c for c in json.loads(doctor.stdout) if c["name"] == "index")
    assert index["status"] == "warn" and "damaged" in index["detail"] and "kumiho-ce reindex" in index["fix"]

    reindex = kumiho_ce("reindex", env=env)
    assert reindex.returncode == 0, reindex.stderr
    assert "Traceback" not in reindex.stderr and "moved it aside" in reindex.stderr
    assert f"the index holds {len(MEMORIES)} rows" in reindex.stdout
    assert len(damaged_copies(data)) == 1

    doctor = kumiho_ce("doctor", "--json", env=env)
    index = next(c for c in json.loads(doctor.stdout) if c["name"] == "index")
    assert index["status"] == "ok" and "index.damaged-" in index["detail"]  # the copy is pointed out
    with serve(data) as app:
        wait_indexed(app, rows=len(MEMORIES))
        assert_every_memory_found(app, stored)
