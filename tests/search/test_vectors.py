"""The in-memory vector matrix: exact top-k under every filter, following upserts and deletes."""

from __future__ import annotations

import numpy as np

from appliance.core.search import SearchFilter
from appliance.search.vectors import VectorMatrix


def row(n: int, space: str = "/P/a", **extra: object) -> dict[str, object]:
    vector = np.zeros(4, dtype=np.float32)
    vector[n % 4] = 1.0
    return {"revision_kref": f"k{n}", "project": space.split("/")[1], "space": space, "kind": "conversation",
            "memory_type": "fact", "tags": [], "deprecated": False, "vector": vector, **extra}


def test_exact_top_k_with_filters() -> None:
    matrix = VectorMatrix(4)
    matrix.upsert([row(0), row(1, "/P/ab"), row(4, "/P/a/deep", tags=["x"]), row(8, "/Q/a", kind="skill")])
    query = np.array([1, 0, 0, 0], dtype=np.float32)
    assert [k for k, _ in matrix.search(query, SearchFilter(), 10)][:3] == ["k0", "k4", "k8"]
    assert [k for k, _ in matrix.search(query, SearchFilter(spaces=("/P/a",)), 10)] == ["k0", "k4"]
    assert [k for k, _ in matrix.search(query, SearchFilter(project="Q"), 10)] == ["k8"]
    assert [k for k, _ in matrix.search(query, SearchFilter(kinds=("skill",)), 10)] == ["k8"]
    assert [k for k, _ in matrix.search(query, SearchFilter(tags=("x",)), 10)] == ["k4"]
    assert matrix.search(query, SearchFilter(memory_types=("nope",)), 10) == []
    assert matrix.search(query, SearchFilter(), 1) == [("k0", 1.0)]


def test_upserts_replace_rows_and_deletes_remove_them() -> None:
    matrix = VectorMatrix(4)
    matrix.upsert([row(0, tags=["x"]), row(4)])
    matrix.upsert([row(0, tags=["y"], deprecated=True)])
    query = np.array([1, 0, 0, 0], dtype=np.float32)
    assert [k for k, _ in matrix.search(query, SearchFilter(), 10)] == ["k4"]
    assert [k for k, _ in matrix.search(query, SearchFilter(include_deprecated=True, tags=("y",)), 10)] == ["k0"]
    assert matrix.search(query, SearchFilter(include_deprecated=True, tags=("x",)), 10) == []
    matrix.delete(["k4"])
    assert len(matrix) == 1 and matrix.search(query, SearchFilter(), 10) == []


def test_it_grows_past_its_first_capacity() -> None:
    matrix = VectorMatrix(4)
    matrix.upsert([row(n) for n in range(5000)])
    hits = matrix.search(np.array([0, 1, 0, 0], dtype=np.float32), SearchFilter(), 3)
    assert len(matrix) == 5000 and all(score == 1.0 for _, score in hits)
