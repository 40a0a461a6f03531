"""The appliance's log: JSON lines (or text) with the id of the request that produced each line, the id returned
in ``X-Request-Id`` (a client's own kept only when it is safe to log), and the format ``auto`` chooses."""

from __future__ import annotations

import io
import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from appliance.server import logs
from tests.appliance_process import serve

STORE = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
         "params": {"name": "kumiho_memory_store", "arguments": {"title": "Logged", "user_text": "a note to log"}}}
MCP_HEADERS = {"accept": "application/json, text/event-stream"}


def _lines(log: Path) -> list[dict[str, object]]:
    text = log.read_text()
    assert text.strip(), "the server logged nothing"
    return [json.loads(line) for line in text.splitlines() if line.strip()]  # every line is one JSON object


def test_json_lines_carry_the_id_of_the_request_that_produced_them(tmp_path: Path) -> None:
    with serve(tmp_path / "data", KUMIHO_CE_LOG_FORMAT="json", KUMIHO_CE_LOG_LEVEL="debug") as running:
        searched = httpx.get(running.base_url + "/api/v1/search", params={"q": "zeppelins"},
                             headers={"x-request-id": "search-0001"}, timeout=30)
        stored = httpx.post(running.base_url + "/mcp", json=STORE, headers={**MCP_HEADERS, "x-request-id": "mcp-0002"},
                            timeout=30)
        unknown = httpx.get(running.base_url + "/api/no-such-route", timeout=30)
        assert running.stop() == 0
    assert searched.status_code == 200 and searched.headers["x-request-id"] == "search-0001"
    assert stored.status_code == 200 and stored.headers["x-request-id"] == "mcp-0002"
    assert "error" not in json.loads(stored.json()["result"]["content"][0]["text"])
    made = unknown.headers["x-request-id"]
    assert unknown.status_code == 404 and len(made) == 32 and int(made, 16) >= 0  # one the appliance made

    lines = _lines(tmp_path / "data.log")
    assert all({"ts", "level", "logger", "message"} <= line.keys() for line in lines)
    by_id: dict[object, list[dict[str, object]]] = {}
    for line in lines:
        by_id.setdefault(line.get("request_id"), []).append(line)
    assert {"search-0001", "mcp-0002", made} <= by_id.keys()
    # uvicorn's access line of each request goes through the same formatter, with its request's id
    assert any("GET /api/v1/search?q=zeppelins" in str(line["message"]) for line in by_id["search-0001"])
    assert any("POST /mcp" in str(line["message"]) for line in by_id["mcp-0002"])
    assert any("/api/no-such-route" in str(line["message"]) for line in by_id[made])
    # the MCP SDK's transport and dispatcher run in tasks of their own, the tool in a worker thread: what they
    # logged carries the MCP request's id too
    loggers = {str(line["logger"]) for line in by_id["mcp-0002"]}
    assert {"appliance.mcp_api.server", "mcp.shared.jsonrpc_dispatcher"} <= loggers, by_id["mcp-0002"]
    assert any(line["message"] == "tool kumiho_memory_store: running" for line in by_id["mcp-0002"])
    # lines of no request (start, shutdown) carry none
    assert any("listening" in str(line["message"]) for line in by_id[None])


def test_text_lines_show_the_request_id_in_brackets(tmp_path: Path) -> None:
    with serve(tmp_path / "data", KUMIHO_CE_LOG_FORMAT="text", KUMIHO_CE_LOG_LEVEL="debug") as running:
        answer = httpx.get(running.base_url + "/api/_ready", headers={"x-request-id": "ready-0003"}, timeout=30)
        assert running.stop() == 0
    assert answer.headers["x-request-id"] == "ready-0003"
    text = (tmp_path / "data.log").read_text()
    assert "[ready-0003]: " in text and "GET /api/_ready" in text
    assert not text.lstrip().startswith("{")


@pytest.mark.parametrize(("given", "kept"), [
    ([b"0f8fa3c2-5d1e-4b7a-9c2e-1a2b3c4d5e6f"], True),  # a UUID
    ([b"trace.id:42_a-b"], True),
    ([b"a" * 64], True),
    ([b"a" * 65], False),  # longer than 64
    ([b""], False),
    ([b"-leading-dash"], False),
    ([b"has space"], False),
    ([b"line\nbreak"], False),
    ([b"quote\"d"], False),
    ([b"caf\xc3\xa9"], False),  # not ASCII
    ([b"one", b"two"], False),  # two headers: neither
    ([b"sk-proj-" + b"A1b2C3d4E5f6G7h8J9k0L1m2N3p4"], False),  # a credential is never written to the log
    ([], False),
])
def test_a_client_request_id_is_kept_only_when_it_is_safe_to_log(given: list[bytes], kept: bool) -> None:
    chosen = logs.request_id_from([(b"x-request-id", value) for value in given])
    if kept:
        assert chosen == given[0].decode()
    else:
        assert chosen not in [value.decode("latin-1") for value in given]
        assert len(chosen) == 32 and logs.REQUEST_ID_PATTERN.fullmatch(chosen)


