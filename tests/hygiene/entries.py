"""Memory API entries made the way the Memory API stores them (one item of kind ``memory`` per key in its
namespace's space; the entry's fields in its latest revision's metadata), written through the graph directly, and
the appliance opened on real stores for the hygiene tests, with a clock each test moves."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from appliance.app import Services, open_services
from appliance.config import MemorySettings, load_settings
from appliance.graph import GraphStore
from appliance.memory.namespaces import namespace_space
from appliance.services.hygiene import HygieneService

PROJECT = "CognitiveMemory"


class Clock:
    """Hygiene's clock: starts at the real time (entries are stamped by the graph's real clock) and moves on
    only when a test says so."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


def store_entry(graph: GraphStore, key: str, category: str, namespace: str = "default",
                content: str | None = None) -> str:
    """The item kref of a new entry ``key`` (category, namespace) with the Memory API's metadata layout."""
    space = namespace_space(PROJECT, namespace)
    graph.ensure_space(space)
    item = graph.create_item(space, re.sub(r"[^a-z0-9_-]+", "-", key.lower()), "memory", {})
    graph.create_revision(item.kref, {
        "key": key, "content": content or f"the entry {key}", "category": category, "session_id": "",
        "namespace": namespace, "kind": "memory", "type": category, "title": key})
    return item.kref


def memory_settings(**changes: Any) -> MemorySettings:
    """``[memory]`` with the given keys (``policy`` a dict of ``[memory.policy]`` keys), validated as the
    configuration file's are."""
    return load_settings(memory=changes).memory


def hygiene_over(services: Services, clock: Clock, **memory: Any) -> HygieneService:
    return HygieneService(services.graph, services.jobs, memory_settings(**memory), PROJECT,
                          services.data_dir.root / "artifacts", clock=clock)


@contextmanager
def appliance(data_dir: Path, **overrides: Any) -> Iterator[Services]:
    """The appliance's services on real stores (Kùzu, LanceDB) in ``data_dir``, without a chat model."""
    settings = load_settings(data_dir=data_dir, **{"search": {"embedder": "hashing"},
                                                   "inference": {"chat_model": "none"}, **overrides})
    with open_services(settings) as services:
        yield services


def state_of(graph: GraphStore, kref: str) -> str:
    """live | archived (deprecated with hygiene's mark) | deprecated | gone."""
    found = graph.search_items(context_filter=kref.removeprefix("kref://").rsplit("/", 1)[0] + "/",
                               kind_filter="memory", include_deprecated=True).items
    item = next((i for i in found if i.kref == kref), None)
    if item is None:
        return "gone"
    if not item.deprecated:
        return "live"
    return "archived" if "hygiene_archived_at" in item.metadata else "deprecated"
