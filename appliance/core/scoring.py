"""The one relevance scale (D1): raw vector and full-text scores → calibrated 0..1, and their fusion.

Targets (reference §2.3, MISSION D1): near-duplicates ≈ 0.6–0.8 or more, related ≈ 0.4–0.6, unrelated ≈
0.2–0.35. The constants below are measured on real text; docs/search.md records the calibration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# MiniLM cosines: paraphrases ≈ 0.75–0.85, same topic ≈ 0.3–0.5, unrelated ≈ −0.05–0.15.
VECTOR_FLOOR = 0.2  # the score of a cosine of 0
# BM25 saturates: a score of TEXT_SCALE (a solid multi-term match in a short memory) maps to ≈ 0.63.
TEXT_SCALE = 6.0
# How much full-text evidence can add on top of the vector score (noisy-OR weight). Tuned on the LoCoMo dev
# file (docs/search.md): 0.3/0.5/0.7/0.9 gave recall@10 0.653/0.694/0.700/0.705 with scale 6; 0.7 keeps a
# text-only hit below a strong semantic one.
TEXT_WEIGHT = 0.7


def vector_score(cosine: float) -> float:
    """A cosine similarity in [−1, 1] on the 0..1 scale: linear, 0 → VECTOR_FLOOR, 1 → 1."""
    return min(1.0, max(0.0, VECTOR_FLOOR + (1.0 - VECTOR_FLOOR) * cosine))


def text_score(bm25: float) -> float:
    """A BM25 score (≥ 0, unbounded) on the 0..1 scale: 1 − e^(−bm25 / TEXT_SCALE)."""
    return 1.0 - math.exp(-max(0.0, bm25) / TEXT_SCALE)


def fuse(vector: float | None, text: float | None) -> float:
    """Hybrid score: the vector score, raised by full-text evidence as a noisy-OR.

    ``1 − (1 − v)(1 − w·t)``: a hit found by meaning alone keeps its calibrated score, lexical agreement
    adds to it, and neither alone can exceed what both together give. Missing legs count as 0 (a text-only
    hit still gets ``w·t``, plus the floor of a cosine of 0 when the vector leg did not see it).
    """
    v = VECTOR_FLOOR if vector is None else vector
    t = 0.0 if text is None else text
    return 1.0 - (1.0 - v) * (1.0 - TEXT_WEIGHT * t)


@dataclass(frozen=True)
class Scored:
    revision_kref: str
    score: float  # fused, 0..1
    vector: float | None = None  # calibrated vector score, when the vector leg saw it
    text: float | None = None  # calibrated full-text score, when the text leg saw it
