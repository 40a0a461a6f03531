"""The 5-second dedup guard (D3) with an injected clock: no sleeps."""

from __future__ import annotations

from appliance.memory.cache import RecallCache


class Ticks:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_an_identical_call_within_five_seconds_gets_the_same_result() -> None:
    ticks = Ticks()
    cache = RecallCache(clock=ticks)
    key = cache.key("engage", {"query": "q"}, "client")
    cache.put(key, {"results": [{"kref": "k"}]}, cache.generation)
    ticks.now += 4.9
    assert cache.get(key) == {"results": [{"kref": "k"}]}
    ticks.now += 0.2
    assert cache.get(key) is None


def test_any_write_empties_it_and_a_recall_racing_a_write_is_not_kept() -> None:
    cache = RecallCache(clock=Ticks())
    key = cache.key("recall", {"query": "q"}, "client")
    cache.put(key, {"results": [1]}, cache.generation)
    cache.invalidate()
    assert cache.get(key) is None
    before = cache.generation
    cache.invalidate()  # a write lands while the recall runs
    cache.put(key, {"results": [1]}, before)
    assert cache.get(key) is None


def test_it_never_serves_an_empty_result_and_keys_differ_by_arguments_and_client() -> None:
    cache = RecallCache(clock=Ticks())
    empty = cache.key("engage", {"query": "q"}, "a")
    cache.put(empty, {"results": []}, cache.generation)
    assert cache.get(empty) is None
    assert cache.key("engage", {"query": "q"}, "a") != cache.key("engage", {"query": "q"}, "b")
    assert cache.key("engage", {"query": "q", "limit": 3}, "a") != empty
