"""``kumiho-ce backup FILE``, ``kumiho-ce restore FILE [--yes]`` and ``kumiho-ce snapshots list``.

backup goes through the appliance (``cli_connect``): a running one makes the archive as a job while it keeps
serving; with none running this process opens the data directory and does the same. restore owns the data
directory itself: it refuses while an appliance runs and says how to stop it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from appliance.config import Settings
from appliance.errors import DataDirError, DataDirInUse, InvalidArgument


def add_parsers(commands: Any) -> None:
    backup = commands.add_parser("backup", help="back up the whole memory into one archive file (the appliance "
                                 "keeps serving)")
    backup.add_argument("file", metavar="FILE", help="the archive to write (.tar.gz); a directory: the archive "
                        "gets its own name there")
    restore = commands.add_parser("restore", help="replace the memory with a backup archive's (appliance stopped; "
                                  "the current data is moved aside, not deleted)")
    restore.add_argument("file", metavar="FILE", help="a backup archive (kumiho-ce backup, or a snapshot)")
    restore.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    snapshots = commands.add_parser("snapshots", help="the snapshots and backups in the snapshot directory")
    actions = snapshots.add_subparsers(dest="snapshots_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="list them, newest first")
    listing.add_argument("--json", action="store_true", help="print them as JSON")


def cmd_backup(args: argparse.Namespace, settings: Settings) -> int:
    from appliance.cli_connect import connect

    target = Path(args.file).expanduser()
    if target.exists() and not target.is_dir():
        raise InvalidArgument(f"FILE: {target} exists; choose another name or delete it first", field="FILE")
    if not (target if target.is_dir() else target.parent).is_dir():
        raise InvalidArgument(f"FILE: the directory {target.parent} does not exist", field="FILE")
    with connect(settings) as app:
        job = app.call("POST", "/api/v1/backups")  # a job of this command's own: no other client's file
        finished = app.follow_job(job["job_id"], "backup")
        name = finished["result"]["name"]
        path = target / name if target.is_dir() else target
        size, _ = app.download(f"/api/v1/backups/{name}", path, label="download")
        app.call("DELETE", f"/api/v1/backups/{name}")  # the copy this command's job made: FILE is the backup
    print(f"backup written to {path} ({size:,} bytes); restore it with `kumiho-ce restore {path}`")
    return 0


def cmd_restore(args: argparse.Namespace, settings: Settings) -> int:
    from tqdm import tqdm

    from appliance.backup import archive
    from appliance.backup.restore import refuse_newer_schema, restore
    from appliance.datadir import DataDir

    source = Path(args.file).expanduser().resolve()
    if not source.is_file():
        raise InvalidArgument(f"FILE: {source} is not a file", field="FILE")
    manifest = archive.read_manifest(source)
    refuse_newer_schema(manifest, source)
    data_dir = DataDir(settings.data_dir)
    data_dir.ensure()
    lock = data_dir.lock()
    try:
        lock.acquire()
    except DataDirInUse as exc:
        who = f"pid {exc.pid}: `kill {exc.pid}`, or `systemctl --user stop kumiho-ce` when systemd runs it" \
            if exc.pid else "`systemctl --user stop kumiho-ce` when systemd runs it"
        raise DataDirError(f"an appliance is running on {data_dir.root}: stop the appliance ({who}), then run "
                           f"`kumiho-ce restore {source}`") from None
    try:
        if not args.yes and not _confirmed(data_dir.root, source, manifest):
            print("nothing was changed", file=sys.stderr)
            return 1
        with tqdm(total=manifest.total_bytes, unit="B", unit_scale=True, desc="restore", file=sys.stderr,
                  leave=False) as bar:
            restored = restore(data_dir, source, lambda done, total: bar.update(done - bar.n))
    finally:
        lock.release()
    counts = restored.manifest.counts
    print(f"restored {source.name} (made {restored.manifest.created_at}, {counts.get('items', 0)} items, "
          f"{counts.get('revisions', 0)} revisions) into {data_dir.root}; the previous data is in "
          f"{restored.aside}. Start the appliance: `kumiho-ce serve`")
    return 0


def _confirmed(root: Path, source: Path, manifest: Any) -> bool:
    if not sys.stdin.isatty():
        raise InvalidArgument("--yes: restore replaces the memory in the data directory; confirm with --yes when "
                              "not running in a terminal", field="--yes")
    answer = input(f"Replace the memory in {root} with {source.name} (made {manifest.created_at}, "
                   f"{manifest.counts.get('items', 0)} items)? The current data is moved to {root}/pre-restore-…. "
                   "[y/N] ")
    return answer.strip().lower() in ("y", "yes")


def cmd_snapshots(args: argparse.Namespace, settings: Settings) -> int:
    from dataclasses import asdict

    from appliance.backup.store import backup_directory, list_archives

    directory = backup_directory(settings)
    found = list_archives(directory)
    if args.json:
        print(json.dumps({"directory": str(directory), "backups": [asdict(info) for info in found]}, indent=2))
        return 0
    if not found:
        print(f"no snapshots or backups in {directory}")
        return 0
    print(f"{directory}:")
    for info in found:
        print(f"  {info.name}  {info.size:>12,} B  {info.reason:<13} schema {info.schema_version}  "
              f"{info.counts.get('items', 0)} items")
    return 0
