"""``kumiho-ce export FILE [--project P]`` and ``kumiho-ce import FILE [--dry-run]``.

Both go through ``cli_connect.connect``: the running appliance over HTTP, or (none running) this process
opening the data directory and serving the same routes. Export streams ``GET /api/v1/export`` into FILE
(written beside it first and renamed once complete, so FILE is never a partial export). Import copies FILE into
the data directory's ``imports/`` folder, starts ``POST /api/v1/imports`` naming it, follows the job with a
progress bar and removes the copy (when this user may not write there, it sends the file as the request's
body instead, up to the appliance's body limit).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import uuid
from pathlib import Path
from typing import Any

from appliance.cli_connect import connect
from appliance.config import Settings
from appliance.errors import InvalidArgument
from appliance.fsutil import make_dirs
from appliance.portability import staging

END_LINE = b'{"type":"end"'


def add_parsers(commands: Any) -> None:
    export = commands.add_parser("export", help="write the whole memory (or one project) to a JSON Lines file "
                                 "(docs/export-format.md)")
    export.add_argument("file", type=Path, help="the file to write (replaced once the export is complete)")
    export.add_argument("--project", help="only this project")
    imports = commands.add_parser("import", help="import a JSON Lines export: checked whole, then written; "
                                  "records already held are skipped")
    imports.add_argument("file", type=Path, help="an export file")
    imports.add_argument("--dry-run", action="store_true", help="only check the file and count what it would write")
    imports.add_argument("--json", action="store_true", help="print the result as JSON")


def run_export(args: argparse.Namespace, settings: Settings) -> int:
    target: Path = args.file
    params = {"project": args.project} if args.project else {}

    def ends_whole(tail: bytes) -> None:
        if not (tail.endswith(b"\n") and tail.rstrip(b"\n").rsplit(b"\n", 1)[-1].startswith(END_LINE)):
            raise InvalidArgument("the export stopped before its end: the appliance's log says why; run it again")

    with connect(settings) as client:
        _, records = client.download("/api/v1/export", target, label="export", params=params, check_end=ends_whole)
    print(f"exported {records - 2} records to {target}", file=sys.stderr)
    return 0


def run_import(args: argparse.Namespace, settings: Settings) -> int:
    source: Path = args.file
    if not source.is_file():
        raise InvalidArgument(f"file: {source} is not a file", field="file")
    with connect(settings) as client:
        staged = staging.imports_dir(client.data_dir) / f"cli-{uuid.uuid4().hex[:12]}.jsonl"
        try:
            try:
                make_dirs(staged.parent)
                shutil.copyfile(source, staged)
            except PermissionError:  # the appliance runs as another user: send the file (up to the body limit)
                job = client.call("POST", "/api/v1/imports", params={"dry_run": str(args.dry_run).lower()},
                                  content=source.read_bytes(), headers={"content-type": "application/x-ndjson"})
            else:
                job = client.call("POST", "/api/v1/imports", json={"file": staged.name, "dry_run": args.dry_run})
            done = client.follow_job(job["job_id"], "check" if args.dry_run else "import")
        finally:
            with contextlib.suppress(OSError):
                staged.unlink(missing_ok=True)
    result = done.get("result") or {}
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    new = ", ".join(f"{count} {kind}" for kind, count in result.get("new", {}).items()) or "nothing"
    verb = "would write" if args.dry_run else "wrote"
    print(f"{result.get('records', 0)} records checked; {verb} {new}; {result.get('unchanged', 0)} already held")
    return 0
