"""The Memory API over Litestar's test client: the real app on real stores (Kùzu, LanceDB, artifact files in a
tmp data directory; the hashing embedder, where the model does not matter)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from litestar.testing import TestClient

from appliance.app import Services, build_app, open_services
from appliance.config import load_settings

API = "/api/v1/memories"


@dataclass
class Memories:
    client: TestClient[Any]
    services: Services

    def store(self, key: str, content: str, **fields: Any) -> dict[str, Any]:
        response = self.client.post(API, json={"key": key, "content": content, **fields})
        assert response.status_code == 201, response.text
        return response.json()  # type: ignore[no-any-return]

    def recall(self, query: str, **fields: Any) -> list[dict[str, Any]]:
        response = self.client.post(f"{API}/recall", json={"query": query, **fields})
        assert response.status_code == 200, response.text
        return response.json()["entries"]  # type: ignore[no-any-return]

    def keys(self, **params: Any) -> list[str]:
        response = self.client.get(API, params=params)
        assert response.status_code == 200, response.text
        return [e["key"] for e in response.json()["entries"]]

    def count(self, **params: Any) -> int:
        response = self.client.get(f"{API}/count", params=params)
        assert response.status_code == 200, response.text
        return response.json()["count"]  # type: ignore[no-any-return]


@contextmanager
def memories_app(data_dir: Path, **overrides: Any) -> Iterator[Memories]:
    settings = load_settings(data_dir=data_dir, **{"search": {"embedder": "hashing"},
                                                   "inference": {"chat_model": "none"}, **overrides})
    with open_services(settings) as services, TestClient(build_app(services), base_url="http://127.0.0.1") as client:
        yield Memories(client, services)


@pytest.fixture(scope="module")
def mem(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Memories]:
    with memories_app(tmp_path_factory.mktemp("memory-api") / "data") as app:
        yield app


@pytest.fixture
def make_app(tmp_path: Path) -> Callable[..., AbstractContextManager[Memories]]:
    """A fresh app with these settings (limits, default namespace)."""
    made = iter(range(100))

    def make(**overrides: Any) -> AbstractContextManager[Memories]:
        return memories_app(tmp_path / f"data{next(made)}", **overrides)

    return make
