"""Who is calling, at the doors of a real ``kumiho-ce serve`` process: the stdio shim names the agent host (its
initialize ``clientInfo``), the console's routes are the door ``console``, and a read-only namespace refuses the
shim's writes like any other MCP client's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import httpx

from tests.appliance_process import serve
from tests.mcp_api.clients import call, stdio_session

SETTINGS = {"KUMIHO_CE_MEMORY__AUDIT_ENABLED": "true",
            "KUMIHO_CE_MEMORY__POLICY__READ_ONLY_NAMESPACES": json.dumps(["vault"])}


def test_stdio_and_console_callers_are_named_and_the_shim_is_refused_too(tmp_path: Path) -> None:
    with serve(tmp_path / "data", **SETTINGS) as app:
        port = int(app.base_url.rsplit(":", 1)[1])

        async def steps() -> tuple[dict[str, Any], dict[str, Any]]:
            async with stdio_session(app.data_dir, port) as session:
                stored = await call(session, "kumiho_memory_store", title="Open", user_text="an open memory",
                                    space_path="Memory/open")
                refused = await call(session, "kumiho_memory_store", title="Vault", user_text="a vault memory",
                                     space_path="Memory/vault")
                return stored, refused

        stored, refused = anyio.run(steps)
        assert refused["error"]["code"] == "permission_denied" and "'vault'" in refused["error"]["message"]
        with httpx.Client(base_url=app.base_url, timeout=30) as http:
            deprecated = http.post("/api/v1/deprecate", json={"kref": stored["item_kref"], "reason": "test"},
                                   headers={"User-Agent": "console-test/1"})
            assert deprecated.status_code == 200, deprecated.text
            rows = http.get("/api/v1/audit").json()["entries"]
    mcp = [row for row in rows if row["door"] == "mcp"]
    assert [(row["operation"], row["client"].endswith("(stdio)")) for row in mcp] == [("kumiho_memory_store", True)]
    console = [row for row in rows if row["door"] == "console"]  # the route runs its operations: one row each
    assert console and {row["client"] for row in console} == {"console-test/1"}
    assert "item.deprecated" in {c["routing_key"] for row in console for c in row["changes"]}
    assert not any("/Memory/vault" in c["kref"] for row in rows for c in row["changes"])
