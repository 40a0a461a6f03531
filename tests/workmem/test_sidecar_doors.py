"""The stock sidecar's own buffer class (kumiho-memory's ``RedisMemoryBuffer``, in the SDK's environment) through
both doors of a real appliance, the Redis-protocol listener and the memory-proxy route, and what it buffers seen
and consolidated by the appliance's own MCP tools: one working memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from tests.appliance_process import free_port, serve
from tests.mcp_api.clients import call
from tests.mcp_api.clients import in_http_session as mcp
from tests.workmem.conftest import PROJECT, TOKEN, Appliance, run_sidecar_buffer, sidecar_env

DAY = "20260102"


def door_env(appliance: Appliance, door: str, home: Path, token: str | None = None) -> dict[str, str]:
    if door == "redis":
        url = f"redis://:{token}@127.0.0.1:{appliance.redis_port}" if token else appliance.redis_url
        return sidecar_env(home, KUMIHO_UPSTASH_REDIS_URL=url)
    # the sidecar sends its KUMIHO_FIREBASE_ID_TOKEN as the bearer; a tokenless appliance takes any
    return sidecar_env(home, KUMIHO_MEMORY_PROXY_URL=appliance.proxy_url,
                       KUMIHO_FIREBASE_ID_TOKEN=token or "any-token-the-sidecar-has")


def assert_every_operation(result: dict[str, Any], door: str, kept: str, cleared: str) -> None:
    assert result["door"] == door
    assert [(a["message_count"], a["created_bucket"]) for a in result["add"]] == [(1, True), (2, False), (3, False)]
    last_two = result["read_last_two"]
    assert [m["content"] for m in last_two["messages"]] == ["Noted: espresso, no sugar.", "My api key is [secret]"]
    assert [m["metadata"] for m in last_two["messages"]] == [{"channel": "test", "n": 1}, {"channel": "test", "n": 2}]
    assert last_two["message_count"] == 3 and last_two["session_id"] == kept
    assert [m["content"] for m in result["read_offset"]["messages"]] == ["I take my espresso without sugar."]
    assert result["read_missing"]["messages"] == [] and result["read_missing"]["message_count"] == 0
    assert result["metadata"]["context"] == "personal" and result["metadata"]["user_id"].startswith("user-")
    assert {kept, cleared} <= set(result["listed"]["sessions"])
    assert result["sequence"] == [1, 2]
    assert (result["claim_first"], result["claim_second"]) == (True, False)
    assert result["active"] == kept and result["active_after_wrong_only_if"] == kept
    assert result["active_after_clear"] is None and result["active_after_plain_set"] == cleared
    assert (result["generation_before"], result["generation_bumped"], result["generation_after"]) == (0, [1, 2], 2)
    assert result["clear"] == {"success": True, "cleared_count": 1}
    assert result["cleared_read"]["messages"] == [] and result["cleared_metadata"] == {}
    assert cleared not in result["listed_after_clear"]["sessions"] and kept in result["listed_after_clear"]["sessions"]
    assert "role: give one of user, assistant, system, tool (got 'narrator')" in result["bad_role"]


@pytest.mark.parametrize("door", ["redis", "proxy"])
def test_the_stock_sidecar_buffer_runs_every_operation_through_each_door(
        appliance: Appliance, door: str, tmp_path: Path) -> None:
    kept, cleared = f"personal:user-{door}:{DAY}:001", f"gone-{door}"
    result = run_sidecar_buffer(door_env(appliance, door, tmp_path / "home"), PROJECT, kept, cleared,
                                f"user-{door}", DAY)
    assert_every_operation(result, door, kept, cleared)


@pytest.mark.parametrize("door", ["redis", "proxy"])
def test_what_the_sidecar_buffers_is_the_appliances_working_memory_and_consolidates(
        appliance: Appliance, door: str, tmp_path: Path) -> None:
    kept = f"personal:user-seen-{door}:{DAY}:001"
    run_sidecar_buffer(door_env(appliance, door, tmp_path / "home"), PROJECT, kept, f"gone-seen-{door}",
                       f"user-seen-{door}", DAY)

    async def read_then_consolidate(session: Any) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        buffered = await call(session, "kumiho_chat_get", session_id=kept, limit=10)
        done = await call(session, "kumiho_memory_consolidate", session_id=kept,
                          summary="The user takes espresso without sugar.")
        located = await call(session, "kumiho_resolve_kref", kref=done["store_result"]["revision_kref"])
        return buffered, done, located

    buffered, done, located = mcp(appliance.base_url, read_then_consolidate)
    assert [m["content"] for m in buffered["messages"]] == [
        "I take my espresso without sugar.", "Noted: espresso, no sugar.", "My api key is [secret]"]
    assert done["success"] is True and done["cleared_messages"] == 3
    transcript = Path(located["location"]).read_text(encoding="utf-8")
    assert "I take my espresso without sugar." in transcript and "sk-" not in transcript
    # the sidecar's next read finds the buffer consolidated and empty
    if door == "redis":
        client = redis.Redis.from_url(appliance.redis_url)
        try:
            assert client.llen(f"kumiho:memory:{PROJECT}:sessions:{kept}:messages") == 0
        finally:
            client.close()
    else:
        read = httpx.post(appliance.proxy_url, json={"action": "get_messages", "project": PROJECT,
                                                     "session_id": kept}).json()
        assert read["message_count"] == 0 and read["messages"] == []


def test_with_the_token_required_both_doors_need_the_token_and_work_with_it(tmp_path: Path) -> None:
    port = free_port()
    with serve(tmp_path / "data", KUMIHO_CE_KUMIHO__REDIS_PORT=str(port), KUMIHO_CE_REQUIRE_TOKEN="true",
               KUMIHO_CE_API_TOKEN=TOKEN) as running:
        appliance = Appliance(running, port)
        for password in (None, "not-the-token"):
            client = redis.Redis(host="127.0.0.1", port=port, password=password)
            with pytest.raises(redis.AuthenticationError):
                client.ping()
            client.close()
        for protocol in (2, 3):  # AUTH <token> (RESP2), HELLO 3 AUTH default <token> (RESP3)
            client = redis.Redis(host="127.0.0.1", port=port, password=TOKEN, protocol=protocol)
            assert client.ping() is True
            client.close()
        for door in ("redis", "proxy"):
            kept, cleared = f"personal:user-t{door}:{DAY}:001", f"gone-t{door}"
            result = run_sidecar_buffer(door_env(appliance, door, tmp_path / door, TOKEN), PROJECT, kept, cleared,
                                        f"user-t{door}", DAY)
            assert_every_operation(result, door, kept, cleared)
        refused = httpx.post(appliance.proxy_url, json={"action": "list_sessions", "project": PROJECT},
                             headers={"Authorization": "Bearer any-token-the-sidecar-has"})
        assert refused.status_code == 401
