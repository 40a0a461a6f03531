"""The calibrated 0..1 scale and the fusion of its two legs."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from appliance.core import scoring
from appliance.core.search import ancestors, searchable_text

unit = st.floats(0, 1)


@given(st.floats(-1, 1), st.floats(-1, 1))
def test_vector_scores_are_bounded_and_monotone(a: float, b: float) -> None:
    low, high = sorted((a, b))
    assert 0.0 <= scoring.vector_score(low) <= scoring.vector_score(high) <= 1.0


@given(st.floats(0, 1e6), st.floats(0, 1e6))
def test_text_scores_are_bounded_and_monotone(a: float, b: float) -> None:
    low, high = sorted((a, b))
    assert 0.0 <= scoring.text_score(low) <= scoring.text_score(high) < 1.0 or high > 200


@given(unit, unit)
def test_fusion_never_lowers_the_vector_score_and_stays_on_the_scale(v: float, t: float) -> None:
    fused = scoring.fuse(v, t)
    assert v - 1e-12 <= fused <= 1.0
    assert abs(scoring.fuse(v, 0.0) - v) < 1e-12


@given(unit, unit, unit)
def test_fusion_is_monotone_in_text_evidence(v: float, t1: float, t2: float) -> None:
    low, high = sorted((t1, t2))
    assert scoring.fuse(v, low) <= scoring.fuse(v, high) + 1e-12


def test_a_text_only_hit_counts_the_vector_floor() -> None:
    assert abs(scoring.fuse(None, 0.0) - scoring.VECTOR_FLOOR) < 1e-12


def test_ancestors_are_whole_segments() -> None:
    assert ancestors("/P/a/b") == ["/P", "/P/a", "/P/a/b"]


def test_searchable_text_prefers_semantic_metadata() -> None:
    text = searchable_text("x", {"title": "T", "summary": "S", "schema": "kumiho.agent_memory.v1"},
                           ["published", "latest", "barista"])
    assert text == "T\nS\nbarista"
    assert searchable_text("user-prefs", {}, []) == "user prefs"
    assert searchable_text("x", {"note": "only this", "type": "fact"}, []) == "only this"


def test_searchable_text_leaves_out_what_another_value_already_says() -> None:
    # the Memory API's summary is its content: read once by the embedder, not twice
    assert searchable_text("x", {"title": "scale-1", "summary": "Tea at 5.", "content": "Tea at 5."}, []) \
        == "scale-1\nTea at 5."
    # a title that is the summary's first words, whole or cut with an ellipsis
    assert searchable_text("x", {"title": "Coffee", "summary": "Coffee with oat milk"}, []) == "Coffee with oat milk"
    assert searchable_text("x", {"title": "Drawing flowers is one of my…", "content": "Drawing flowers is one of "
                                 "my faves."}, []) == "Drawing flowers is one of my faves."
    # a shorter value that only shares letters, not words, stays
    assert searchable_text("x", {"title": "T", "summary": "Tea"}, []) == "T\nTea"
    assert searchable_text("x", {"title": "Tea", "summary": "tea time"}, []) == "Tea\ntea time"
