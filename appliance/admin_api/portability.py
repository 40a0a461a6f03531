"""Export and import of the whole memory as JSON Lines (docs/export-format.md).

``GET /api/v1/export`` streams the file (``application/x-ndjson``) as it reads the graph page by page.
``POST /api/v1/imports`` starts an import job (202 with the job): the body is the file itself
(``application/x-ndjson``, up to ``http.max_body_bytes``) or JSON naming a file staged in the data directory's
``imports/`` folder (``{"file": "<name>", "dry_run": false}``); the job checks the whole file before writing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any

from litestar import Controller, Request, get, post
from litestar.datastructures import State
from litestar.openapi.spec import OpenAPIMediaType, OpenAPIType, Operation, RequestBody, Schema
from litestar.params import QueryParameter
from litestar.response import Stream
from pydantic import Field, ValidationError

from appliance.admin_api.console_shapes import JobView, Shape
from appliance.core import names
from appliance.errors import InvalidArgument
from appliance.portability import staging
from appliance.portability.exporter import export_lines
from appliance.portability.jobs import start_import

NDJSON = "application/x-ndjson"
_LINES = Schema(type=OpenAPIType.STRING, description="JSON Lines: a header line, one record a line, an end line "
                "(docs/export-format.md)")


class ImportRequest(Shape):
    file: str = Field(min_length=1, max_length=128, pattern=staging.NAME.pattern,
                      description="name of a file in the data directory's imports/ folder (not a path)")
    dry_run: bool = Field(False, description="only check the file and count what an import would write")


@dataclass
class _ExportOperation(Operation):
    def __post_init__(self) -> None:
        for answer in (self.responses or {}).values():
            for media in (getattr(answer, "content", None) or {}).values():
                media.schema = _LINES


@dataclass
class _ImportOperation(Operation):
    def __post_init__(self) -> None:
        fields = ImportRequest.model_json_schema()["properties"]
        self.request_body = RequestBody(required=True, description=(
            "the export file itself, or JSON naming a file staged in <data dir>/imports/"), content={
            NDJSON: OpenAPIMediaType(schema=_LINES),
            "application/json": OpenAPIMediaType(schema=Schema(
                type=OpenAPIType.OBJECT, required=["file"], properties={
                    "file": Schema(type=OpenAPIType.STRING, min_length=1, max_length=128,
                                   pattern=staging.NAME.pattern, description=fields["file"]["description"]),
                    "dry_run": Schema(type=OpenAPIType.BOOLEAN, default=False,
                                      description=fields["dry_run"]["description"])}))})


class PortabilityController(Controller):
    path = "/api/v1"
    tags = ("export and import",)

    @get("/export", summary="The whole memory (or one project) as JSON Lines, streamed", media_type=NDJSON,
         operation_class=_ExportOperation, sync_to_thread=True,
         response_description="the export file (docs/export-format.md)")
    def export(self, state: State, project: Annotated[str | None, QueryParameter(
            description="only this project (edges, bundle members and events that leave it are left out)",
            min_length=1, max_length=names.MAX_SEGMENT)] = None) -> Stream:
        services = state.services
        if project is not None:
            services.graph.get_project(names.project_name(project, "project"))  # 404 before the stream starts
        lines = export_lines(services.graph, services.data_dir.root / "artifacts", project)
        filename = f"kumiho-ce-{project or 'export'}.jsonl"
        return Stream(_chunks(lines), media_type=NDJSON,
                      headers={"Content-Disposition": f'attachment; filename="{filename}"'})

    @post("/imports", summary="Import an export file as a job: checked whole, then written", status_code=202,
          operation_class=_ImportOperation, response_description="the import job (follow it at /api/v1/jobs/{id})")
    async def start(self, request: Request[Any, Any, Any], state: State, dry_run: Annotated[bool, QueryParameter(
            description="with an x-ndjson body: only check the file and count what an import would write")] = False,
    ) -> JobView:
        services = state.services
        media_type = (request.headers.get("content-type") or "").split(";", 1)[0].strip().lower()
        body = await request.body()
        if media_type == NDJSON:
            if not body:
                raise InvalidArgument("body: send the export file (JSON Lines) as the body", field="body")
            path = staging.stage_upload(services.data_dir, body)
            job = start_import(services, path, dry_run=dry_run, remove_after=True)
        elif media_type == "application/json":
            wanted = _import_request(body)
            path = staging.staged_file(services.data_dir, wanted.file)
            job = start_import(services, path, dry_run=wanted.dry_run or dry_run, remove_after=False)
        else:
            raise InvalidArgument(f"body: send the file as {NDJSON}, or JSON {{\"file\": \"<name>\"}} naming a file "
                                  "in the data directory's imports/ folder", field="body")
        return JobView.model_validate(job.to_dict())


def _chunks(lines: Iterator[str], size: int = 64 * 1024) -> Iterator[bytes]:
    """Lines joined into chunks of about ``size`` bytes: each chunk crosses from the reading thread to the
    event loop once, not each line."""
    pending: list[bytes] = []
    held = 0
    for line in lines:
        data = line.encode("utf-8")
        pending.append(data)
        held += len(data)
        if held >= size:
            yield b"".join(pending)
            pending, held = [], 0
    if pending:
        yield b"".join(pending)


def _import_request(body: bytes) -> ImportRequest:
    try:
        return ImportRequest.model_validate(json.loads(body or b"null"))
    except ValueError as exc:
        if isinstance(exc, ValidationError) and exc.errors():
            error = exc.errors()[0]
            where = ".".join(str(part) for part in error["loc"]) or "body"
            raise InvalidArgument(f"{where}: {error['msg']} ({staging.NAME_RULE} for file)", field=where) from None
        raise InvalidArgument('body: give JSON such as {"file": "export.jsonl"}', field="body") from None
