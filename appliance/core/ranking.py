"""Recall ranking: from scored search hits to the list an agent sees. Pure functions.

Order of operations (reference §4.4, §4.16, MISSION D1/D2):
1. one revision per item: the published one, else the latest (``collapse_items``);
2. evidence prior: official +0.15, corroborated +0.08, single_source 0, unverified −0.10;
3. the seed's time decay ``score × 2^(−age_days / half_life_days)`` for decaying types only (D2; it replaces
   the reference's additive recency prior), then the entry's importance (the Memory API's 0..1 field):
   ``+ IMPORTANCE_WEIGHT × importance``, capped at 1;
4. superseded memories after the memories that replace them;
5. diversity: greedy MMR (λ 0.72 × normalised relevance − 0.28 × max Jaccard overlap with what is chosen);
6. ``min_score`` on the adjusted score, then ``limit``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

DEFAULT_HALF_LIFE_DAYS = 7.0
# D2: these memory types (and seed-001 categories) decay; everything else, `core` included, is exempt.
DECAYING_TYPES = frozenset({"summary", "conversation", "action", "error", "daily"})
EVIDENCE_DELTAS = {"official": 0.15, "corroborated": 0.08, "single_source": 0.0, "unverified": -0.10}
MMR_LAMBDA = 0.72
# Importance 1.0 lifts a memory by 0.2 on the 0..1 scale: above an equally relevant one without importance, not
# above one clearly more relevant (the seed: "higher surfaces first", among what the query found).
IMPORTANCE_WEIGHT = 0.2
_TOKEN = re.compile(r"[0-9a-z]+|[\uac00-\ud7a3]+")


@dataclass(frozen=True)
class Candidate:
    revision_kref: str
    item_kref: str
    score: float
    memory_type: str = ""
    created_at: str = ""
    tags: tuple[str, ...] = ()
    evidence_level: str = ""
    superseded_by: str = ""  # kref of the replacing memory, when this one is superseded
    text: str = ""  # title + summary, for the diversity measure
    base_score: float | None = field(default=None, compare=False)
    importance: float = 0.0  # 0..1 (Memory API entries); raises the adjusted score
    decays: bool | None = None  # None: by memory_type (DECAYING_TYPES); a Memory API entry: its category not core

    @property
    def published(self) -> bool:
        return "published" in self.tags

    @property
    def latest(self) -> bool:
        return "latest" in self.tags


def collapse_items(candidates: Iterable[Candidate]) -> list[Candidate]:
    """One candidate per item: the published revision, else the latest, else the best-scoring; it takes
    the best score any revision of the item earned (the item matched)."""
    by_item: dict[str, list[Candidate]] = {}
    for c in candidates:
        by_item.setdefault(c.item_kref, []).append(c)
    chosen = []
    for group in by_item.values():
        best = max(c.score for c in group)
        pick = (next((c for c in group if c.published), None) or next((c for c in group if c.latest), None)
                or max(group, key=lambda c: c.score))
        chosen.append(replace(pick, score=best))
    return chosen


def evidence_delta(candidate: Candidate) -> float:
    level = candidate.evidence_level or next(
        (t.split(":", 1)[1] for t in candidate.tags if t.startswith("evidence:")), "")
    return EVIDENCE_DELTAS.get(level, 0.0)


def decay_factor(created_at: str, memory_type: str, now: datetime,
                 half_lives: Mapping[str, float] | None = None, default_half_life: float = DEFAULT_HALF_LIFE_DAYS,
                 decays: bool | None = None) -> float:
    """``2^(−age_days / half_life)`` for decaying types; 1 for exempt types and unparseable timestamps.
    ``half_lives`` overrides per type (a type listed there decays even when not in DECAYING_TYPES);
    a half-life ≤ 0 means the default. ``decays`` (when not None) says it outright: a Memory API entry decays
    unless its category is core, custom categories included (seed 001)."""
    if decays is False:
        return 1.0
    if not decays and memory_type not in DECAYING_TYPES and not (half_lives and memory_type in half_lives):
        return 1.0
    half_life = (half_lives or {}).get(memory_type, default_half_life)
    half_life = half_life if half_life > 0 else (default_half_life if default_half_life > 0
                                                  else DEFAULT_HALF_LIFE_DAYS)
    try:
        created = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    except (ValueError, AttributeError):
        return 1.0
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    age_days = max(0.0, (now - created).total_seconds() / 86400)
    return float(2 ** (-age_days / half_life))


def adjust(candidates: Iterable[Candidate], now: datetime, half_lives: Mapping[str, float] | None = None,
           default_half_life: float = DEFAULT_HALF_LIFE_DAYS) -> list[Candidate]:
    """Evidence prior, then time decay, then importance; ``base_score`` keeps the search score."""
    adjusted = []
    for c in candidates:
        score = max(0.0, c.score + evidence_delta(c))
        score *= decay_factor(c.created_at, c.memory_type, now, half_lives, default_half_life, c.decays)
        score += IMPORTANCE_WEIGHT * min(1.0, max(0.0, c.importance))
        adjusted.append(replace(c, score=min(1.0, score), base_score=c.score))
    return adjusted


def supersession_order(candidates: list[Candidate]) -> list[Candidate]:
    """The given order, except that a superseded memory moves after every current one when the memory that
    replaced it is in the list too (a replacement outside the list leaves it where it is)."""
    present = {c.revision_kref for c in candidates} | {c.item_kref for c in candidates}
    stale = [c for c in candidates if c.superseded_by and c.superseded_by in present]
    return [c for c in candidates if c not in stale] + stale


def tokens(text: str) -> frozenset[str]:
    return frozenset(_TOKEN.findall(text.casefold()))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def diversify(candidates: list[Candidate], limit: int, lam: float = MMR_LAMBDA) -> list[Candidate]:
    """Greedy MMR over min-max-normalised scores and Jaccard token overlap (only for more than 2)."""
    if len(candidates) <= 2:
        return candidates[:limit]
    low, high = min(c.score for c in candidates), max(c.score for c in candidates)
    spread = (high - low) or 1.0
    bags = {c.revision_kref: tokens(c.text) for c in candidates}
    pool, chosen = list(candidates), list[Candidate]()
    while pool and len(chosen) < limit:
        def gain(c: Candidate) -> float:
            overlap = max((jaccard(bags[c.revision_kref], bags[s.revision_kref]) for s in chosen), default=0.0)
            return lam * (c.score - low) / spread - (1 - lam) * overlap

        best = max(pool, key=lambda c: (gain(c), c.score, c.revision_kref))
        chosen.append(best)
        pool.remove(best)
    return chosen


def rank(candidates: Iterable[Candidate], *, now: datetime, limit: int, min_score: float = 0.0,
         half_lives: Mapping[str, float] | None = None, default_half_life: float = DEFAULT_HALF_LIFE_DAYS
         ) -> list[Candidate]:
    """The whole pipeline; ``min_score`` applies to the adjusted score (reference §3.3)."""
    adjusted = adjust(collapse_items(candidates), now, half_lives, default_half_life)
    kept = [c for c in adjusted if c.score >= min_score and not math.isnan(c.score)]
    diverse = diversify(sorted(kept, key=lambda c: (-c.score, c.revision_kref)), limit)
    return supersession_order(diverse)
