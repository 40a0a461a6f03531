"""Seeded data for the UI tests: a few memories stored through MCP (with a DERIVED_FROM link, as agents make
them), or many written straight through the graph layer before the appliance starts (the 10k-node graph)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from appliance.config import load_settings
from appliance.datadir import DataDir
from appliance.graph import GraphStore
from appliance.graph.links import NewEdge
from appliance.graph.revisions import NewRevision
from tests.mcp_api.clients import call, in_http_session

BULK_PROJECT = "Bulk"
BULK_SPACES = ("alpha", "beta", "gamma", "delta")
BATCH = 5000


@dataclass(frozen=True)
class Seeded:
    source: dict[str, Any]  # the memory the derived one was made from
    derived: dict[str, Any]
    other: dict[str, Any]


SOURCE_TEXT = ("The nightly backup job runs at 02:00 UTC and copies the graph directory to the NAS share named "
               "archive, keeping fourteen daily snapshots.")
DERIVED_TEXT = ("## Backup policy\n\nBackups are **nightly** at `02:00 UTC`.\n\n- fourteen snapshots\n- NAS share "
                "*archive*\n\n<script>window.pwned = 1</script> stays text.")


def mcp_steps(base_url: str, steps: Callable[[Any], Awaitable[Any]]) -> Any:
    """``steps`` in one MCP session, on a thread of its own: Playwright's synchronous API keeps an event loop
    running on the test's thread, where another cannot start."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(in_http_session, base_url, steps).result(timeout=120)


def seed_through_mcp(base_url: str) -> Seeded:
    async def steps(session: Any) -> Seeded:
        source = await call(session, "kumiho_memory_store", user_text=SOURCE_TEXT, title="Nightly backup schedule",
                            space_path="ops", memory_type="fact", tags=["backup"])
        derived = await call(session, "kumiho_memory_store", user_text=DERIVED_TEXT, title="Backup policy summary",
                             space_path="ops", memory_type="summary",
                             source_revision_krefs=[source["revision_kref"]], stack_revisions=False)
        other = await call(session, "kumiho_memory_store", user_text="Alex drinks oolong tea every afternoon.",
                           title="Favourite tea", space_path="preferences", memory_type="preference",
                           stack_revisions=False)
        return Seeded(source, derived, other)

    return mcp_steps(base_url, steps)  # type: ignore[no-any-return]


def seed_one(root: Path, title: str, summary: str) -> str:
    """One memory titled ``title`` with ``summary``, of any length (no tool stores a summary this long), written
    through the graph layer into the data directory ``root`` (the appliance is not running); its item kref."""
    settings = load_settings(data_dir=root, search={"embedder": "hashing"})
    data_dir = DataDir(settings.data_dir)
    data_dir.ensure()
    item_kref = f"kref://{BULK_PROJECT}/{BULK_SPACES[0]}/hostile.fact"
    with data_dir.lock(), GraphStore.open(data_dir.graph_path, buffer_pool_mb=settings.graph.buffer_pool_mb,
                                          default_project=settings.kumiho.default_project) as graph:
        graph.ensure_project(BULK_PROJECT)
        graph.ensure_space(f"/{BULK_PROJECT}/{BULK_SPACES[0]}")
        result = graph.create_revisions([NewRevision(item_kref, {"type": "fact", "memory_type": "fact",
                                                                 "title": title, "summary": summary})])
        assert not result.failures, result.failures
    return item_kref


def seed_bulk(root: Path, memories: int, edges: int) -> None:
    """``memories`` items (one revision each) in BULK_PROJECT's spaces and ``edges`` DERIVED_FROM links between
    them, written through the graph layer into the data directory ``root`` (the appliance is not running)."""
    settings = load_settings(data_dir=root, search={"embedder": "hashing"})
    data_dir = DataDir(settings.data_dir)
    data_dir.ensure()
    with data_dir.lock(), GraphStore.open(data_dir.graph_path, buffer_pool_mb=settings.graph.buffer_pool_mb,
                                          default_project=settings.kumiho.default_project) as graph:
        graph.ensure_project(BULK_PROJECT)
        for space in BULK_SPACES:
            graph.ensure_space(f"/{BULK_PROJECT}/{space}")
        for first in range(0, memories, BATCH):
            rows = [NewRevision(f"kref://{BULK_PROJECT}/{BULK_SPACES[i % len(BULK_SPACES)]}/m{i}.fact",
                                {"type": "fact", "memory_type": "fact", "title": f"Bulk memory {i}",
                                 "summary": f"Generated memory number {i} for the graph view."})
                    for i in range(first, min(memories, first + BATCH))]
            result = graph.create_revisions(rows)
            assert not result.failures, result.failures
        def kref(j: int) -> str:
            return f"kref://{BULK_PROJECT}/{BULK_SPACES[j % len(BULK_SPACES)]}/m{j}.fact?r=1"

        # a forest: memory i was derived from memory i // 7
        graph.create_edges([NewEdge(kref(i), kref(i // 7), "DERIVED_FROM")
                            for i in range(1, min(edges + 1, memories))])
