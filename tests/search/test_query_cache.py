"""The cache of query embeddings (SearchService.queries): an identical query text skips the embedder and
finds what it found before; the cache keeps a bounded number of texts, least recently used dropped first."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from appliance.core.search import SearchFilter, SearchRequest
from appliance.inference.embedding import HashingEmbedder
from appliance.search.service import QueryVectors
from tests.search.conftest import CountingEmbedder, Stack


def test_an_identical_query_skips_the_embedder_and_finds_the_same(make_stack) -> None:  # type: ignore[no-untyped-def]
    embedder = CountingEmbedder()
    stack: Stack = make_stack(embedder)
    stack.memory("/P/a", "coffee", "Coffee", "Alice drinks a flat white every morning")
    stack.memory("/P/a", "tea", "Tea", "Bob prefers green tea in the afternoon")
    stack.sync.run_pending()
    embedder.embedded.clear()
    request = SearchRequest("what does alice drink", SearchFilter(project="P"), "hybrid", 5)
    first = stack.search.search(request)
    again = stack.search.search(request)
    assert first and first == again
    assert embedder.embedded == ["what does alice drink"]  # embedded once
    stack.search.search(SearchRequest("what does alice drink?", SearchFilter(project="P"), "vector", 5))
    assert embedder.embedded[-1] == "what does alice drink?"  # another text is another key
    assert (stack.search.queries.hits, stack.search.queries.misses) == (1, 2)


def test_the_cache_is_bounded_and_drops_the_least_recently_used() -> None:
    embedder = CountingEmbedder()
    cache = QueryVectors(embedder, size=3)
    for text in ("a", "b", "c", "a", "d"):  # "a" used again before "d" arrives: "b" is the oldest
        cache.get(text)
    assert len(cache) == 3 and embedder.embedded == ["a", "b", "c", "d"]
    cache.get("b")
    assert embedder.embedded[-1] == "b" and len(cache) == 3
    vector = cache.get("a")
    assert not vector.flags.writeable  # shared by every caller: nobody may change it


def test_concurrent_callers_get_the_same_vector() -> None:
    cache = QueryVectors(CountingEmbedder(), size=64)
    texts = [f"question {n % 40}" for n in range(400)]
    with ThreadPoolExecutor(8) as pool:
        vectors = list(pool.map(cache.get, texts))
    expected = HashingEmbedder().embed([f"question {n}" for n in range(40)])
    for text, vector in zip(texts, vectors, strict=True):
        assert np.array_equal(vector, expected[int(text.split()[1])])
    assert len(cache) == 40 and cache.hits + cache.misses == 400
