"""Every ``[memory]`` key has an effect, and a test that fails when the effect is removed.

``EFFECTS`` maps each field of ``MemorySettings`` and ``MemoryPolicy`` (appliance/config.py) to the tests that
prove its effect; the table must cover exactly the models' fields, and every test it names must exist (pytest
collects them). A key whose effect is being built elsewhere sits in ``PENDING`` with the tests that will prove
it; ``test_no_key_is_pending`` fails while any key is there, so nothing ships with a key that does nothing.
A key with no meaning in the appliance is removed from the settings instead (``backend`` and ``auto_save`` are
Revka's: tests/policy/test_memory_settings.py).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from appliance.config import MemoryPolicy, MemorySettings

ROOT = Path(__file__).resolve().parents[1]

EFFECTS: dict[str, list[str]] = {
    "memory.min_relevance_score": [
        "tests/mcp_api/test_tools.py::test_operator_engage_floors_min_score_and_caps_limit"],
    "memory.half_life_days": [
        "tests/policy/test_memory_settings.py::test_half_life_days_decays_every_recall",
        "tests/core/test_ranking.py::test_half_life_is_configurable_per_type_and_non_positive_means_default"],
    "memory.response_cache_enabled": [
        "tests/inference/test_response_cache.py::test_the_configuration_puts_the_cache_in_front_of_a_real_model_only",
        "tests/inference/test_response_cache.py::test_the_settings_decide_whether_and_where_there_is_a_cache"],
    "memory.response_cache_ttl_minutes": [
        "tests/inference/test_response_cache.py::test_the_settings_decide_whether_and_where_there_is_a_cache",
        "tests/inference/test_response_cache.py::test_entries_expire_after_the_ttl"],
    "memory.response_cache_max_entries": [
        "tests/inference/test_response_cache.py::test_the_settings_decide_whether_and_where_there_is_a_cache",
        "tests/inference/test_response_cache.py::test_the_persisted_tier_survives_a_restart_and_keeps_max_entries"],
    "memory.response_cache_hot_entries": [
        "tests/inference/test_response_cache.py::test_the_settings_decide_whether_and_where_there_is_a_cache",
        "tests/inference/test_response_cache.py::test_the_least_recently_used_entry_goes_first"],
    "memory.audit_enabled": [
        "tests/policy/test_audit.py::test_audit_off_records_nothing",
        "tests/policy/test_audit.py::test_the_audit_route_filters_pages_and_bounds_its_parameters"],
    "memory.audit_retention_days": [
        "tests/policy/test_audit.py::test_the_prune_job_runs_on_schedule_and_shows_in_the_jobs_api",
        "tests/policy/test_audit.py::test_retention_deletes_rows_older_than_the_setting_and_zero_keeps_them",
        "tests/policy/test_memory_settings.py::test_a_retention_of_zero_days_schedules_no_prune"],
    "memory.policy.read_only_namespaces": [
        "tests/policy/test_read_only.py::test_every_mcp_write_family_is_refused_and_leaves_nothing",
        "tests/policy/test_read_only.py::test_kumiho_rest_refuses_with_403_and_names_the_setting",
        "tests/memory_api/test_rest.py::test_a_read_only_namespace_refuses_a_store_with_403_and_writes_nothing",
        "tests/policy/test_read_only.py::test_a_scheduled_dream_state_run_leaves_read_only_namespaces_alone"],
    "memory.default_namespace": [
        "tests/memory_api/test_rest.py::test_a_call_naming_no_namespace_uses_default_namespace"],
    "memory.policy.max_entries_per_namespace": [
        "tests/memory_api/test_rest.py::test_limits_refuse_a_store_that_would_exceed_them"],
    "memory.policy.max_entries_per_category": [
        "tests/memory_api/test_rest.py::test_limits_refuse_a_store_that_would_exceed_them"],
    "memory.hygiene_enabled": [
        "tests/hygiene/test_schedule.py::test_hygiene_enabled_runs_a_daily_pass_at_hygiene_time",
        "tests/hygiene/test_schedule.py::test_hygiene_enabled_off_schedules_nothing",
        "tests/hygiene/test_schedule.py::test_the_appliance_schedules_hygiene_from_its_settings"],
    "memory.hygiene_time": [
        "tests/hygiene/test_schedule.py::test_hygiene_enabled_runs_a_daily_pass_at_hygiene_time",
        "tests/hygiene/test_schedule.py::test_hygiene_time_empty_schedules_nothing"],
    "memory.archive_after_days": [
        "tests/hygiene/test_settings.py::test_archive_after_days_archives_older_daily_and_custom_entries_only",
        "tests/hygiene/test_settings.py::test_archive_after_days_never_archives_core_entries",
        "tests/hygiene/test_settings.py::test_archive_after_days_zero_archives_nothing"],
    "memory.purge_after_days": [
        "tests/hygiene/test_settings.py::test_purge_after_days_deletes_entries_archived_longer_ago",
        "tests/hygiene/test_settings.py::test_purge_after_days_leaves_entries_deprecated_by_anything_else"],
    "memory.conversation_retention_days": [
        "tests/hygiene/test_settings.py::test_conversation_retention_days_purges_old_conversation_entries"],
    "memory.policy.retention_days_by_category": [
        "tests/hygiene/test_settings.py::test_retention_days_by_category_replaces_archive_after_days_per_category",
        "tests/hygiene/test_settings.py::test_retention_days_by_category_is_validated"],
    "memory.snapshot_enabled": [
        "tests/backup/test_snapshots.py::test_snapshot_enabled_takes_snapshots_as_jobs_and_snapshot_keep_rotates_them",
        "tests/backup/test_snapshots.py::test_snapshot_enabled_false_schedules_nothing"],
    "memory.snapshot_dir": [
        "tests/backup/test_snapshots.py::test_snapshot_dir_is_where_backups_and_snapshots_go"],
    "memory.snapshot_interval_hours": [
        "tests/backup/test_snapshots.py::test_snapshot_interval_hours_counts_from_the_newest_snapshot"],
    "memory.snapshot_keep": [
        "tests/backup/test_snapshots.py::test_snapshot_enabled_takes_snapshots_as_jobs_and_snapshot_keep_rotates_them",
        "tests/backup/test_snapshots.py::test_rotation_keeps_backups_made_on_request_and_upgrade_snapshots"],
    "memory.snapshot_on_hygiene": [
        "tests/hygiene/test_settings.py::test_snapshot_on_hygiene_takes_the_snapshot_before_any_change",
        "tests/hygiene/test_settings.py::test_snapshot_on_hygiene_a_failed_snapshot_stops_the_pass"],
    "memory.auto_hydrate": [
        "tests/backup/test_snapshots.py::test_auto_hydrate_restores_the_newest_snapshot_into_an_empty_store",
        "tests/backup/test_snapshots.py::test_auto_hydrate_false_starts_empty"],
}

# Keys whose effect is still being built elsewhere, with the tests that will prove it; shipping with any key here
# fails test_no_key_is_pending.
PENDING: dict[str, str] = {}


def _fields() -> set[str]:
    keys = {f"memory.{name}" for name in MemorySettings.model_fields if name != "policy"}
    return keys | {f"memory.policy.{name}" for name in MemoryPolicy.model_fields}


def test_the_table_covers_exactly_the_memory_settings() -> None:
    named = set(EFFECTS) | set(PENDING)
    assert not set(EFFECTS) & set(PENDING), "a key is both effective and pending"
    assert named - _fields() == set(), "the table names keys the settings no longer have"
    assert _fields() - named == set(), "a [memory] key has no test of its effect: name one here, or remove the key"
    assert all(EFFECTS.values()), "every effective key names at least one test"


def test_every_named_test_exists() -> None:
    wanted = sorted({node for nodes in EFFECTS.values() for node in nodes})
    files = sorted({node.split("::", 1)[0] for node in wanted})
    collected = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *files],
        cwd=ROOT, capture_output=True, text=True, timeout=240)
    found = {line.split("[", 1)[0] for line in collected.stdout.splitlines() if "::" in line}
    assert [node for node in wanted if node not in found] == [], collected.stdout[-2000:] + collected.stderr[-2000:]


def test_no_key_is_pending() -> None:
    assert PENDING == {}, ("these [memory] keys still have no test of their effect (fill in EFFECTS at merge): "
                           + ", ".join(sorted(PENDING)))
