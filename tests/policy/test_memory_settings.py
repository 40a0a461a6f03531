"""``[memory]`` keys whose effect had no test through the appliance: half_life_days reaching recall, a zero
audit_retention_days scheduling no prune, and the keys that are Revka's refused with a message that says so."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from appliance.config import load_settings
from appliance.errors import ConfigError
from tests.inprocess import InProcess, serve_in_process
from tests.mcp_api.clients import call, in_http_session


def mcp(app: InProcess, tool: str, **arguments: Any) -> dict[str, Any]:
    return in_http_session(app.base_url, lambda s: call(s, tool, **arguments))  # type: ignore[no-any-return]


def test_half_life_days_decays_every_recall(tmp_path: Path) -> None:
    """Two like memories, one stored ten days ago: with a one-day half-life the old one keeps 2^-10 of its score
    (with the default seven days it would keep 37%)."""
    with serve_in_process(tmp_path / "data", None, memory={"half_life_days": 1.0}) as app:
        graph = app.services.graph
        fresh_clock = graph._clock
        graph._clock = lambda: datetime.now(UTC) - timedelta(days=10)  # the store's clock stamps the revision
        try:
            old = mcp(app, "kumiho_memory_store", title="Basil watering", memory_type="conversation",
                      user_text="The basil on the balcony is watered every morning.", space_path="garden/old",
                      stack_revisions=False)
        finally:
            graph._clock = fresh_clock
        new = mcp(app, "kumiho_memory_store", title="Basil watering", memory_type="conversation",
                  user_text="The basil on the balcony is watered every morning.", space_path="garden/new",
                  stack_revisions=False)
        found = mcp(app, "kumiho_memory_engage", query="basil balcony watering", min_score=0.0, limit=10)
    scores = {r["kref"].split("?")[0]: r["score"] for r in found["results"]}
    old_item, new_item = old["revision_kref"].split("?")[0], new["revision_kref"].split("?")[0]
    assert new_item in scores, found
    assert scores.get(old_item, 0.0) < 0.01 * scores[new_item], scores


def test_a_retention_of_zero_days_schedules_no_prune(tmp_path: Path) -> None:
    with serve_in_process(tmp_path / "data", None, memory={"audit_enabled": True, "audit_retention_days": 0}) as app:
        assert [job for job in app.services.maintenance.tick() if job.kind == "audit_prune"] == []
        assert app.get("/api/v1/audit")["retention_days"] == 0


@pytest.mark.parametrize("key", ["backend", "auto_save"])
def test_revkas_own_keys_are_refused_naming_revkas_config(tmp_path: Path, key: str) -> None:
    config = tmp_path / "config.toml"
    config.write_text(f"[memory]\n{key} = {'true' if key == 'auto_save' else chr(34) + 'kumiho' + chr(34)}\n")
    with pytest.raises(ConfigError) as refused:
        load_settings(config)
    message = str(refused.value)
    assert f"'memory.{key}'" in message and "Revka's config.toml" in message and "unknown setting" not in message
    assert str(config) in message and f"KUMIHO_CE_MEMORY__{key.upper()}" in message
