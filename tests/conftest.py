"""Shared fixtures: a real Kùzu graph in tmp_path with a clock the test controls."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from appliance.graph import GraphStore
from appliance.inference import install


class FakeClock:
    """An injectable clock: tests move time instead of sleeping."""

    def __init__(self, start: datetime = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)) -> None:
        self.now = start

    def __call__(self) -> datetime:
        self.now += timedelta(microseconds=1)  # every reading is distinct, as on a real clock
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def graph(tmp_path: Path, clock: FakeClock) -> Iterator[GraphStore]:
    store = GraphStore.open(tmp_path / "graph" / "graph.kuzu", buffer_pool_mb=64, readers=2, clock=clock)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def space(graph: GraphStore) -> str:
    graph.ensure_space("/CognitiveMemory/notes")
    return "/CognitiveMemory/notes"


@pytest.fixture
def installation_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty directory in place of this installation's models directory (where `make models` puts the
    default model), so the test sees only the models it installs itself; `models install` writes here."""
    directory = tmp_path / "installation" / "share" / "kumiho-ce" / "models"
    monkeypatch.setattr(install, "installation_models_dir", lambda: directory)
    return directory
