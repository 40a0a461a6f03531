"""Recall ranking properties: decay (D2), priors, published-else-latest, supersession, diversity, min_score."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from appliance.core import ranking
from appliance.core.ranking import Candidate

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def ago(days: float) -> str:
    return (NOW - timedelta(days=days)).isoformat()


def test_decay_halves_a_conversation_every_seven_days() -> None:
    assert ranking.decay_factor(ago(7), "conversation", NOW) == 0.5
    assert abs(ranking.decay_factor(ago(14), "summary", NOW) - 0.25) < 1e-9
    assert ranking.decay_factor(ago(0), "action", NOW) == 1.0


def test_core_facts_and_unknown_types_do_not_decay() -> None:
    for memory_type in ("core", "fact", "decision", "preference", "insight", ""):
        assert ranking.decay_factor(ago(365), memory_type, NOW) == 1.0


def test_half_life_is_configurable_per_type_and_non_positive_means_default() -> None:
    assert ranking.decay_factor(ago(1), "conversation", NOW, {"conversation": 1.0}) == 0.5
    assert ranking.decay_factor(ago(2), "lesson", NOW, {"lesson": 2.0}) == 0.5  # a listed type decays
    assert ranking.decay_factor(ago(7), "conversation", NOW, {"conversation": 0}) == 0.5
    assert ranking.decay_factor(ago(7), "conversation", NOW, default_half_life=-3) == 0.5


def test_unparseable_timestamps_are_left_alone() -> None:
    assert ranking.decay_factor("yesterday", "conversation", NOW) == 1.0
    assert ranking.decay_factor("", "conversation", NOW) == 1.0


@given(st.floats(0, 1), st.floats(0, 3650), st.sampled_from(["conversation", "fact", "summary", "core"]))
def test_adjusted_scores_stay_on_the_scale_and_never_grow_by_age(score: float, days: float, kind: str) -> None:
    young = ranking.adjust([Candidate("k?r=1", "k", score, kind, ago(0))], NOW)[0].score
    old = ranking.adjust([Candidate("k?r=1", "k", score, kind, ago(days))], NOW)[0].score
    assert 0.0 <= old <= young <= 1.0


def test_evidence_priors_from_metadata_or_tag() -> None:
    official = Candidate("a?r=1", "a", 0.5, evidence_level="official")
    tagged = Candidate("b?r=1", "b", 0.5, tags=("evidence:unverified",))
    adjusted = {c.revision_kref: c for c in ranking.adjust([official, tagged], NOW)}
    assert adjusted["a?r=1"].score == 0.65 and adjusted["a?r=1"].base_score == 0.5
    assert abs(adjusted["b?r=1"].score - 0.4) < 1e-9


def test_one_revision_per_item_published_else_latest() -> None:
    old = Candidate("i?r=1", "i", 0.9, tags=("published",))
    new = Candidate("i?r=2", "i", 0.5, tags=("latest",))
    other = Candidate("j?r=3", "j", 0.4, tags=("latest",))
    unpublished = Candidate("j?r=1", "j", 0.7)
    chosen = {c.item_kref: c for c in ranking.collapse_items([old, new, other, unpublished])}
    assert chosen["i"].revision_kref == "i?r=1" and chosen["i"].score == 0.9
    assert chosen["j"].revision_kref == "j?r=3" and chosen["j"].score == 0.7


def test_superseded_memories_come_after_their_replacements() -> None:
    stale = Candidate("old?r=1", "old", 0.9, superseded_by="new?r=1")
    fresh = Candidate("new?r=1", "new", 0.6)
    alone = Candidate("x?r=1", "x", 0.8, superseded_by="gone?r=1")
    order = [c.revision_kref for c in ranking.supersession_order([stale, alone, fresh])]
    assert order == ["x?r=1", "new?r=1", "old?r=1"]


def test_near_duplicates_do_not_fill_the_list() -> None:
    dupes = [Candidate(f"d{i}?r=1", f"d{i}", 0.9 - i * 0.01, text="Alice drinks a flat white every morning")
             for i in range(5)]
    different = Candidate("e?r=1", "e", 0.88, text="Bob hikes in the Alps on weekends")
    top = ranking.diversify(sorted([*dupes, different], key=lambda c: -c.score), 2)
    assert [c.revision_kref for c in top] == ["d0?r=1", "e?r=1"]


def test_min_score_applies_after_adjustment() -> None:
    fresh = Candidate("a?r=1", "a", 0.6, "conversation", ago(0))
    stale = Candidate("b?r=1", "b", 0.6, "conversation", ago(7))  # decays to 0.3
    ranked = ranking.rank([fresh, stale], now=NOW, limit=5, min_score=0.4)
    assert [c.revision_kref for c in ranked] == ["a?r=1"]


@given(st.lists(st.tuples(st.integers(0, 5), st.floats(0, 1)), max_size=20), st.integers(1, 10),
       st.floats(0, 1))
def test_rank_returns_at_most_limit_distinct_items_above_min_score(
    rows: list[tuple[int, float]], limit: int, min_score: float
) -> None:
    candidates = [Candidate(f"i{item}?r={n}", f"i{item}", score, "fact") for n, (item, score) in enumerate(rows)]
    ranked = ranking.rank(candidates, now=NOW, limit=limit, min_score=min_score)
    assert len(ranked) <= limit
    assert len({c.item_kref for c in ranked}) == len(ranked)
    assert all(c.score >= min_score for c in ranked)
