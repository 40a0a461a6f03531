"""Each ``[memory]`` hygiene setting has its effect on the Memory API's entries (real Kùzu and LanceDB, a clock
the test moves). Every test runs the same entries under two values of its setting and checks that the outcome
differs as documented, so it fails when the setting's effect is removed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from appliance.app import Services
from appliance.errors import ConfigError, InvalidArgument
from appliance.jobs import Job
from tests.hygiene.entries import Clock, appliance, hygiene_over, memory_settings, state_of, store_entry


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    with appliance(tmp_path / "data") as opened:
        yield opened


def finished(job: Job) -> Job:
    assert job.finished.wait(60), "the hygiene job did not finish"
    return job


def test_archive_after_days_archives_older_daily_and_custom_entries_only(services: Services) -> None:
    clock = Clock()
    daily = store_entry(services.graph, "standup", "daily")
    custom = store_entry(services.graph, "reading list", "books")
    clock.advance(days=8)
    kept = hygiene_over(services, clock, archive_after_days=10).run()
    assert kept["archived"] == 0 and state_of(services.graph, daily) == "live"
    result = hygiene_over(services, clock, archive_after_days=7).run()
    assert result["archived"] == 2
    assert state_of(services.graph, daily) == state_of(services.graph, custom) == "archived"
    item = services.graph.get_item(daily)
    assert item.metadata["deprecation_reason"] == "archived by memory hygiene: daily entry older than 7 days"
    assert item.metadata["hygiene_archived_at"].startswith(clock.now.date().isoformat())
    assert any(e["routing_key"] == "item.deprecated" and e["kref"] == daily
               for e in services.graph.events(limit=1000)), "an archive records an event"


def test_archive_after_days_never_archives_core_entries(services: Services) -> None:
    clock = Clock()
    core = store_entry(services.graph, "user name", "core")
    clock.advance(days=400)
    assert hygiene_over(services, clock, archive_after_days=7, conversation_retention_days=0).run()["archived"] == 0
    assert state_of(services.graph, core) == "live"


def test_archive_after_days_zero_archives_nothing(services: Services) -> None:
    clock = Clock()
    daily = store_entry(services.graph, "standup", "daily")
    clock.advance(days=100)
    assert hygiene_over(services, clock, archive_after_days=0).run()["archived"] == 0
    assert state_of(services.graph, daily) == "live"


def test_purge_after_days_deletes_entries_archived_longer_ago(services: Services) -> None:
    clock = Clock()
    daily = store_entry(services.graph, "standup", "daily")
    clock.advance(days=8)
    hygiene_over(services, clock, archive_after_days=7).run()
    assert state_of(services.graph, daily) == "archived"
    clock.advance(days=20)  # archived 20 days ago
    assert hygiene_over(services, clock, archive_after_days=7, purge_after_days=30).run()["purged"] == 0
    result = hygiene_over(services, clock, archive_after_days=7, purge_after_days=15).run()
    assert result["purged"] == 1 and state_of(services.graph, daily) == "gone"


def test_purge_after_days_leaves_entries_deprecated_by_anything_else(services: Services) -> None:
    """A forgotten entry (deprecated without hygiene's mark) stays, as forget promises."""
    clock = Clock()
    forgotten = store_entry(services.graph, "old plan", "daily")
    services.graph.set_deprecated(forgotten, True)
    clock.advance(days=400)
    assert hygiene_over(services, clock, archive_after_days=7, purge_after_days=1).run()["purged"] == 0
    assert state_of(services.graph, forgotten) == "deprecated"


def test_conversation_retention_days_purges_old_conversation_entries(services: Services) -> None:
    clock = Clock()
    talk = store_entry(services.graph, "chat turn 1", "conversation")
    daily = store_entry(services.graph, "standup", "daily")
    clock.advance(days=31)
    kept = hygiene_over(services, clock, archive_after_days=0, conversation_retention_days=60).run()
    assert kept["purged"] == 0 and state_of(services.graph, talk) == "live"
    result = hygiene_over(services, clock, archive_after_days=0, conversation_retention_days=30).run()
    assert result["purged"] == 1 and state_of(services.graph, talk) == "gone"
    assert state_of(services.graph, daily) == "live", "only conversation entries have a retention"


def test_retention_days_by_category_replaces_archive_after_days_per_category(services: Services) -> None:
    clock = Clock()
    core = store_entry(services.graph, "user name", "core")
    daily = store_entry(services.graph, "standup", "daily")
    clock.advance(days=8)
    result = hygiene_over(services, clock, archive_after_days=7,
                          policy={"retention_days_by_category": {"core": 5, "daily": 30}}).run()
    assert result["archived"] == 1
    assert state_of(services.graph, core) == "archived", "core named with 5 days: archived after 8"
    assert state_of(services.graph, daily) == "live", "daily named with 30 days: kept past archive_after_days"


def test_retention_days_by_category_is_validated() -> None:
    for bad, says in [({"Core": 3}, "not a category name"), ({"daily": -1}, "from 0"),
                      ({"daily": 40_000}, "to 36500"), ({f"c{n}": 1 for n in range(65)}, "at most 64")]:
        with pytest.raises(ConfigError) as raised:
            memory_settings(policy={"retention_days_by_category": bad})
        assert "memory.policy.retention_days_by_category" in raised.value.message and says in raised.value.message


@pytest.mark.parametrize("category", ["proj.notes", "v1.2-notes_x", "9" * 64])
def test_every_category_an_entry_can_have_can_get_a_retention_setting(services: Services, category: str) -> None:
    stored = services.memory_api.store(key=f"note {category}", content="a custom category", category=category)
    assert stored.entry is not None and stored.entry.category == category  # the Memory API takes it
    clock = Clock()
    clock.advance(days=3)
    result = hygiene_over(services, clock, archive_after_days=0,
                          policy={"retention_days_by_category": {category: 2}}).run()  # and so does the setting
    assert result["archived"] == 1


@pytest.mark.parametrize("category", ["-notes", "proj notes", "proj/notes", "9" * 65, "Proj.Notes"])
def test_a_category_an_entry_cannot_have_cannot_get_a_retention_setting(services: Services, category: str) -> None:
    with pytest.raises(ConfigError, match="not a category name"):
        memory_settings(policy={"retention_days_by_category": {category: 2}})
    if category != "Proj.Notes":  # an entry's category is lower-cased as Revka does: Proj.Notes is stored as proj.notes
        with pytest.raises(InvalidArgument, match="category"):
            services.memory_api.store(key="k", content="c", category=category)


def test_read_only_namespaces_are_skipped(services: Services) -> None:
    clock = Clock()
    frozen = store_entry(services.graph, "standup", "daily", namespace="archive")
    open_one = store_entry(services.graph, "standup", "daily", namespace="team")
    clock.advance(days=8)
    result = hygiene_over(services, clock, archive_after_days=7, policy={"read_only_namespaces": ["archive"]}).run()
    assert (result["archived"], result["skipped_read_only"]) == (1, 1)
    assert state_of(services.graph, frozen) == "live" and state_of(services.graph, open_one) == "archived"
    assert {"kref": frozen, "namespace": "archive", "category": "daily", "action": "skip",
            "reason": "daily entry older than 7 days; namespace archive is read-only"} in result["changes"]


def test_dry_run_reports_and_changes_nothing(services: Services) -> None:
    clock = Clock()
    daily = store_entry(services.graph, "standup", "daily")
    talk = store_entry(services.graph, "chat turn", "conversation")
    clock.advance(days=40)
    events_before = services.graph.last_event_seq()
    hygiene = hygiene_over(services, clock, archive_after_days=7, conversation_retention_days=30,
                           snapshot_on_hygiene=True)
    hygiene.before_pass = lambda: pytest.fail("a dry run takes no snapshot")
    job = finished(hygiene.submit(dry_run=True))
    assert job.state == "done", job.error
    assert job.result["archived"] == 1 and job.result["purged"] == 1 and job.result["dry_run"] is True
    assert {(c["kref"], c["action"]) for c in job.result["changes"]} == {(daily, "archive"), (talk, "purge")}
    assert state_of(services.graph, daily) == state_of(services.graph, talk) == "live"
    assert services.graph.last_event_seq() == events_before, "a dry run writes nothing"


def test_snapshot_on_hygiene_takes_the_snapshot_before_any_change(services: Services) -> None:
    clock = Clock()
    daily = store_entry(services.graph, "standup", "daily")
    clock.advance(days=8)
    seen: list[str] = []

    def snapshot() -> Path:
        seen.append(state_of(services.graph, daily))
        return Path("/somewhere/snapshots/kumiho-ce-snapshot-1.tar")

    hygiene = hygiene_over(services, clock, archive_after_days=7, snapshot_on_hygiene=True)
    hygiene.before_pass = snapshot
    job = finished(hygiene.submit())
    assert job.state == "done", job.error
    assert seen == ["live"], "the snapshot ran once, before the entry was archived"
    assert job.result["snapshot"] == "kumiho-ce-snapshot-1.tar", "the file's name, not its path"
    assert state_of(services.graph, daily) == "archived"
    hygiene.settings = memory_settings(archive_after_days=7, snapshot_on_hygiene=False)
    seen.clear()
    assert finished(hygiene.submit()).result["snapshot"] is None and seen == []


def test_snapshot_on_hygiene_a_failed_snapshot_stops_the_pass(services: Services) -> None:
    clock = Clock()
    daily = store_entry(services.graph, "standup", "daily")
    clock.advance(days=8)

    def broken() -> Path:
        raise OSError("/secret/path: no space left on device")

    hygiene = hygiene_over(services, clock, archive_after_days=7, snapshot_on_hygiene=True)
    hygiene.before_pass = broken
    job = finished(hygiene.submit())
    assert job.state == "failed" and job.error is not None
    assert "snapshot before the pass failed" in job.error["message"] and "nothing was changed" in job.error["message"]
    assert "/secret" not in job.error["message"]
    assert state_of(services.graph, daily) == "live"
    hygiene.before_pass = None  # snapshots asked for but not available: refused the same way
    job = finished(hygiene.submit())
    assert job.state == "failed" and "snapshot_on_hygiene" in job.error["message"]  # type: ignore[index]
    assert state_of(services.graph, daily) == "live"


def test_a_pass_applies_in_bounded_batches_with_progress(services: Services) -> None:
    clock = Clock()
    krefs = [store_entry(services.graph, f"note {n}", "daily") for n in range(7)]
    clock.advance(days=8)
    hygiene = hygiene_over(services, clock, archive_after_days=7)
    hygiene.batch_size = 3
    archives_per_commit: list[int] = []  # each committed transaction's events arrive together
    services.graph.on_events(lambda events: archives_per_commit.append(
        sum(e["routing_key"] == "item.deprecated" for e in events)))
    progress: list[tuple[int, int]] = []
    services.jobs.subscribe(lambda change, job: progress.append((job.done, job.total))
                            if change == "progress" and job.kind == "hygiene" else None)
    job = finished(hygiene.submit())
    assert job.result["archived"] == 7 and job.result["complete"] is True
    assert [n for n in archives_per_commit if n] == [3, 3, 1], "7 changes in batches of at most 3"
    assert progress[-3:] == [(3, 7), (6, 7), (7, 7)]
    assert {state_of(services.graph, k) for k in krefs} == {"archived"}


def test_an_entry_stored_again_after_the_plan_is_judged_again(services: Services) -> None:
    """The batch checks each entry again in its transaction: stored again as core since the plan, it stays."""
    clock = Clock()
    daily = store_entry(services.graph, "standup", "daily")
    clock.advance(days=8)
    hygiene = hygiene_over(services, clock, archive_after_days=7)
    planned = hygiene.entries()
    services.graph.create_revision(daily, {"key": "standup", "content": "again", "category": "core",
                                           "namespace": "default", "kind": "memory", "type": "core"})
    hygiene.entries = lambda: planned  # type: ignore[method-assign]  # the plan made before the store
    result = hygiene.run()
    assert result["archived"] == 0 and state_of(services.graph, daily) == "live"


def test_items_outside_the_memory_api_are_left_alone(services: Services) -> None:
    """The MCP tools' memories (elsewhere in the graph) are Dream State's to manage."""
    clock = Clock()
    services.graph.ensure_space("/CognitiveMemory/notes")
    other = services.graph.create_item("/CognitiveMemory/notes", "standup", "memory", {})
    services.graph.create_revision(other.kref, {"category": "daily", "type": "daily"})
    clock.advance(days=100)
    assert hygiene_over(services, clock, archive_after_days=7).run()["archived"] == 0
    assert not services.graph.get_item(other.kref).deprecated
