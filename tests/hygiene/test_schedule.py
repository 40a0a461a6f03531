"""The daily hygiene pass: scheduled at ``[memory] hygiene_time`` while ``hygiene_enabled``, queued by the
maintenance tick whether or not a chat model is there (a clock the test moves; real stores)."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from appliance.app import Services
from appliance.maintenance import Maintenance
from tests.hygiene.entries import Clock, appliance, hygiene_over, state_of, store_entry


def scheduler(services: Services, clock: Clock, **memory: object) -> Maintenance:
    hygiene = hygiene_over(services, clock, **memory)
    return Maintenance(services.maintenance.dreams, services.jobs, services.settings.maintenance,
                       services.settings.kumiho.default_project, consolidator=services.maintenance.consolidator,
                       clock=clock, hygiene=hygiene)


def local(clock: Clock) -> datetime:
    return clock.now.astimezone()


def test_hygiene_enabled_runs_a_daily_pass_at_hygiene_time(tmp_path: Path) -> None:
    with appliance(tmp_path / "data", maintenance={"dream_state_time": "", "idle_consolidation_minutes": 0}) as s:
        clock = Clock()
        daily = store_entry(s.graph, "standup", "daily")
        clock.advance(days=8)
        at = (local(clock) + timedelta(hours=1)).strftime("%H:%M")
        maintenance = scheduler(s, clock, hygiene_enabled=True, hygiene_time=at, archive_after_days=7)
        assert maintenance.next_hygiene is not None
        assert maintenance.tick() == [], "not yet"
        clock.now = maintenance.next_hygiene
        (job,) = maintenance.tick()
        assert job.kind == "hygiene" and job.finished.wait(60) and job.state == "done"
        assert job.result["archived"] == 1 and state_of(s.graph, daily) == "archived"
        assert job.id in {j.id for j in s.jobs.list(kind="hygiene")}, "visible with the jobs"
        assert maintenance.tick() == [] and maintenance.next_hygiene - clock.now == timedelta(days=1), "daily"


def test_hygiene_enabled_off_schedules_nothing(tmp_path: Path) -> None:
    with appliance(tmp_path / "data", maintenance={"dream_state_time": "", "idle_consolidation_minutes": 0}) as s:
        clock = Clock()
        daily = store_entry(s.graph, "standup", "daily")
        maintenance = scheduler(s, clock, hygiene_enabled=False, hygiene_time="04:00", archive_after_days=7)
        assert maintenance.next_hygiene is None
        for _ in range(3):
            clock.advance(days=8)
            assert maintenance.tick() == []
        assert s.jobs.list(kind="hygiene") == [] and state_of(s.graph, daily) == "live"


def test_hygiene_time_empty_schedules_nothing(tmp_path: Path) -> None:
    with appliance(tmp_path / "data", maintenance={"dream_state_time": "", "idle_consolidation_minutes": 0}) as s:
        clock = Clock()
        maintenance = scheduler(s, clock, hygiene_enabled=True, hygiene_time="")
        clock.advance(days=2)
        assert maintenance.next_hygiene is None and maintenance.tick() == []


def test_the_appliance_schedules_hygiene_from_its_settings(tmp_path: Path) -> None:
    with appliance(tmp_path / "on", memory={"hygiene_enabled": True, "hygiene_time": "04:00"}) as s:
        assert s.maintenance.next_hygiene is not None and s.maintenance.next_hygiene.strftime("%H:%M") == "04:00"
    with appliance(tmp_path / "off", memory={"hygiene_enabled": False}) as s:
        assert s.maintenance.next_hygiene is None
