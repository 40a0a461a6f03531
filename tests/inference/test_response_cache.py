"""The LLM response cache ([memory] response_cache_*): keys, TTL, size, the hot tier, persistence."""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.config import load_settings
from appliance.core.ports import ModelTimeout, NoModel
from appliance.inference.chat import ScriptedModel
from appliance.inference.llm import SMOKE_SCHEMA
from appliance.inference.response_cache import CachedModel, ResponseCache, with_response_cache
from tests.inference.conftest import Ticker

ASK = [{"role": "user", "content": "summarise"}]
ANSWER = {"title": "T", "topics": ["a"]}


def test_a_repeated_call_is_answered_from_the_cache() -> None:
    scripted = ScriptedModel([ANSWER, "text"])
    model = CachedModel(scripted, ResponseCache(ttl_seconds=60, max_entries=10, hot_entries=5))
    assert model.complete_json(ASK, SMOKE_SCHEMA) == ANSWER
    assert model.complete_json(ASK, SMOKE_SCHEMA) == ANSWER
    assert model.complete_text(ASK) == "text"
    assert model.complete_text(ASK) == "text"
    assert len(scripted.calls) == 2 and (model.cache.hits, model.cache.misses) == (2, 2)


def test_another_model_prompt_schema_or_setting_is_a_miss() -> None:
    key = ResponseCache.key
    base = key("m", "json", ASK, SMOKE_SCHEMA, max_tokens=10, temperature=0.0)
    assert base == key("m", "json", [dict(ASK[0])], dict(SMOKE_SCHEMA), temperature=0.0, max_tokens=10)
    assert len({base, key("other", "json", ASK, SMOKE_SCHEMA, max_tokens=10, temperature=0.0),
                key("m", "json", [{"role": "user", "content": "x"}], SMOKE_SCHEMA, max_tokens=10, temperature=0.0),
                key("m", "json", ASK, {**SMOKE_SCHEMA, "required": ["title"]}, max_tokens=10, temperature=0.0),
                key("m", "json", ASK, SMOKE_SCHEMA, max_tokens=11, temperature=0.0),
                key("m", "text", ASK, None, max_tokens=10, temperature=0.0)}) == 6


def test_entries_expire_after_the_ttl(ticker: Ticker) -> None:
    cache = ResponseCache(ttl_seconds=60, max_entries=10, hot_entries=5, clock=ticker)
    cache.put("k", ANSWER)
    ticker.advance(59)
    assert cache.get("k") == ANSWER
    ticker.advance(1)
    assert cache.get("k") is None and (cache.hits, cache.misses) == (1, 1)


def test_a_ttl_of_zero_keeps_entries_until_evicted(ticker: Ticker) -> None:
    cache = ResponseCache(ttl_seconds=0, max_entries=2, hot_entries=2, clock=ticker)
    cache.put("a", 1)
    ticker.advance(10**9)
    assert cache.get("a") == 1


def test_the_least_recently_used_entry_goes_first(ticker: Ticker) -> None:
    cache = ResponseCache(ttl_seconds=60, max_entries=2, hot_entries=99, clock=ticker)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1
    cache.put("c", 3)
    assert (cache.get("a"), cache.get("b"), cache.get("c"), len(cache)) == (1, None, 3, 2)


def test_the_persisted_tier_survives_a_restart_and_keeps_max_entries(tmp_path: Path, ticker: Ticker) -> None:
    path = tmp_path / "cache" / "llm.sqlite"
    first = ResponseCache(ttl_seconds=60, max_entries=3, hot_entries=1, path=path, clock=ticker)
    for n in range(5):
        ticker.advance(1)
        first.put(f"k{n}", {"n": n})
    assert len(first) == 3 and first.get("k4") == {"n": 4}
    assert first.get("k2") == {"n": 2}  # from the file: the hot tier holds one entry
    first.close()
    second = ResponseCache(ttl_seconds=60, max_entries=3, hot_entries=1, path=path, clock=ticker)
    assert [second.get(f"k{n}") for n in range(5)] == [None, None, {"n": 2}, {"n": 3}, {"n": 4}]
    ticker.advance(60)
    assert second.get("k4") is None and len(second) == 2
    second.close()


def test_failed_calls_are_not_cached() -> None:
    scripted = ScriptedModel([ModelTimeout("slow"), ANSWER])
    model = CachedModel(scripted, ResponseCache(ttl_seconds=60, max_entries=10, hot_entries=10))
    with pytest.raises(ModelTimeout):
        model.complete_json(ASK, SMOKE_SCHEMA)
    assert model.complete_json(ASK, SMOKE_SCHEMA) == ANSWER
    assert model.status().calls == 2


def test_the_settings_decide_whether_and_where_there_is_a_cache(tmp_path: Path) -> None:
    assert ResponseCache.from_settings(load_settings(data_dir=tmp_path).memory) is None
    settings = load_settings(data_dir=tmp_path, memory={"response_cache_enabled": True,
                                                        "response_cache_ttl_minutes": 5,
                                                        "response_cache_max_entries": 7,
                                                        "response_cache_hot_entries": 3})
    cache = ResponseCache.from_settings(settings.memory, tmp_path)
    assert cache is not None and (cache.ttl, cache.max_entries, cache.hot_entries) == (300, 7, 3)
    cache.put("k", "v")
    assert (tmp_path / "cache" / "llm-responses.sqlite").is_file()
    cache.close()
    memory_only = ResponseCache.from_settings(settings.memory)
    assert memory_only is not None and memory_only.hot_entries == 7


def test_the_configuration_puts_the_cache_in_front_of_a_real_model_only(tmp_path: Path) -> None:
    scripted = ScriptedModel([ANSWER])
    assert with_response_cache(load_settings(data_dir=tmp_path), scripted) is scripted
    enabled = load_settings(data_dir=tmp_path, memory={"response_cache_enabled": True})
    cached = with_response_cache(enabled, scripted)
    assert isinstance(cached, CachedModel) and cached.model_id == "scripted"
    assert cached.complete_json(ASK, SMOKE_SCHEMA) == cached.complete_json(ASK, SMOKE_SCHEMA) == ANSWER
    assert len(scripted.calls) == 1
    cached.cache.close()
    none = NoModel("off")
    assert with_response_cache(enabled, none) is none
