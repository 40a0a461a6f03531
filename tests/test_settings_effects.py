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
        "tests/policy/test_read_only.py::test_a_scheduled_dream_state_run_leaves_read_only_namespaces_alone"],
}

# ---- PENDING: keys whose effect another part of this change builds. THE LEAD FILLS THESE IN AT MERGE: move
# each key to EFFECTS with the node ids of its tests (the slice's report names them). Shipping with any key
# here fails test_no_key_is_pending. -------------------------------------------------------------------------
PENDING: dict[str, str] = {
    "memory.default_namespace": "memapi: tests/memory_api/ (an entry stored without a namespace lands there)",
    "memory.policy.max_entries_per_namespace": "memapi: tests/memory_api/ (refuse or evict past the limit)",
    "memory.policy.max_entries_per_category": "memapi: tests/memory_api/ (refuse or evict past the limit)",
    "memory.hygiene_enabled": "hygiene: tests/hygiene/ (no scheduled pass when off)",
    "memory.archive_after_days": "hygiene: tests/hygiene/ (archived after N days)",
    "memory.purge_after_days": "hygiene: tests/hygiene/ (purged M days after archiving)",
    "memory.conversation_retention_days": "hygiene: tests/hygiene/ (conversation entries' retention)",
    "memory.policy.retention_days_by_category": "hygiene: tests/hygiene/ (per-category retention)",
    "memory.snapshot_enabled": "backup: tests/backup/ (scheduled snapshots with rotation)",
    "memory.snapshot_on_hygiene": "backup + hygiene: tests/hygiene/ (a snapshot before each pass)",
    "memory.auto_hydrate": "backup: tests/backup/ (an empty store is hydrated from the latest snapshot)",
}


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
