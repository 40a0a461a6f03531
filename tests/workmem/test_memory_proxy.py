"""``POST /api/memory/redis`` over real HTTP: Kumiho's memory-proxy actions and their answers' shapes, and bad
bodies answered 400 with a problem naming the field at fault (nothing buffered)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.workmem.conftest import PROJECT, Appliance


def post(appliance: Appliance, body: Any) -> httpx.Response:
    return httpx.post(appliance.proxy_url, json=body, headers={"Authorization": "Bearer whatever"}, timeout=30)


def test_every_action_answers_its_shape(appliance: Appliance) -> None:
    session = {"project": PROJECT, "session_id": "proxy-shapes", "tenant_hint": "ignored"}
    user = {"context": "work", "user_canonical_id": "user-shapes"}
    answers = {action: post(appliance, {"action": action, **payload}) for action, payload in [
        ("add_message", {**session, "role": "user", "content": "Ship it on Friday.", "metadata": {"channel": "x"},
                         "default_ttl": 3600}),
        ("get_messages", {**session, "limit": 5, "offset": 0}),
        ("set_session_metadata", {**session, "metadata": {"user_id": "user-shapes", "context": "work"}}),
        ("get_session_metadata", session),
        ("list_sessions", {"project": PROJECT, "limit": 1000}),
        ("next_sequence", {"user_canonical_id": "user-shapes", "date_str": "20260104", "ttl_seconds": 172800}),
        ("set_active_session", {**user, "session_id": "proxy-shapes", "ttl_seconds": 86400, "nx": True}),
        ("get_active_session", user),
        ("clear_active_session", {**user, "only_if": None}),
        ("get_session_generation", {"base_session_id": "host-shapes"}),
        ("bump_session_generation", {"base_session_id": "host-shapes", "ttl_seconds": 86400}),
        ("clear_session", session),
    ]}
    assert {a: r.status_code for a, r in answers.items()} == {a: 200 for a in answers}
    body = {a: r.json() for a, r in answers.items()}
    assert body["add_message"] == {"success": True, "message_id": "proxy-shapes:1", "message_count": 1,
                                   "created_bucket": True}
    (message,) = body["get_messages"]["messages"]
    assert message["content"] == "Ship it on Friday." and message["metadata"] == {"channel": "x"}
    assert body["get_messages"]["message_count"] == 1 and body["get_messages"]["ttl_remaining"] is None
    assert body["set_session_metadata"] == {"success": True}
    assert body["get_session_metadata"] == {"metadata": {"user_id": "user-shapes", "context": "work"}}
    assert "proxy-shapes" in body["list_sessions"]["sessions"]
    assert body["list_sessions"]["total_sessions"] >= 1
    assert body["next_sequence"] == {"sequence": 1}
    assert body["set_active_session"] == {"success": True, "claimed": True}
    assert body["get_active_session"] == {"session_id": "proxy-shapes"}
    assert body["clear_active_session"] == {"success": True}
    assert body["get_session_generation"] == {"generation": 0}
    assert body["bump_session_generation"] == {"generation": 1}
    assert body["clear_session"] == {"success": True, "cleared_count": 1}


BASE = {"action": "add_message", "project": PROJECT, "session_id": "proxy-bad", "role": "user", "content": "x"}


@pytest.mark.parametrize(("body", "field", "words"), [
    ({"action": "flushall"}, "action", "give one of add_message, get_messages"),
    ({"project": PROJECT}, "action", "give one of"),
    ([1, 2], "action", "give one of"),
    ({**BASE, "content": "x" * 65537}, "add_message.content", "at most 65536 characters"),
    ({**BASE, "content": "é" * 40000}, "content", "80000 bytes of UTF-8; the limit is 65536"),
    ({**BASE, "content": ""}, "add_message.content", "at least 1 character"),
    ({**BASE, "role": "narrator"}, "role", "give one of user, assistant, system, tool"),
    ({**BASE, "project": "   "}, "add_message.project", "pattern"),
    ({**BASE, "session_id": "s" * 257}, "add_message.session_id", "at most 256 characters"),
    ({**BASE, "surprise": 1}, "add_message.surprise", "Extra inputs are not permitted"),
    ({**BASE, "metadata": []}, "add_message.metadata", "valid dictionary"),
    ({**BASE, "metadata": {"blob": "x" * 20_000}}, "metadata", "a message's metadata is at most 16384"),
    ({"action": "get_messages", "project": PROJECT, "session_id": "s", "limit": 1001}, "get_messages.limit",
     "less than or equal to 1000"),
    ({"action": "set_session_metadata", "project": PROJECT, "session_id": "s", "metadata": {"n": 1}},
     "set_session_metadata.metadata.n", "valid string"),
    ({"action": "set_active_session", "context": "c", "user_canonical_id": "u", "session_id": "s", "nx": "maybe"},
     "set_active_session.nx", "valid boolean"),
])
def test_a_bad_body_is_a_400_naming_the_field_and_buffers_nothing(appliance: Appliance, body: Any, field: str,
                                                                  words: str) -> None:
    answer = post(appliance, body)
    assert answer.status_code == 400, answer.text
    problem = answer.json()
    assert problem["field"] == field and words in problem["detail"], problem
    assert "Traceback" not in answer.text
    read = post(appliance, {"action": "get_messages", "project": PROJECT, "session_id": "proxy-bad"}).json()
    assert read["message_count"] == 0


def test_a_body_that_is_not_json_is_a_400(appliance: Appliance) -> None:
    answer = httpx.post(appliance.proxy_url, content=b"{not json", headers={"content-type": "application/json"})
    assert answer.status_code == 400 and answer.json()["field"] == "body"


def test_an_overlong_user_is_refused_and_clearing_an_empty_session_clears_nothing(appliance: Appliance) -> None:
    session = {"project": PROJECT, "session_id": "proxy-unknown-user"}
    answer = post(appliance, {"action": "next_sequence", "user_canonical_id": "u" * 257, "date_str": "20260101"})
    assert answer.status_code == 400 and answer.json()["field"] == "next_sequence.user_canonical_id"
    assert post(appliance, {"action": "clear_session", **session}).json() == {"success": True, "cleared_count": 0}


def test_a_sessions_metadata_is_bounded_in_total(appliance: Appliance) -> None:
    session = {"action": "set_session_metadata", "project": PROJECT, "session_id": "proxy-meta-bounds"}
    read = {"action": "get_session_metadata", "project": PROJECT, "session_id": "proxy-meta-bounds"}
    assert post(appliance, {**session, "metadata": {f"f{i}": "v" for i in range(40)}}).status_code == 200
    answer = post(appliance, {**session, "metadata": {f"g{i}": "v" for i in range(40)}})
    assert answer.status_code == 400 and answer.json()["field"] == "metadata", answer.text
    assert "would hold 80 fields; a session keeps at most 64" in answer.json()["detail"]
    post(appliance, {"action": "clear_session", "project": PROJECT, "session_id": "proxy-meta-bounds"})
    assert post(appliance, {**session, "metadata": {"a": "x" * 40_000}}).status_code == 200
    answer = post(appliance, {**session, "metadata": {"b": "x" * 40_000}})
    assert answer.status_code == 400 and answer.json()["field"] == "metadata", answer.text
    assert "a session keeps at most 65536" in answer.json()["detail"]
    assert list(post(appliance, read).json()["metadata"]) == ["a"], "a refused write changes nothing"
