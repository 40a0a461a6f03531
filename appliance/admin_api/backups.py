"""Backups over HTTP: make one (a job), list, download and delete them; a restore is refused with the command
that does it (a restore replaces the stores this process serves from, so it runs with the appliance stopped).

Backups live in the snapshot directory (``[memory] snapshot_dir``, default ``backups/`` in the data
directory). A name in a request is only compared with the directory's listing (``Backups.path_of``).
"""

from __future__ import annotations

import shlex
from typing import Annotated

from litestar import Controller, delete, get, post
from litestar.datastructures import State
from litestar.params import Parameter
from litestar.response import File
from pydantic import Field

from appliance.admin_api.console_shapes import JobView, Shape
from appliance.backup.store import BackupInfo
from appliance.errors import Conflict
from appliance.jobs import Job

BackupName = Annotated[str, Parameter(description="the backup's file name, as the listing gives it", min_length=1,
                                      max_length=256)]


class BackupView(Shape):
    name: str = Field(description="file name in the backup directory")
    size: int = Field(description="bytes")
    created_at: str = Field(description="when it was made (RFC 3339, UTC)")
    reason: str = Field(description="manual (on request), snapshot (scheduled), hygiene (before a hygiene pass) "
                                    "or pre-migration (before a schema upgrade)")
    schema_version: int = Field(description="the graph's schema version in the archive")
    kumiho_ce_version: str = Field(description="the kumiho-ce version that made it")
    counts: dict[str, int] = Field(description="items, revisions, artifacts, … in the archive")

    @classmethod
    def of(cls, info: BackupInfo) -> BackupView:
        return cls(name=info.name, size=info.size, created_at=info.created_at, reason=info.reason,
                   schema_version=info.schema_version, kumiho_ce_version=info.kumiho_ce_version, counts=info.counts)


class BackupsResponse(Shape):
    backups: list[BackupView] = Field(description="newest first")
    count: int
    directory: str = Field(description="where they are kept")


class RestoreRefused(Conflict):
    """A restore through the API: the command to run instead travels with the problem answer."""

    code = "restore_needs_stopped_appliance"

    def __init__(self, message: str, command: str) -> None:
        super().__init__(message)
        self.command = command

    def to_dict(self) -> dict[str, object]:
        return {**super().to_dict(), "command": self.command}


class BackupsController(Controller):
    path = "/api/v1/backups"
    tags = ("backups",)

    @post("", summary="Back up the whole memory now, while the appliance serves (a job of kind backup)",
          status_code=202, sync_to_thread=False)
    def create(self, state: State) -> JobView:
        services = state.services

        def work(job: Job) -> dict[str, object]:
            def progress(done: int, total: int) -> None:
                job.progress(done, total, "writing the archive")

            made = services.backups.create("manual", progress)
            return {"name": made.path.name, "size": made.path.stat().st_size,
                    "writes_held_seconds": round(made.timings["writes_held"], 4),
                    "index_paused_seconds": round(made.timings["index_paused"], 4)}

        # no job key: every request gets a job and a file of its own, so the client that asked for it may
        # delete it (``kumiho-ce backup`` does) without deleting another's; Backups runs one at a time
        job = services.jobs.submit("backup", work, lane="interactive", description="backup on request")
        return JobView.model_validate(job.to_dict())

    @get("", summary="The backups and snapshots in the backup directory, newest first", sync_to_thread=True)
    def list_backups(self, state: State) -> BackupsResponse:
        backups = state.services.backups
        found = [BackupView.of(info) for info in backups.listing()]
        return BackupsResponse(backups=found, count=len(found), directory=str(backups.directory))

    @get("/{name:str}", summary="Download a backup archive", media_type="application/octet-stream",
         sync_to_thread=True)
    def download(self, state: State, name: BackupName) -> File:
        path = state.services.backups.path_of(name)
        return File(path=path, filename=path.name, media_type="application/octet-stream")

    @delete("/{name:str}", summary="Delete a backup archive", status_code=200, sync_to_thread=True)
    def delete_backup(self, state: State, name: BackupName) -> BackupView:
        return BackupView.of(state.services.backups.delete(name))

    @post("/{name:str}/restore", summary="Refused (409): a restore runs with the appliance stopped; the answer "
          "carries the command", status_code=200, sync_to_thread=True)
    def restore(self, state: State, name: BackupName) -> BackupView:
        services = state.services
        path = services.backups.path_of(name)
        command = f"kumiho-ce --data-dir {shlex.quote(str(services.data_dir.root))} restore {shlex.quote(str(path))}"
        raise RestoreRefused(
            f"a restore replaces the data this appliance is serving, so it cannot run inside it: stop the "
            f"appliance, then run `{command}`", command)
