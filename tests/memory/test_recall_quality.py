"""What recall finds a memory by, through the official MCP client against the in-process app on real stores:
a stored turn's ``surrounding_text`` (the message it answers) is searched with it but never shown."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.inprocess import InProcess, serve_in_process
from tests.mcp_api.clients import call, in_http_session

ASKED = "Did you enjoy the pottery class with the glazing wheel on Saturday?"
REPLY = "I loved it, I want to go back every single week!"
OTHER = "The bakery on the corner sells the best sourdough bread in town."


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with serve_in_process(tmp_path_factory.mktemp("recall-quality") / "data", None) as running:
        async def seed(session: Any) -> None:
            await call(session, "kumiho_memory_store", title="Melanie's reply", user_text=REPLY,
                       space_path="chat", metadata={"surrounding_text": f"Caroline: {ASKED}"})
            await call(session, "kumiho_memory_store", title="Melanie's bakery", user_text=OTHER, space_path="chat")

        in_http_session(running.base_url, seed)
        yield running


def engage(app: InProcess, query: str) -> dict[str, Any]:
    """Engage with a floor above what a query earns without any word in common (the tests' hashing embedder
    gives unrelated texts cosines near 0, calibrated to about 0.2)."""
    return in_http_session(app.base_url, lambda session: call(  # type: ignore[no-any-return]
        session, "kumiho_memory_engage", query=query, space_paths=["chat"], min_score=0.3))


def test_a_turn_is_found_by_the_message_it_answers_which_is_not_shown(app: InProcess) -> None:
    out = engage(app, "pottery glazing wheel")
    assert [r["summary"] for r in out["results"]] == [REPLY], out
    assert out["results"][0]["title"] == "Melanie's reply"
    assert "pottery" not in out["context"] and all("surrounding_text" not in r for r in out["results"])


def test_a_memory_is_still_found_by_its_own_words(app: InProcess) -> None:
    assert [r["summary"] for r in engage(app, "sourdough bakery")["results"]] == [OTHER]
    assert [r["summary"] for r in engage(app, "go back every single week")["results"]] == [REPLY]
