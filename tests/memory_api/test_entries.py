"""The pure parts: Revka's slug and the collision name, category parsing, the bounds, the metadata layout,
and recall ranking's importance and per-category decay."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from appliance.core import ranking
from appliance.errors import InvalidArgument
from appliance.memory import entries


@pytest.mark.parametrize(("key", "slug"), [
    ("DB Host", "db-host"), ("  my_key  ", "my-key"), ("a--b", "a-b"), ("-lead-", "lead"), ("Über Café", "über-café"),
    ("설정 값", "설정-값"), ("a/b c", "a-b-c"), ("!!!", ""),
])
def test_revka_slug(key: str, slug: str) -> None:
    assert entries.revka_slug(key) == slug


def test_item_names_use_the_slug_then_a_hash() -> None:
    first, hashed = entries.item_names("DB Host")
    assert first == "db-host" and hashed.startswith("db-host-") and len(hashed) == len("db-host-") + 8
    assert entries.item_names("DB_Host")[1] != hashed  # the hash is of the key, not of the slug
    assert entries.item_names("!!!")[0].startswith("entry-")  # no slug: only the hashed name
    long_first, _ = entries.item_names("k" * 200)
    assert long_first.startswith("k" * entries.MAX_SLUG) and long_first != "k" * entries.MAX_SLUG  # hashed
    wide, _ = entries.item_names("설" * 100)
    assert len(wide.encode()) <= 255


@pytest.mark.parametrize(("given", "parsed"), [("core", "core"), ("Daily", "daily"), (" CONVERSATION ", "conversation"),
                                               ("project.notes", "project.notes")])
def test_categories_are_lower_case_and_custom_labels_allowed(given: str, parsed: str) -> None:
    assert entries.parse_category(given) == parsed


@pytest.mark.parametrize("bad", ["", "two words", "x" * 65, 5, "ünïcode"])
def test_bad_categories_are_refused(bad: object) -> None:
    with pytest.raises(InvalidArgument) as refused:
        entries.parse_category(bad)
    assert refused.value.field == "category"


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -0.01, 1.01, True, "0.5"])
def test_importance_is_a_finite_number_in_0_1(bad: object) -> None:
    with pytest.raises(InvalidArgument):
        entries.check_importance(bad)


def test_the_metadata_layout() -> None:
    new = entries.new_entry(key="k", content="password=hunter2hunter2", category="Daily", namespace="ops",
                            session_id="s", importance=0.25, superseded_by="k2", metadata={"source": "x"})
    meta = entries.metadata_of(new, "kref://P/Memory/ops/k2.memory")
    assert meta == {"source": "x", "key": "k", "content": "password=[secret]", "category": "daily",
                    "session_id": "s", "namespace": "ops", "kind": "memory", "importance": "0.25",
                    "superseded_by": "k2", "superseded_by_kref": "kref://P/Memory/ops/k2.memory"}
    plain = entries.metadata_of(entries.new_entry(key="k", content="c", category="core", namespace="default"))
    assert "importance" not in plain and "superseded_by" not in plain and plain["session_id"] == ""


def test_time_windows() -> None:
    since, until = entries.check_window("2026-01-01T00:00:00+02:00", None)
    assert since == datetime(2025, 12, 31, 22, tzinfo=UTC) and until is None
    assert entries.in_window("2026-01-01T00:00:00+00:00", since, None)
    assert not entries.in_window("2025-12-31T21:00:00+00:00", since, None)
    for bad in ("2026-01-01", "2026-01-01T00:00:00", "yesterday"):  # an offset is required
        with pytest.raises(InvalidArgument):
            entries.parse_time(bad, "since")


def _candidate(name: str, score: float, **fields: object) -> ranking.Candidate:
    return ranking.Candidate(f"kref://P/s/{name}.memory?r=1", f"kref://P/s/{name}.memory", score,
                             text=name, **fields)  # type: ignore[arg-type]


def test_importance_adds_to_the_adjusted_score() -> None:
    now = datetime.now(UTC)
    plain, important = ranking.adjust([_candidate("a", 0.5), _candidate("b", 0.5, importance=1.0)], now)
    assert plain.score == 0.5 and important.score == pytest.approx(0.5 + ranking.IMPORTANCE_WEIGHT)
    (capped,) = ranking.adjust([_candidate("c", 0.95, importance=1.0)], now)
    assert capped.score == 1.0


def test_core_never_decays_and_custom_categories_do() -> None:
    now = datetime.now(UTC)
    week_ago = (now - timedelta(days=7)).isoformat()
    core, custom, other = ranking.adjust([
        _candidate("core", 0.8, created_at=week_ago, memory_type="core", decays=False),
        _candidate("custom", 0.8, created_at=week_ago, memory_type="project.notes", decays=True),
        _candidate("fact", 0.8, created_at=week_ago, memory_type="fact"),  # not an entry: by its type
    ], now)
    assert core.score == 0.8 and other.score == 0.8
    assert custom.score == pytest.approx(0.4, rel=1e-3)  # one half-life
