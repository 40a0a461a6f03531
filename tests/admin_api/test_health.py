"""GET /api/_health as Revka's ``revka doctor`` reads it (src/doctor/mod.rs, check_kumiho_backend: for each of
``neo4j``, ``event_stream`` and ``embedding`` it takes ``.status`` and treats anything but "ok", case-insensitive,
as a warning; src/sidecars/local_ce.rs probe_health parses the JSON whatever the HTTP status), over real HTTP on
real stores. A broken part is broken for real: a stopped index sync, a closed graph store, a stopped event feed,
an embedder that fails."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

from tests.inprocess import InProcess, serve_in_process
from tests.mcp_api.clients import call, in_http_session

REVKA_KEYS = ("neo4j", "event_stream", "embedding")


@pytest.fixture
def app(tmp_path: Path) -> Iterator[InProcess]:
    with serve_in_process(tmp_path / "data", None) as running:
        yield running


def health(app: InProcess) -> dict[str, Any]:
    answer = httpx.get(app.base_url + "/api/_health", timeout=30)
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/json")
    return answer.json()  # type: ignore[no-any-return]


def revka_reads(body: dict[str, Any]) -> dict[str, str]:
    """What revka doctor takes from the answer: each component's status, "unknown" when absent."""
    return {key: str((body.get(key) or {}).get("status", "unknown")).lower() for key in REVKA_KEYS}


def test_a_healthy_appliance_reports_every_part_ok(app: InProcess) -> None:
    body = health(app)
    assert revka_reads(body) == {key: "ok" for key in REVKA_KEYS}
    assert body["status"] == "ok" and body["deployment_mode"] == "self_hosted_ce" and body["version"]
    assert body["neo4j"]["backend"] == "kuzu" and body["search_index"]["status"] == "ok"
    assert body["embedding"]["model"] == "hashing-384" and body["embedding"]["dim"] == 384
    stream = body["event_stream"]
    assert stream["max_subscribers"] == 32 and stream["subscribers"] == 0
    assert stream["last_event_id"] == app.services.graph.last_event_seq()
    assert all(body[key]["detail"] is None for key in (*REVKA_KEYS, "search_index"))


def test_a_stopped_index_sync_is_reported(app: InProcess) -> None:
    app.services.index_worker.stop()
    body = health(app)
    assert body["status"] == "degraded"
    assert body["search_index"]["status"] == "error" and "index sync is stopped" in body["search_index"]["detail"]
    assert revka_reads(body) == {key: "ok" for key in REVKA_KEYS}  # the other parts still work


def test_a_closed_graph_store_is_reported_without_internal_text(app: InProcess) -> None:
    app.services.graph.close()
    body = health(app)
    assert revka_reads(body)["neo4j"] == "error" and body["status"] == "degraded"
    detail = body["neo4j"]["detail"]
    assert detail == "the graph store does not answer reads; see the appliance log", detail


def test_a_stopped_event_feed_is_reported_and_refuses_streams(app: InProcess) -> None:
    app.services.feed.close()
    body = health(app)
    assert revka_reads(body)["event_stream"] == "error" and "stopped" in body["event_stream"]["detail"]
    refused = httpx.get(app.base_url + "/api/v1/events", timeout=10)
    assert refused.status_code == 503 and refused.json()["code"] == "unavailable"


class FailingEmbedder:
    """An embedder whose model cannot run (the Embedder port; the stores stay real)."""

    model_id, dim = "broken-model", 384

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        raise RuntimeError("onnxruntime: /secret/path/model.onnx failed to load")


def test_an_embedder_that_fails_is_reported_without_internal_text(tmp_path: Path) -> None:
    with serve_in_process(tmp_path / "data", None) as app:
        working = app.services.search.embedder
        app.services.search.embedder = FailingEmbedder()  # before the first check: nothing is cached yet
        try:
            body = health(app)
        finally:
            app.services.search.embedder = working
    assert revka_reads(body)["embedding"] == "error" and body["status"] == "degraded"
    assert body["embedding"]["model"] == "broken-model"
    assert "secret" not in body["embedding"]["detail"] and "onnxruntime" not in body["embedding"]["detail"]
    assert revka_reads(body)["neo4j"] == "ok"


def test_a_failed_index_sync_is_reported_without_its_error_text(app: InProcess) -> None:
    """The index sync's embedder fails for real while it indexes a new memory: readiness, the console's stats
    and health say that the last round failed and when, never the error's own text (it is in the log)."""
    sync = app.services.index_worker.sync
    working = sync.embedder
    sync.embedder = FailingEmbedder()  # the search path keeps its own (working) embedder
    try:
        in_http_session(app.base_url, lambda s: call(s, "kumiho_memory_store", title="Unindexed",
                                                     user_text="This memory waits for the index.",
                                                     space_path="facts"))
        deadline = time.monotonic() + 30  # bounds the test: the round runs soon after the commit
        while app.services.index_worker.last_error is None:
            assert time.monotonic() < deadline, "the index sync round did not fail"
            time.sleep(0.05)
        ready = app.get("/api/_ready")["search"]
        stats = app.get("/api/v1/stats")["index"]
        body = health(app)
    finally:
        sync.embedder = working
    assert "/secret/path" in (app.services.index_worker.last_error or "")  # the log's detail, kept server-side
    for note in (ready["sync_error"], stats["sync_error"]):
        assert note.startswith("the last index sync failed at 20") and note.endswith("(see the appliance log)"), note
        assert "secret" not in note and "onnxruntime" not in note, note
    assert ready["pending"] == 1
    assert body["search_index"]["status"] == "degraded" and "secret" not in body["search_index"]["detail"]
