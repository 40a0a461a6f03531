"""``kumiho-ce doctor``: check everything a user can get wrong, changing nothing, each finding with its fix.

The checks live by theme: the configuration, the data directory and the token file (doctor_files.py), the stores
(doctor_store.py), the models and memory (doctor_models.py), the ports and CPU (doctor_machine.py), and the
running appliance's doors (doctor_doors.py). Only a ``fail`` makes doctor exit non-zero, so a first start (no
configuration file, an empty data directory: the systemd unit runs doctor before every start) passes with
warnings that say what the first start creates. A running appliance is never disturbed: doctor reads who holds
the data directory without taking its lock and asks the appliance instead of opening its stores."""

from __future__ import annotations

import json
from dataclasses import asdict

from appliance.config import Settings
from appliance.datadir import DataDir
from appliance.doctor_check import Check, Status
from appliance.doctor_files import check_config, check_data_dir, check_disk, check_environment, check_token
from appliance.doctor_machine import check_cpu, check_port, check_redis_port
from appliance.doctor_models import check_chat_model, check_embedder, check_memory
from appliance.doctor_store import (
    check_running_store,
    check_runtime_file,
    check_stopped_store,
    holder_text,
    lock_holder,
    running_address,
    running_pid_uses,
)

__all__ = ["Check", "Status", "diagnose", "exit_code", "render", "render_json", "run_checks"]


def diagnose(config: str | None = None, data_dir: str | None = None) -> list[Check]:
    """Every check, for the configuration ``kumiho-ce`` would load with these arguments. A configuration that
    does not load is the one finding: the rest would check a data directory and models it may not name."""
    config_check, settings = check_config(config, data_dir)
    if settings is None:
        return [config_check, check_environment()]
    return [config_check, check_environment(), *run_checks(settings)]


def run_checks(settings: Settings) -> list[Check]:
    data_dir = DataDir(settings.data_dir)
    checks = [check_data_dir(data_dir.root), check_disk(data_dir.root)]
    usable = checks[0].status != "fail"  # a directory not created yet is usable: serve creates it
    holder = lock_holder(data_dir) if usable else None
    if not usable:
        checks.append(Check.warn("database", "not checked: the data directory is not usable",
                                 "fix data_dir first, then run kumiho-ce doctor again"))
    elif holder is not None:
        checks.append(Check.ok("lock", f"held by a running kumiho-ce ({holder_text(holder)})"))
        checks.extend(check_running_store(settings, data_dir, holder))
        checks.extend(_check_doors(settings, data_dir))
    else:
        checks.append(Check.ok("lock", "free: no kumiho-ce process owns this data directory"))
        checks.extend(check_stopped_store(settings, data_dir))
    if usable:
        checks.append(check_token(settings, data_dir, running=holder is not None))
        checks.extend(check_runtime_file(data_dir, holder))
    checks.append(check_port(settings, data_dir, holder))
    if holder is None:  # while the appliance runs, its doors were asked (doctor_doors.py)
        checks.extend(c for c in [check_redis_port(settings)] if c is not None)
    checks.append(check_embedder(settings))
    chat, chat_file = check_chat_model(settings)
    checks.append(chat)
    checks.append(check_memory(settings, chat_file, running_pid_uses(holder) if holder else None))
    checks.append(check_cpu(settings))
    return checks


def _check_doors(settings: Settings, data_dir: DataDir) -> list[Check]:
    from appliance.cli_connect import token_for
    from appliance.doctor_doors import check_doors

    return check_doors(settings, *running_address(settings, data_dir), token_for(data_dir, settings))


def exit_code(checks: list[Check]) -> int:
    """1 when any check failed (the appliance would not start, or would break), else 0: warnings pass."""
    return 1 if any(c.status == "fail" for c in checks) else 0


MARKS: dict[Status, str] = {"ok": "ok  ", "warn": "WARN", "fail": "FAIL"}


def render(checks: list[Check]) -> str:
    """One line a check, its fix on the next; a count at the end."""
    lines = []
    for c in checks:
        lines.append(f"[{MARKS[c.status]}] {c.name:<9} {c.detail}")
        if c.fix and c.status != "ok":
            lines.append(f"{'':17}fix: {c.fix}")
    warnings, failures = (sum(c.status == s for c in checks) for s in ("warn", "fail"))
    lines.append(f"{len(checks)} checks: {failures} failed, {warnings} with warnings"
                 + ("" if failures else " (nothing stops kumiho-ce serve)"))
    return "\n".join(lines)


def render_json(checks: list[Check]) -> str:
    """A list of ``{name, status, detail, fix}`` (fix null when there is nothing to do)."""
    return json.dumps([asdict(c) for c in checks], indent=2)
