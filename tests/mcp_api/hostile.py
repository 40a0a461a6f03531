"""What the bad-input suites share: raw JSON-RPC calls to a running appliance's /mcp (bytes the official
client would never send), the checks every answer must pass, and a snapshot of every store a rejected call
must leave as it was."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from typing import Any

import httpx

from tests.inprocess import InProcess

# Text that only a leaked exception, traceback or library message would put into an answer.
INTERNAL = ("traceback", "kuzu", "runtimeerror", "valueerror", "typeerror", "keyerror", "recursionerror",
            "unicodeencodeerror", "attributeerror", "site-packages", "appliance/", "lance error", "sqlite",
            "pydantic", 'file "')
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


@dataclass
class Answer:
    status: int
    text: str
    payload: dict[str, Any] | None  # the tool's JSON result (or its {"error": …}); None for a JSON-RPC error

    @property
    def refused(self) -> bool:
        return self.payload is None or "error" in self.payload


class RawMcp:
    """Plain HTTP POSTs of JSON-RPC ``tools/call`` (the server is stateless: no handshake needed)."""

    def __init__(self, base_url: str) -> None:
        self.url = base_url + "/mcp"
        self.http = httpx.Client(timeout=120)
        self.next_id = 0

    def close(self) -> None:
        self.http.close()

    def call(self, tool: str, arguments: Any) -> Answer:
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": "tools/call",
                "params": {"name": tool, "arguments": arguments}}
        return self.post(json.dumps(body, allow_nan=True).encode())  # lone surrogates travel as \ud800 escapes

    def post(self, body: bytes) -> Answer:
        response = self.http.post(self.url, content=body, headers=HEADERS)
        return checked(response.status_code, response.text)


def checked(status: int, text: str) -> Answer:
    """The rules for every answer: no 5xx, no internal error code, no internal text."""
    assert status < 500, (status, text[:500])
    lowered = text.casefold()
    leaked = [word for word in INTERNAL if word in lowered]
    assert not leaked, (leaked, text[:1000])
    if status >= 400 or not text:
        return Answer(status, text, None)
    message = json.loads(text)
    if "error" in message:  # a JSON-RPC error (unparseable request, unknown method, …)
        return Answer(status, text, None)
    result = message["result"]
    payload = json.loads(result["content"][0]["text"])
    assert result.get("isError", False) == ("error" in payload), payload
    if "error" in payload:
        assert payload["error"]["code"] != "internal", payload
        assert len(payload["error"]["message"]) <= 500, payload["error"]["message"][:200]
    return Answer(status, text, payload)


def snapshot(app: InProcess) -> dict[str, Any]:
    """Everything a call could have written: graph counts, index rows, working memory, artifact files."""
    services = app.services
    services.index_worker.wait_idle()
    graph = {k: v for k, v in services.graph.stats().items() if k != "unindexed_revisions"}
    path = services.data_dir.root / "working" / "working.sqlite3"
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        working = {table: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                   for table in ("sessions", "messages", "active_pointers", "sequences", "generations")}
        working["metadata"] = conn.execute("SELECT group_concat(metadata) FROM sessions").fetchone()[0]
    conn.close()
    artifacts = services.data_dir.root / "artifacts"
    files = sorted(str(p) for p in artifacts.rglob("*")) if artifacts.exists() else []
    return {"graph": graph, "index": services.index.count(), "working": working, "files": files}
