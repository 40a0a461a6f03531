"""The pure rules at their edges: "older than N days" is strict, 0 turns a rule off, core is never archived by
age unless named, and only hygiene's own archives are purged by age."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from appliance.memory import hygiene

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
RULES = hygiene.Rules(archive_after_days=7, purge_after_days=30, conversation_retention_days=30,
                      retention_days_by_category={}, read_only_namespaces=frozenset())


def entry(category: str, age: timedelta, *, deprecated: bool = False, archived: timedelta | None = None,
          namespace: str = "default") -> hygiene.Entry:
    return hygiene.Entry(f"kref://CognitiveMemory/Memory/{category}-{age.days}.memory", namespace, category,
                         NOW - age, deprecated, None if archived is None else NOW - archived)


def action(found: hygiene.Entry, rules: hygiene.Rules = RULES) -> str | None:
    decision = hygiene.decide(found, rules, NOW)
    return None if decision is None else decision.action


def test_older_than_is_strict() -> None:
    assert action(entry("daily", timedelta(days=7))) is None
    assert action(entry("daily", timedelta(days=7, seconds=1))) == "archive"


def test_core_only_when_named() -> None:
    assert action(entry("core", timedelta(days=3650))) is None
    named = hygiene.Rules(7, 30, 30, {"core": 365}, frozenset())
    assert action(entry("core", timedelta(days=366)), named) == "archive"


def test_zero_days_turns_each_rule_off() -> None:
    off = hygiene.Rules(0, 0, 0, {"books": 0}, frozenset())
    assert action(entry("daily", timedelta(days=999)), off) is None
    assert action(entry("books", timedelta(days=999)), hygiene.Rules(7, 30, 30, {"books": 0}, frozenset())) is None
    assert action(entry("conversation", timedelta(days=999)), off) is None
    assert action(entry("daily", timedelta(days=999), deprecated=True, archived=timedelta(days=999)), off) is None


def test_purge_only_what_hygiene_archived() -> None:
    assert action(entry("daily", timedelta(days=99), deprecated=True, archived=timedelta(days=31))) == "purge"
    assert action(entry("daily", timedelta(days=99), deprecated=True, archived=timedelta(days=29))) is None
    assert action(entry("daily", timedelta(days=99), deprecated=True)) is None, "forgotten: kept"


def test_the_archive_mark_is_read_back_only_with_hygienes_reason() -> None:
    decision = hygiene.Decision(entry("daily", timedelta(days=8)), "archive", "daily entry older than 7 days")
    mark = hygiene.archive_mark(decision, NOW)
    assert hygiene.archived_at(mark) == NOW
    assert hygiene.archived_at({**mark, "deprecation_reason": "forgotten through the Memory API"}) is None
    assert hygiene.archived_at({**mark, "hygiene_archived_at": "yesterday"}) is None


def test_plan_orders_purges_first_and_sets_read_only_aside() -> None:
    rules = hygiene.Rules(7, 30, 30, {}, frozenset({"legal"}))
    found = [entry("daily", timedelta(days=8)), entry("conversation", timedelta(days=31)),
             entry("daily", timedelta(days=9), namespace="legal")]
    plan = hygiene.plan(found, rules, NOW)
    assert [d.action for d in plan.changes] == ["purge", "archive"]
    assert [d.entry.namespace for d in plan.skipped_read_only] == ["legal"]
    assert [len(b) for b in hygiene.batches(plan.changes * 150, 100)] == [100, 100, 100]
