"""A real graph and a real LanceDB index in tmp_path, kept in step by the real sync."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from appliance.core.ports import Embedder
from appliance.graph import GraphStore
from appliance.inference.embedding import HashingEmbedder
from appliance.search.index import SearchIndex
from appliance.search.service import SearchService
from appliance.search.sync import IndexSync


class CountingEmbedder(HashingEmbedder):
    """The real hashing embedder, recording the texts it embeds (``embedded``) and the size of each call
    (``calls``)."""

    def __init__(self) -> None:
        super().__init__()
        self.embedded: list[str] = []
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.embedded += list(texts)
        self.calls.append(len(texts))
        return super().embed(texts)


class Stack:
    def __init__(self, root: Path, embedder: Embedder) -> None:
        self.root, self.embedder = root, embedder
        self.graph = GraphStore.open(root / "graph.kuzu", buffer_pool_mb=64, readers=2)
        self.open_index()

    def open_index(self) -> None:
        self.index = SearchIndex(self.root / "index", self.embedder.dim, self.embedder.model_id)
        self.sync = IndexSync(self.graph, self.index, self.embedder)
        self.search = SearchService(self.index, self.embedder)

    def memory(self, space: str, name: str, title: str, summary: str, memory_type: str = "fact",
               kind: str = "conversation") -> str:
        self.graph.ensure_space(space)
        item = self.graph.create_item(space, name, kind).kref
        return self.graph.create_revision(item, {"title": title, "summary": summary, "memory_type": memory_type}).kref


@pytest.fixture
def make_stack(tmp_path: Path) -> Iterator[Callable[[Embedder], Stack]]:
    stacks: list[Stack] = []

    def make(embedder: Embedder | None = None) -> Stack:
        stack = Stack(tmp_path / f"s{len(stacks)}", embedder or HashingEmbedder())
        stacks.append(stack)
        return stack

    yield make
    for stack in stacks:
        stack.graph.close()


@pytest.fixture
def stack(make_stack: Callable[[], Stack]) -> Stack:
    return make_stack()
