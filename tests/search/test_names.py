"""Finding items by name (appliance/search/names.py): words, typos, partial matches, and nothing for no match."""

from __future__ import annotations

from appliance.search.names import NAME_MAX, name_scores

NAMES = [("a", "transport-plan", "model"), ("b", "hero_sword", "model"), ("c", "alice-coffee-habit-1a2b3c4d",
                                                                        "conversation")]


def test_every_word_of_the_name_scores_the_most() -> None:
    assert name_scores("transport plan model", NAMES)["a"] == NAME_MAX
    assert name_scores("hero sword", NAMES)["b"] > name_scores("hero", NAMES)["b"] > 0.6  # underscores split words


def test_typos_count_less_than_exact_words() -> None:
    typo, exact = name_scores("transprot", NAMES)["a"], name_scores("transport", NAMES)["a"]
    assert 0.5 < typo < exact
    assert name_scores("cofee habits", NAMES).keys() == {"c"}  # a typo and a plural (stems)


def test_partial_matches_fall_off_and_no_match_is_left_out() -> None:
    assert name_scores("alice drinks a flat white every morning", NAMES)["c"] < 0.2
    assert name_scores("quantum chromodynamics", NAMES) == {}
    assert name_scores("the a of", NAMES) == {}  # stop words only
    assert name_scores("car", [("x", "cat", "note")]) == {}  # no typo tolerance for words of three letters


def test_a_kept_index_answers_as_a_fresh_one_and_a_changed_list_is_indexed_anew() -> None:
    """The index of a list is kept for the next call with an equal list; a list with a new, renamed or removed
    item is another list: its answers come from its own index."""
    names = [(f"k{n}", f"note-{n}", "conversation") for n in range(50)] + list(NAMES)
    first = name_scores("transport plan", names)
    assert first == name_scores("transport plan", list(names)) and first.keys() == {"a"}
    grown = [*names, ("d", "transport-plan-b", "model")]
    assert name_scores("transport plan", grown).keys() == {"a", "d"}
    renamed = [("a", "holiday-plan", "model") if key == "a" else (key, name, kind) for key, name, kind in names]
    assert name_scores("transport plan", renamed).keys() == {"a"}
    assert name_scores("transport plan", renamed)["a"] < first["a"]
    assert name_scores("transport plan", [n for n in names if n[0] != "a"]) == {}
