"""``GET /metrics``: Prometheus' text format (read with its own parser), counters that move when tools are called
over real MCP (the official client), label values bounded to route templates and served tool names, the store
sizes and index lag as the stores hold them, and the same door and token as every other route."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp.client.session import ClientSession
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.parser import text_string_to_metric_families

from appliance.core.ports import ModelTimeout
from appliance.inference.chat import ScriptedModel
from tests.inprocess import InProcess, serve_in_process
from tests.mcp_api.clients import call, in_http_session

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(base_url: str, headers: dict[str, str] | None = None) -> Samples:
    answer = httpx.get(base_url + "/metrics", headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == CONTENT_TYPE_PLAIN_0_0_4
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value
            for family in text_string_to_metric_families(answer.text) for sample in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def labelled(samples: Samples, name: str) -> list[dict[str, str]]:
    return [dict(labels) for sample, labels in samples if sample == name]


@pytest.fixture
def app(tmp_path: Path) -> Iterator[InProcess]:
    with serve_in_process(tmp_path / "data", None, inference={"chat_model": "none"}) as running:
        yield running


def test_tool_calls_over_mcp_move_the_counters_by_tool_and_outcome(app: InProcess) -> None:
    async def steps(session: ClientSession) -> list[Any]:
        stored = await call(session, "kumiho_memory_store", title="Zeppelins", user_text="they float")
        engaged = await call(session, "kumiho_memory_engage", query="zeppelins")
        refused = await session.call_tool("kumiho_memory_store", {})  # no title: refused before anything runs
        unknown = await session.call_tool("no_such_tool_" + "x" * 40, {})
        return [stored, engaged, refused.is_error, unknown.is_error]

    stored, engaged, refused, unknown = in_http_session(app.base_url, steps)
    assert stored["stored"] and "error" not in engaged and refused and unknown
    samples = scrape(app.base_url)

    tool_calls = "kumiho_mcp_tool_calls_total"
    assert value(samples, tool_calls, tool="kumiho_memory_store", outcome="ok") == 1
    assert value(samples, tool_calls, tool="kumiho_memory_store", outcome="error") == 1
    assert value(samples, tool_calls, tool="kumiho_memory_engage", outcome="ok") == 1
    assert value(samples, "kumiho_mcp_tool_errors_total", tool="kumiho_memory_store", code="invalid_argument") == 1
    # a name the appliance does not serve is not a label value (clients cannot grow the series)
    assert value(samples, "kumiho_mcp_tool_errors_total", tool="unknown", code="not_found") == 1
    assert {labels["tool"] for labels in labelled(samples, tool_calls)} == {
        "kumiho_memory_store", "kumiho_memory_engage", "unknown"}
    assert value(samples, "kumiho_mcp_tool_duration_seconds_count", tool="kumiho_memory_store") == 2
    assert value(samples, "kumiho_mcp_tool_duration_seconds_bucket", tool="kumiho_memory_store", le="+Inf") == 2
    # every MCP message was one POST to the /mcp route
    assert value(samples, "kumiho_http_requests_total", method="POST", route="/mcp", status="200") >= 4
    # the embedder embedded the stored memory and the query
    assert value(samples, "kumiho_model_calls_total", kind="embedding", outcome="ok") >= 2
    assert value(samples, "kumiho_model_embedded_texts_total") >= 2

    again = in_http_session(app.base_url, lambda session: call(session, "kumiho_memory_engage", query="floating"))
    assert "error" not in again
    after = scrape(app.base_url)
    assert value(after, tool_calls, tool="kumiho_memory_engage", outcome="ok") == 2


def test_routes_are_labelled_by_their_template_never_by_the_path_sent(app: InProcess) -> None:
    assert httpx.get(app.base_url + "/api/v1/jobs/nope-123", timeout=30).status_code == 404
    assert httpx.get(app.base_url + "/api/no-such-route/abc-456", timeout=30).status_code == 404
    assert httpx.get(app.base_url + "/api/_ready", headers={"host": "evil.example"}, timeout=30).status_code == 421
    samples = scrape(app.base_url)
    routes = labelled(samples, "kumiho_http_requests_total")
    assert not [labels for labels in routes if "nope" in labels["route"] or "abc-456" in labels["route"]]
    job_routes = [labels for labels in routes if labels["route"].startswith("/api/v1/jobs/{job_id")]
    assert [labels["status"] for labels in job_routes] == ["404"]
    assert value(samples, "kumiho_http_requests_total", method="GET", route="unmatched", status="404") == 1
    assert value(samples, "kumiho_http_requests_total", method="GET", route="unmatched", status="421") == 1


def test_store_sizes_index_lag_model_calls_and_jobs_are_what_the_appliance_holds(tmp_path: Path) -> None:
    model = ScriptedModel(["an answer", ModelTimeout("too slow")])  # then any call fails: out of answers
    with serve_in_process(tmp_path / "data", model) as app:
        _holds(app, model)


def _holds(app: InProcess, model: ScriptedModel) -> None:
    services = app.services
    assert services.model.complete_text([{"role": "user", "content": "hi"}]) == "an answer"
    with pytest.raises(ModelTimeout):
        services.model.complete_text([{"role": "user", "content": "again"}])
    with services.index_worker.paused():  # written, not indexed: the lag shows
        stored = in_http_session(app.base_url, lambda session: call(session, "kumiho_memory_store", title="Lag",
                                                                    user_text="waits for the index"))
        assert stored["stored"]
        samples = scrape(app.base_url)
        assert value(samples, "kumiho_index_pending_revisions") == services.graph.count_unindexed() >= 1
    sizes = services.graph.sizes()
    assert value(samples, "kumiho_store_items") == sizes["items"] >= 1
    assert value(samples, "kumiho_store_revisions") == sizes["revisions"] >= 1
    assert value(samples, "kumiho_index_rows") == services.index.count()
    # the calls the model received (a tool's own call, if any, ran out of answers: an error)
    chat_ok = value(samples, "kumiho_model_calls_total", kind="chat", outcome="ok")
    chat_failed = value(samples, "kumiho_model_calls_total", kind="chat", outcome="error")
    assert chat_ok == 1 and chat_failed >= 1 and chat_ok + chat_failed <= len(model.calls)
    assert value(samples, "kumiho_model_chat_duration_seconds_count") == chat_ok + chat_failed
    lanes = {(labels["lane"], labels["state"]) for labels in labelled(samples, "kumiho_jobs")}
    assert lanes == {(lane, state) for lane in ("interactive", "background") for state in ("queued", "running")}
    assert value(samples, "kumiho_build_info", version=__import__("appliance").__version__) == 1
    assert services.index_worker.wait_idle(30)
    assert value(scrape(app.base_url), "kumiho_index_pending_revisions") == 0


def test_two_appliances_in_one_process_count_apart(app: InProcess, tmp_path: Path) -> None:
    with serve_in_process(tmp_path / "other", None, inference={"chat_model": "none"}) as other:
        in_http_session(other.base_url, lambda session: call(session, "kumiho_memory_engage", query="x"))
        assert value(scrape(other.base_url), "kumiho_mcp_tool_calls_total", tool="kumiho_memory_engage",
                     outcome="ok") == 1
        assert value(scrape(app.base_url), "kumiho_mcp_tool_calls_total", tool="kumiho_memory_engage",
                     outcome="ok") == 0


def test_metrics_pass_the_same_door_and_token_as_the_api(tmp_path: Path) -> None:
    with serve_in_process(tmp_path / "data", None, inference={"chat_model": "none"}, require_token=True) as app:
        token = app.services.token
        assert httpx.get(app.base_url + "/metrics", timeout=30).status_code == 401
        assert httpx.get(app.base_url + "/metrics", headers={"authorization": "Bearer wrong-" + "x" * 40},
                         timeout=30).status_code == 401
        assert httpx.get(app.base_url + "/metrics", headers={"authorization": f"Bearer {token}",
                                                             "host": "evil.example"}, timeout=30).status_code == 421
        samples = scrape(app.base_url, {"authorization": f"Bearer {token}"})
        assert value(samples, "kumiho_http_requests_total", method="GET", route="unmatched", status="401") == 2
