"""The Memory API's routes keep the caller the middleware cleaned (a credential in the User-Agent never reaches
the audit trail), its health check answers a plain sentence when the memory fails, and keys named like a route
(count, export, …) can be forgotten through ``DELETE /api/v1/memories?key=``."""

from __future__ import annotations

import logging
from collections.abc import Callable
from contextlib import AbstractContextManager

import pytest

from tests.memory_api.conftest import API, Memories

TOKEN = "sk-proj-" + "Q7rT2vX9kLmN4pW8zB6cD1fG3hJ5"  # looks like an API key: the middleware redacts it


def test_a_credential_in_the_user_agent_never_reaches_the_audit_trail(
        make_app: Callable[..., AbstractContextManager[Memories]]) -> None:
    with make_app(memory={"audit_enabled": True}) as mem:
        stored = mem.client.post(API, json={"key": "standup", "content": "notes"},
                                 headers={"User-Agent": f"revka/1.0 {TOKEN}"})
        assert stored.status_code == 201, stored.text
        labelled = mem.client.post(API, json={"key": "other", "content": "notes"},
                                   headers={"User-Agent": "ua/1", "X-Kumiho-Client": "revka/0.9"})
        assert labelled.status_code == 201, labelled.text
        rows = mem.client.get("/api/v1/audit", params={"door": "memory_api"}).json()["entries"]
        assert len(rows) == 2 and TOKEN not in str(rows)
        assert rows[0]["client"].startswith("revka/1.0 ") and rows[0]["operation"] == "POST /api/v1/memories"
        assert rows[1]["client"] == "revka/0.9", "X-Kumiho-Client names the client, as on every other route"


def test_health_answers_a_plain_sentence_when_the_memory_fails(
        make_app: Callable[..., AbstractContextManager[Memories]], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    with make_app() as mem:
        def failing(**_: object) -> int:
            raise RuntimeError("disk gone under /srv/secret/graph")

        monkeypatch.setattr(mem.services.memory_api, "count", failing)
        with caplog.at_level(logging.ERROR):
            answer = mem.client.get(f"{API}/health")
        assert answer.status_code == 200
        assert answer.json() == {"healthy": False, "namespace": "default", "entries": None,
                                 "detail": "the memory did not answer a read; see the appliance log"}
        assert "disk gone" in caplog.text, "the log has the exception"


@pytest.mark.parametrize("key", ["count", "export", "health", "procedural", "purge", "recall", "a/b"])
def test_any_key_can_be_forgotten_through_the_query_route(mem: Memories, key: str) -> None:
    mem.store(key, f"the entry named {key}", namespace="routes")
    answer = mem.client.delete(API, params={"key": key, "namespace": "routes"})
    assert answer.status_code == 200, answer.text
    assert answer.json()["entry"]["key"] == key
    assert key not in mem.keys(namespace="routes")
    again = mem.client.delete(API, params={"key": key, "namespace": "routes"})
    assert again.status_code == 404 and "key" in again.text


def test_the_query_route_refuses_a_missing_or_empty_key(mem: Memories) -> None:
    for params in ({}, {"key": ""}, {"key": "k" * 257}):
        answer = mem.client.delete(API, params=params)
        assert answer.status_code == 400 and "key" in answer.text, answer.text
