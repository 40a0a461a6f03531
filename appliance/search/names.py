"""Finding items by their names: the query's words against each item's name and kind, with the index's
analyzer (lower case, accents folded, stop words out, English stems) and its typo tolerance
(``analysis.fuzziness``: one edit for words of 4–6 letters, two from 7). Pure.

Kumiho's search matches item names as well as revision text; this is that leg. A score grows with the share
of the query's words the name holds, up to ``NAME_MAX``: ``transprot`` against ``transport-plan.model`` scores
0.56, ``transport plan`` 0.9."""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from rapidfuzz.distance import Levenshtein

from appliance.search import analysis

NAME_MAX = 0.9  # the score of a name that holds every word of the query and nothing else
FUZZY_CREDIT = 0.8  # a query word the name holds with a typo counts this much of an exact one


def name_scores(query: str, names: Iterable[tuple[str, str, str]]) -> dict[str, float]:
    """``(key, item name, kind)`` → the keys whose names match the query, with their scores (0..NAME_MAX)."""
    wanted = list(dict.fromkeys((word, t) for word in analysis.words(query) if (t := analysis.term(word))))
    if not wanted:
        return {}
    termed = [(key, name_terms(name, kind)) for key, name, kind in names]
    vocabulary: set[str] = set().union(*(terms for _, terms in termed)) if termed else set()
    near = {term: near_terms(word, term, vocabulary) for word, term in wanted}
    scored = ((key, name_score(wanted, terms, near)) for key, terms in termed)
    return {key: score for key, score in scored if score > 0}


@lru_cache(maxsize=1 << 16)
def name_terms(item_name: str, kind: str) -> frozenset[str]:
    """The index terms of an item's name and kind (``transport-plan``, ``model``: transport, plan, model)."""
    return frozenset(analysis.terms(f"{item_name} {kind}".replace("_", " ")))


def near_terms(word: str, term: str, vocabulary: set[str]) -> frozenset[str]:
    """The terms of ``vocabulary`` within the query word's typo tolerance of ``term`` (not ``term`` itself)."""
    edits = analysis.fuzziness(word)
    if not edits:
        return frozenset()
    return frozenset(v for v in vocabulary if v != term and Levenshtein.distance(term, v, score_cutoff=edits) <= edits)


def name_score(wanted: list[tuple[str, str]], have: frozenset[str], near: dict[str, frozenset[str]]) -> float:
    """How well a name's terms ``have`` hold the query's (word, term) pairs, on 0..NAME_MAX: the share of the
    query's words found (one found with a typo counting FUZZY_CREDIT), raised to 1.5 so that a partial match
    falls off fast, times 0.8–1 for how much of the name the query covers."""
    if not have:
        return 0.0
    found, used = 0.0, set()
    for _, term in wanted:
        if term in have:
            found += 1.0
            used.add(term)
        elif close := have & near[term]:
            found += FUZZY_CREDIT
            used.add(min(close))
    if not found:
        return 0.0
    return float(NAME_MAX * (found / len(wanted)) ** 1.5 * (0.8 + 0.2 * len(used) / len(have)))
