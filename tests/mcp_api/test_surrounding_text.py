"""``metadata.surrounding_text`` on the store tool, through the real MCP server over real HTTP: it is bounded
(the metadata value bound; an error naming it), a credential in it is redacted like the memory's own text, and text the
store would never keep (cron output) is left out with a warning."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.inprocess import InProcess, serve_in_process
from tests.mcp_api.hostile import RawMcp, snapshot

KEY = "sk-proj-Zx81Qw72Er63Ty54Ui45Op36"


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with serve_in_process(tmp_path_factory.mktemp("surrounding") / "data", None) as running:
        yield running


@pytest.fixture
def mcp(app: InProcess) -> Iterator[RawMcp]:
    client = RawMcp(app.base_url)
    yield client
    client.close()


def stored(mcp: RawMcp, surrounding: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The store's answer and the stored revision."""
    answer = mcp.call("kumiho_memory_store", {"space_path": "turns", "user_text": "I loved it, every week!",
                                              "stack_revisions": False,
                                              "metadata": {"surrounding_text": surrounding, "topic": "pottery"}})
    assert answer.payload is not None and answer.payload.get("stored") is True, answer.text[:500]
    revision = mcp.call("kumiho_get_revision", {"kref": answer.payload["revision_kref"]}).payload
    assert revision is not None and "error" not in revision, revision
    return answer.payload, revision


def test_a_surrounding_text_too_long_is_refused_naming_it(app: InProcess, mcp: RawMcp) -> None:
    before = snapshot(app)
    answer = mcp.call("kumiho_memory_store", {"user_text": "A turn.", "metadata": {"surrounding_text": "w" * 4097}})
    assert answer.payload is not None and "error" in answer.payload, answer.text[:500]
    error = answer.payload["error"]
    assert error["field"] == "metadata.surrounding_text"
    assert error["message"] == "metadata.surrounding_text: at most 4096 characters (got 4097); shorten it"
    assert snapshot(app) == before


def test_a_credential_in_the_surrounding_text_is_redacted(mcp: RawMcp) -> None:
    answer, revision = stored(mcp, f"How was the pottery class? (my key is {KEY})")
    surrounding = revision["metadata"]["surrounding_text"]
    assert KEY not in surrounding and "[secret]" in surrounding and "pottery class" in surrounding
    assert "warnings" not in answer


def test_surrounding_text_the_store_would_never_keep_is_left_out_with_a_warning(mcp: RawMcp) -> None:
    answer, revision = stored(mcp, "[CRON:nightly] backup finished in 42 s")
    assert "surrounding_text" not in revision["metadata"] and revision["metadata"]["topic"] == "pottery"
    assert answer["warnings"] == ["metadata.surrounding_text: left out (cron output is never stored)"]
