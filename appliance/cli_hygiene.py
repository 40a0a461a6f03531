"""``kumiho-ce hygiene [--dry-run] [--json]``: run the memory hygiene pass now, through ``POST /api/v1/hygiene``
(of the running appliance, or of this process when none runs), with a progress bar; prints its result."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from appliance.cli_connect import connect
from appliance.config import Settings


def add_parser(commands: Any) -> None:
    hygiene = commands.add_parser("hygiene", help="run the memory hygiene pass now: archive, then purge, old "
                                  "Memory API entries ([memory] settings)")
    hygiene.add_argument("--dry-run", action="store_true", help="change nothing; say what a pass would do")
    hygiene.add_argument("--json", action="store_true", help="print the job's result as JSON")


def run(args: argparse.Namespace, settings: Settings, show: Callable[[str], None] = print) -> int:
    with connect(settings) as appliance:
        started = appliance.call("POST", "/api/v1/hygiene", json={"dry_run": bool(args.dry_run)})
        job = appliance.follow_job(started["job_id"], "hygiene dry run" if args.dry_run else "hygiene")
    result = job["result"]
    if args.json:
        show(json.dumps(result, indent=2))
        return 0
    verb = "would archive" if result["dry_run"] else "archived"
    show(f"{verb} {result['archived']}, {'would purge' if result['dry_run'] else 'purged'} {result['purged']}, "
         f"skipped {result['skipped_read_only']} in read-only namespaces"
         + (f"; snapshot {result['snapshot']}" if result.get("snapshot") else "")
         + ("" if result.get("complete", True) else "; stopped early (the next pass finishes)"))
    for change in result["changes"] if result["dry_run"] else []:
        show(f"  {change['action']:<7} {change['kref']}  ({change['reason']})")
    return 0
