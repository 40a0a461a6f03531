"""Prompt-lookup drafting (appliance/inference/sampling.py ``Drafts``): the indexed lookup drafts what a scan of
the whole context would."""

from __future__ import annotations

import random

from appliance.inference.sampling import NGRAM_MAX, NGRAM_MIN, Drafts


def scanned(context: list[int], most: int) -> list[int]:
    """The definition: what followed the latest earlier occurrence of the last NGRAM_MAX..NGRAM_MIN tokens."""
    for size in range(NGRAM_MAX, NGRAM_MIN - 1, -1):
        tail = context[-size:]
        for start in range(len(context) - size - 1, -1, -1):
            if len(context) > size and context[start:start + size] == tail:
                return context[start + size:start + size + most]
    return []


def test_the_indexed_lookup_drafts_what_a_scan_of_the_whole_context_drafts() -> None:
    rng = random.Random(7)
    for _ in range(40):
        prompt = [rng.randrange(6) for _ in range(rng.randrange(0, 60))]  # a small vocabulary: many repeats
        drafts = Drafts(prompt)
        context = list(prompt)
        for _ in range(40):
            most = rng.randrange(0, 9)
            assert drafts.draft(most) == scanned(context, most), (context, most)
            token = rng.randrange(6)
            drafts.append(token)
            context.append(token)


def test_a_copied_phrase_is_drafted_from_its_latest_occurrence() -> None:
    drafts = Drafts([1, 2, 3, 4, 5, 9, 2, 3, 7, 8])
    drafts.append(2)
    drafts.append(3)
    assert drafts.draft(8) == [7, 8, 2, 3]  # the later "2 3" was followed by 7 8
    assert drafts.draft(1) == [7]
    assert drafts.draft(0) == []
    assert Drafts([1, 2]).draft(4) == []
