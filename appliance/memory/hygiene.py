"""Memory hygiene: which Memory API entries a pass archives and which it purges. Pure (no store, no clock).

The rules, applied to each entry (an item of kind ``memory`` in a namespace's space) at ``now``; an entry's age
is ``now`` minus its timestamp (its latest revision's creation time), and "older than N days" means an age
strictly greater than N days:

1. A **conversation** entry older than ``conversation_retention_days`` is purged (deleted with its revisions),
   whatever its state.
2. An entry **archived by hygiene** (deprecated, with ``hygiene_archived_at`` in its item metadata) more than
   ``purge_after_days`` ago is purged.
3. A live (not deprecated) entry older than its category's archive age is **archived**: deprecated (it leaves
   recall and listings; the item and its revisions stay, an event is recorded) and marked with
   ``hygiene_archived_at`` (when, RFC 3339 UTC) and ``deprecation_reason`` in the same transaction, so that a
   later pass knows when it was archived. The archive age of a category is
   ``[memory.policy] retention_days_by_category[category]`` when the category is listed there, else
   ``archive_after_days`` for daily, conversation and custom categories; **core** entries are never archived
   by age unless ``retention_days_by_category`` names ``core``.
4. An entry deprecated by anything else (``forget`` through the Memory API, an operator) is left alone.

A setting of 0 days turns its rule off (0 = never). An entry in one of ``[memory.policy] read_only_namespaces``
is never changed: it is counted as skipped when a rule would have changed it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

from appliance.memory import entries

ARCHIVED_AT = "hygiene_archived_at"  # item metadata: when hygiene archived the entry (RFC 3339, UTC)
REASON = "deprecation_reason"  # item metadata: why, in words (the key the console's deprecations use too)
CORE, CONVERSATION = "core", "conversation"
MAX_DAYS = 36_500  # every day count a setting takes: up to 100 years
MAX_RETENTION_CATEGORIES = 64
MARK = "archived by memory hygiene: "  # how the reason of hygiene's archives begins
MAX_CHANGES_PER_TRANSACTION = 100  # a batch: its archives and purges commit together or not at all

Action = Literal["archive", "purge"]


@dataclass(frozen=True)
class Entry:
    """What the rules need of one entry."""

    kref: str  # the item's kref
    namespace: str
    category: str
    timestamp: datetime  # its latest revision's creation time
    deprecated: bool
    archived_at: datetime | None  # hygiene's mark; None when hygiene did not archive it


@dataclass(frozen=True)
class Rules:
    """The settings a pass applies (built from ``[memory]``; see ``rules_of``)."""

    archive_after_days: int
    purge_after_days: int
    conversation_retention_days: int
    retention_days_by_category: Mapping[str, int]
    read_only_namespaces: frozenset[str]

    def archive_age(self, category: str) -> int:
        """Days after which a live entry of ``category`` is archived; 0 = never."""
        if category in self.retention_days_by_category:
            return self.retention_days_by_category[category]
        return 0 if category == CORE else self.archive_after_days


@dataclass(frozen=True)
class Decision:
    entry: Entry
    action: Action
    reason: str


@dataclass(frozen=True)
class Plan:
    archive: list[Decision]
    purge: list[Decision]
    skipped_read_only: list[Decision]  # what a rule would have done in a read-only namespace

    @property
    def changes(self) -> list[Decision]:
        """Every change, purges first (they free room), each group in kref order."""
        return [*self.purge, *self.archive]


def decide(entry: Entry, rules: Rules, now: datetime) -> Decision | None:
    """What the rules do to ``entry`` at ``now`` (read-only namespaces not considered), or None."""
    age = now - entry.timestamp
    keep_talk = rules.conversation_retention_days
    if entry.category == CONVERSATION and keep_talk and age > timedelta(days=keep_talk):
        return Decision(entry, "purge", f"conversation entry older than {keep_talk} days")
    if entry.deprecated:
        keep_archived = rules.purge_after_days
        if entry.archived_at is not None and keep_archived and now - entry.archived_at > timedelta(days=keep_archived):
            return Decision(entry, "purge", f"archived more than {keep_archived} days ago")
        return None
    days = rules.archive_age(entry.category)
    if days and age > timedelta(days=days):
        return Decision(entry, "archive", f"{entry.category} entry older than {days} days")
    return None


def plan(entries: Iterable[Entry], rules: Rules, now: datetime) -> Plan:
    archive: list[Decision] = []
    purge: list[Decision] = []
    skipped: list[Decision] = []
    for entry in sorted(entries, key=lambda e: e.kref):
        decision = decide(entry, rules, now)
        if decision is None:
            continue
        if entry.namespace in rules.read_only_namespaces:
            skipped.append(decision)
        else:
            (purge if decision.action == "purge" else archive).append(decision)
    return Plan(archive, purge, skipped)


def batches(decisions: list[Decision], size: int = MAX_CHANGES_PER_TRANSACTION) -> Iterator[list[Decision]]:
    for start in range(0, len(decisions), size):
        yield decisions[start:start + size]


def archive_mark(decision: Decision, now: datetime) -> dict[str, str]:
    """The item metadata an archive writes (with the deprecation, in one transaction)."""
    return {ARCHIVED_AT: now.astimezone(UTC).isoformat(timespec="seconds"), REASON: f"{MARK}{decision.reason}"}


def archived_at(item_metadata: Mapping[str, str]) -> datetime | None:
    """Hygiene's archive time from an item's metadata; None when absent or unreadable, or when the reason is not
    hygiene's (an entry restored and then forgotten keeps a stale time): such an entry counts as deprecated by
    something else and is never purged by age."""
    raw = item_metadata.get(ARCHIVED_AT)
    if not raw or not item_metadata.get(REASON, "").startswith(MARK):
        return None
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def check_retention(value: Mapping[str, int]) -> dict[str, int]:
    """``[memory.policy] retention_days_by_category``: category → days (0..36500) an entry is kept before it is
    archived; at most 64 categories, each a lowercase category name. Raises ValueError naming the fix."""
    if len(value) > MAX_RETENTION_CATEGORIES:
        raise ValueError(f"at most {MAX_RETENTION_CATEGORIES} categories; remove some")
    for category, days in value.items():
        if not entries.is_category(category):
            raise ValueError(f"category {category[:80]!r} is not a category name: lower-case {entries.CATEGORY_RULE} "
                             "(e.g. core, daily, conversation, proj.notes)")
        if isinstance(days, bool) or not isinstance(days, int) or not 0 <= days <= MAX_DAYS:
            raise ValueError(f"{category} = {days!r}: days must be a whole number from 0 (never archived by age) "
                             f"to {MAX_DAYS}")
    return dict(value)