def test_the_refusals_of_the_door_carry_a_request_id_too(tmp_path: Path) -> None:
    with serve(tmp_path / "data") as running:
        refused = httpx.get(running.base_url + "/api/_ready", headers={"host": "evil.example",
                                                                        "x-request-id": "refused-0004"}, timeout=30)
    assert refused.status_code == 421 and refused.headers["x-request-id"] == "refused-0004"


def test_auto_chooses_json_for_the_journal_and_containers_and_text_on_a_terminal(tmp_path: Path) -> None:
    none = (tmp_path / "absent",)
    mark = tmp_path / ".dockerenv"
    mark.touch()
    with open(tmp_path / "stderr.log", "w") as piped:
        stat = os.fstat(piped.fileno())
        journal = {"JOURNAL_STREAM": f"{stat.st_dev}:{stat.st_ino}"}
        assert logs.chosen_format("auto", piped, journal, none) == "json"
        # a child whose stderr went elsewhere inherits the variable: it does not count
        assert logs.chosen_format("auto", piped, {"JOURNAL_STREAM": f"{stat.st_dev}:{stat.st_ino + 1}"}, none) \
            == "text"
        assert logs.chosen_format("auto", piped, {}, none) == "text"
        assert logs.chosen_format("auto", piped, {}, (mark,)) == "json"
        assert logs.chosen_format("auto", piped, {"container": "podman"}, none) == "json"
        assert logs.chosen_format("text", piped, journal, (mark,)) == "text"
        assert logs.chosen_format("json", piped, {}, none) == "json"
    primary, replica = os.openpty()
    with os.fdopen(replica, "w") as terminal:
        assert logs.chosen_format("auto", terminal, {"container": "docker"}, (mark,)) == "text"
    os.close(primary)
    assert logs.chosen_format("auto", io.StringIO(), {"JOURNAL_STREAM": "1:2"}, none) == "text"  # no descriptor
    assert logs.chosen_format("auto", io.StringIO(), {"JOURNAL_STREAM": "journal"}, none) == "text"


@pytest.fixture
def root_logger() -> Iterator[logging.Logger]:
    """The root logger as it was once the test has configured it (pytest's own handlers stay throughout)."""
    root = logging.getLogger()
    level = root.level
    yield root
    for handler in [h for h in root.handlers if isinstance(h, logging.StreamHandler)
                    and any(isinstance(f, logs.RequestIdFilter) for f in h.filters)]:
        root.removeHandler(handler)
    root.setLevel(level)


def test_a_json_line_holds_the_traceback_and_no_credential(root_logger: logging.Logger) -> None:
    stream = io.StringIO()
    assert logs.configure("info", "json", stream) == "json"
    log = logging.getLogger("tests.logs")
    token = "sk-proj-" + "A1b2C3d4E5f6G7h8J9k0L1m2N3p4"
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("it failed with key %s", token)
    logs.configure("info", "text", io.StringIO())  # replaces the handler: nothing more reaches ``stream``
    log.warning("not here")
    line = json.loads(stream.getvalue())
    assert line["level"] == "ERROR" and line["logger"] == "tests.logs" and "request_id" not in line
    assert token not in stream.getvalue() and "it failed with key" in line["message"]
    assert "Traceback" in line["exception"] and "ValueError: boom" in line["exception"]
    assert line["ts"].endswith("Z")


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_a_traceback_that_quotes_a_credential_is_redacted(root_logger: logging.Logger, log_format: str) -> None:
    stream = io.StringIO()
    logs.configure("info", log_format, stream)  # type: ignore[arg-type]
    token = "sk-proj-" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6"
    try:
        raise ValueError(f"the endpoint refused key {token}")
    except ValueError:
        logging.getLogger("tests.logs").exception("the call failed")
    written = stream.getvalue()
    assert "the call failed" in written and "Traceback" in written and "ValueError: the endpoint refused key" in written
    assert token not in written
