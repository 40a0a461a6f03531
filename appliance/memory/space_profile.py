"""Space profiles (reference §4.18): how each space of a project behaves, measured without a model.

Per space (its own items, not its sub-spaces'; system spaces starting with ``_`` are left out):

* churn = 0.5·min(1, revisions per item / 5) + 0.3·min(1, revisions per day in the window / 3)
  + 0.2·min(1, longest SUPERSEDES chain / 5);
* evidence = the mean grade of the live memories (official 1, corroborated 0.7, single_source 0.3,
  unverified or none 0);
* stability = 0.6·share of live memories that are published + 0.4·min(1, median age in days / 30).

Label: canonical (stability ≥ 0.6, churn ≤ 0.4 and, when any memory is graded, evidence ≥ 0.3),
correspondence (churn ≥ 0.6, stability ≤ 0.4), else working. A space's ``space_class`` metadata, when it
is one of the labels, pins its label. Each run leaves one revision on the space's
``_space_profile.space-profile`` item, linked by SUPERSEDES to the previous run's.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from appliance.core.model import Revision, Space
from appliance.errors import KumihoError
from appliance.graph import GraphStore
from appliance.memory.dream import evidence_of

PROFILE_ITEM, PROFILE_KIND = "_space_profile", "space-profile"
LABELS = ("canonical", "working", "correspondence")
QUALITY = {"official": 1.0, "corroborated": 0.7, "single_source": 0.3, "unverified": 0.0}
MAX_SPACES = 500  # spaces profiled in one run
MAX_ITEMS = 500  # items looked at per space
MAX_CHAIN = 5


@dataclass(frozen=True)
class Profile:
    space: Space
    label: str
    observed: str
    pinned: bool
    empty: bool
    scores: dict[str, float]
    counts: dict[str, int]
    previous: Revision | None

    def view(self) -> dict[str, Any]:
        return {"label": self.label, "observed_label": self.observed, "pinned": self.pinned, "empty": self.empty,
                "scores": self.scores}


def classify(churn: float, evidence: float, stability: float, graded: bool) -> str:
    if stability >= 0.6 and churn <= 0.4 and (not graded or evidence >= 0.3):
        return "canonical"
    if churn >= 0.6 and stability <= 0.4:
        return "correspondence"
    return "working"


def profile_space(graph: GraphStore, space: Space, window_days: int, now: datetime) -> Profile:
    items = [i for i in graph.list_items(space.path, page_size=MAX_ITEMS).items
             if i.kind not in (PROFILE_KIND, "bundle")]
    current = graph.current_revisions([i.kref for i in items])
    live = [r for r in current.values() if not r.deprecated]
    revisions = [r for i in items for r in graph.list_revisions(i.kref, page_size=100).items]
    since = (now - timedelta(days=window_days)).isoformat()
    recent = sum(r.created_at >= since for r in revisions)
    chain = max((_chain(graph, r.kref) for r in live), default=0)
    churn = 0.5 * min(1, len(revisions) / max(len(items), 1) / 5) + 0.3 * min(1, recent / window_days / 3) \
        + 0.2 * min(1, chain / MAX_CHAIN) if items else 0.0
    grades = [evidence_of(r) for r in live]
    evidence = sum(QUALITY.get(g, 0.0) for g in grades) / len(live) if live else 0.0
    ages = [(now - _time(r.created_at, now)).total_seconds() / 86400 for r in live]
    stability = 0.6 * (sum(r.published for r in live) / len(live)) + \
        0.4 * min(1, statistics.median(ages) / 30) if live else 0.0
    scores = {"churn": round(churn, 3), "evidence": round(evidence, 3), "stability": round(stability, 3)}
    observed = classify(churn, evidence, stability, any(grades)) if live else "working"
    pin = space.metadata.get("space_class", "")
    previous = next(iter(graph.current_revisions([f"kref:/{space.path}/{PROFILE_ITEM}.{PROFILE_KIND}"]).values()),
                    None)
    return Profile(space, pin if pin in LABELS else observed, observed, pin in LABELS, not live, scores,
                   {"items": len(items), "live": len(live), "revisions": len(revisions)}, previous)


def profile_project(graph: GraphStore, project: str, window_days: int, *, dry_run: bool,
                    now: datetime) -> dict[str, Any]:
    started = time.perf_counter()
    graph.get_project(project)
    spaces = [s for s in graph.list_spaces(f"/{project}", recursive=True, page_size=MAX_SPACES).items
              if not any(part.startswith("_") for part in s.path.split("/")[2:])]
    profiles, errors = [], []
    for space in spaces:
        try:
            profiles.append(profile_space(graph, space, window_days, now))
        except KumihoError as exc:  # one unreadable space does not stop the others
            errors.append({"space_path": space.path, "code": exc.code, "message": exc.message[:200]})
    drift = [{"space_path": p.space.path, "from": p.previous.metadata.get("label"), "to": p.label, "pinned": p.pinned}
             for p in profiles if p.previous is not None and p.previous.metadata.get("label") != p.label]
    if not dry_run and profiles:
        def persist() -> None:
            for profile in profiles:
                _persist(graph, profile, window_days, now)

        graph.atomic(persist)
    labels: dict[str, int] = {}
    for p in profiles:
        labels[p.label] = labels.get(p.label, 0) + 1
    return {"success": not errors, "project": project, "spaces_profiled": len(profiles), "labels": labels,
            "drift": drift, "profiles": {p.space.path: p.view() for p in profiles}, "errors": errors,
            "dry_run": dry_run, "window_days": window_days,
            "duration_ms": round((time.perf_counter() - started) * 1000)}


def _persist(graph: GraphStore, profile: Profile, window_days: int, now: datetime) -> None:
    item = graph.create_item(profile.space.path, PROFILE_ITEM, PROFILE_KIND)
    revision = graph.create_revision(item.kref, {
        "type": "space_profile", "title": f"Space profile of {profile.space.path}", "label": profile.label,
        "observed_label": profile.observed, "pinned": str(profile.pinned).lower(),
        "empty": str(profile.empty).lower(), "window_days": str(window_days), "run_at": now.isoformat(),
        **{k: str(v) for k, v in profile.scores.items()}, **{k: str(v) for k, v in profile.counts.items()}})
    if profile.previous is not None:
        graph.create_edge(revision.kref, profile.previous.kref, "SUPERSEDES", {"basis": "space-profile"})


def _chain(graph: GraphStore, kref: str) -> int:
    """How many SUPERSEDES steps lead back from ``kref`` (at most ``MAX_CHAIN``)."""
    depth, seen = 0, {kref}
    while depth < MAX_CHAIN:
        edges = graph.get_edges(kref, edge_type="SUPERSEDES", direction="outgoing", page_size=1).items
        if not edges or edges[0].target_kref in seen:
            return depth
        kref = edges[0].target_kref
        seen.add(kref)
        depth += 1
    return depth


def _time(value: str, default: datetime) -> datetime:
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return default
    return moment if moment.tzinfo else default
