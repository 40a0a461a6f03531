"""Finding items by their names: the query's words against each item's name and kind, with the index's
analyzer (lower case, accents folded, stop words out, English stems) and its typo tolerance
(``analysis.fuzziness``: one edit for words of 4–6 letters, two from 7). Pure.

Kumiho's search matches item names as well as revision text; this is that leg. A score grows with the share
of the query's words the name holds, up to ``NAME_MAX``: ``transprot`` against ``transport-plan.model`` scores
0.56, ``transport plan`` 0.9.

A list of names is indexed once (term → the items holding it; the distinct terms for typo lookups) and the
index kept for the next call with the same list (an unchanged graph answers the same list), so that a query
scores only the items holding one of its terms or a near one, not every item, and looks for near terms only
among the terms of a near length (benchmarks/search_bench.py ``names``). Recognising the list is still
linear (a hash and a comparison, in C), as is the graph read that produces it."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from functools import lru_cache

from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

from appliance.search import analysis

NAME_MAX = 0.9  # the score of a name that holds every word of the query and nothing else
FUZZY_CREDIT = 0.8  # a query word the name holds with a typo counts this much of an exact one


KEPT_INDEXES = 2  # name lists indexed and kept (~40 MB each at 100k names): the contexts searched most


class NameIndex:
    """One list of ``(key, item name, kind)`` indexed by term."""

    def __init__(self, names: Sequence[tuple[str, str, str]]) -> None:
        self.keys = [key for key, _, _ in names]
        self.terms = [name_terms(name, kind) for _, name, kind in names]
        holders: dict[str, list[int]] = {}
        for at, terms in enumerate(self.terms):
            for term in terms:
                holders.setdefault(term, []).append(at)
        self.holders = holders
        self.by_length: dict[int, list[str]] = {}  # a term within k edits differs in length by at most k
        for term in holders:
            self.by_length.setdefault(len(term), []).append(term)

    def scores(self, query: str) -> dict[str, float]:
        wanted = list(dict.fromkeys((word, t) for word in analysis.words(query) if (t := analysis.term(word))))
        if not wanted:
            return {}
        near = {term: self.near(word, term) for word, term in wanted}
        touched: set[int] = set()
        for _, term in wanted:
            for found in (term, *near[term]):
                touched.update(self.holders.get(found, ()))
        scored = ((self.keys[at], name_score(wanted, self.terms[at], near)) for at in sorted(touched))
        return {key: score for key, score in scored if score > 0}

    def near(self, word: str, term: str) -> frozenset[str]:
        """The terms of the names within the query word's typo tolerance of ``term`` (not ``term`` itself)."""
        edits = analysis.fuzziness(word)
        if not edits:
            return frozenset()
        lengths = range(len(term) - edits, len(term) + edits + 1)
        vocabulary = [v for length in lengths for v in self.by_length.get(length, ())]
        found = process.extract(term, vocabulary, scorer=Levenshtein.distance, score_cutoff=edits, limit=None)
        return frozenset(v for v, _, _ in found if v != term)


_indexes: OrderedDict[int, tuple[tuple[tuple[str, str, str], ...], NameIndex]] = OrderedDict()
_indexes_lock = threading.Lock()


def name_index(names: Iterable[tuple[str, str, str]]) -> NameIndex:
    """The index of this list of names: the one kept from an earlier call with an equal list, or a new one."""
    listed = tuple(names)
    digest = hash(listed)
    with _indexes_lock:
        kept = _indexes.get(digest)
        if kept is not None and kept[0] == listed:
            _indexes.move_to_end(digest)
            return kept[1]
    index = NameIndex(listed)
    with _indexes_lock:
        _indexes[digest] = (listed, index)
        while len(_indexes) > KEPT_INDEXES:
            _indexes.popitem(last=False)
    return index


def name_scores(query: str, names: Iterable[tuple[str, str, str]]) -> dict[str, float]:
    """``(key, item name, kind)`` → the keys whose names match the query, with their scores (0..NAME_MAX)."""
    if not any(analysis.term(word) for word in analysis.words(query)):
        return {}
    return name_index(names).scores(query)


@lru_cache(maxsize=1 << 16)
def name_terms(item_name: str, kind: str) -> frozenset[str]:
    """The index terms of an item's name and kind (``transport-plan``, ``model``: transport, plan, model)."""
    return frozenset(analysis.terms(f"{item_name} {kind}".replace("_", " ")))


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
