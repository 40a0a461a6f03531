"""A session the stock sidecar buffers through the Redis listener is one the appliance's idle-session sweep
consolidates: the sidecar's ``RedisMemoryBuffer`` (SDK environment) writes it, the maintenance tick queues its
consolidation, the (scripted) model summarises it, its transcript holds the sidecar's messages, and the
sidecar then finds the buffer empty. Real stores, the appliance in this process."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import redis

from appliance.inference.chat import ScriptedCall, ScriptedModel
from appliance.workmem import redis_server
from tests.appliance_process import free_port
from tests.inprocess import serve_in_process, wait_job
from tests.mcp_api.clients import call
from tests.mcp_api.clients import in_http_session as mcp
from tests.workmem.conftest import PROJECT, run_sidecar_buffer, sidecar_env

SESSION = "personal:user-idle:20260103:001"


def summarise(scripted: ScriptedCall) -> dict[str, Any]:
    return {"type": "summary", "title": "Espresso preference", "summary": "The user takes espresso without sugar.",
            "topics": ["coffee"], "entities": [], "facts": [], "decisions": [], "events": [], "implications": []}


def test_the_idle_sweep_consolidates_a_session_the_sidecar_buffered_over_redis(tmp_path: Path) -> None:
    port = free_port()
    # a session idle for 6 ms is due: the sweep runs when the test ticks it (no timer is waited for)
    with serve_in_process(tmp_path / "data", ScriptedModel([summarise] * 3), kumiho={"redis_port": port},
                          maintenance={"idle_consolidation_minutes": 0.0001, "dream_state_time": ""}) as app:
        listener = redis_server.start(app.services.settings, app.services)
        assert listener is not None and listener.port == port
        try:
            env = sidecar_env(tmp_path / "home", KUMIHO_UPSTASH_REDIS_URL=f"redis://127.0.0.1:{port}")
            run_sidecar_buffer(env, PROJECT, SESSION, "gone-idle", "user-idle", "20260103")
            time.sleep(0.05)  # older than the idle threshold (not an assertion on speed)
            jobs = [j for j in app.services.maintenance.tick() if SESSION in j.description]
            assert len(jobs) == 1
            done = wait_job(app, jobs[0].id)
            assert done["state"] == "done", done
            result = done["result"]
            assert result["success"] is True and result["cleared_messages"] == 3
            located = mcp(app.base_url, lambda s: call(s, "kumiho_resolve_kref",
                                                       kref=result["store_result"]["revision_kref"]))
            transcript = Path(located["location"]).read_text(encoding="utf-8")
            assert "espresso without sugar" in transcript and "sk-" not in transcript
            assert app.services.working.count(PROJECT, SESSION) == 0
            # the sidecar's own listing no longer names it
            client = redis.Redis(host="127.0.0.1", port=port, decode_responses=True)
            try:
                listed = client.scan(0, match=f"kumiho:memory:{PROJECT}:sessions:*:messages", count=100)[1]
            finally:
                client.close()
            assert f"kumiho:memory:{PROJECT}:sessions:{SESSION}:messages" not in listed
        finally:
            redis_server.stop(listener)
