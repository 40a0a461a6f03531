"""BatchCreateRevisions: many revisions (and their artifacts, and the items they need) in one transaction.

Invalid rows are reported by position and the valid ones commit together; a refusal of the whole batch (too
many rows, a read-only namespace) writes nothing. With an ``idempotency_prefix`` each row's revision records
the key ``<prefix>:<index>`` (metadata ``idempotency_key``), so a retried batch answers the revisions the
first one created and writes only the rows that had failed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from google.protobuf.message import Message

from appliance.core import kref as krefs
from appliance.core import names
from appliance.core.model import Revision
from appliance.errors import InvalidArgument, KumihoError
from appliance.graph import GraphStore
from appliance.graph.revisions import NewArtifact, NewRevision
from appliance.grpc_api import convert
from appliance.grpc_api.descriptor import message
from appliance.grpc_api.rpcs._boundary import redacted
from appliance.grpc_api.rpcs.artifacts import MAX_LOCATION
from appliance.grpc_api.rpcs.revisions import IDEMPOTENCY_KEY
from appliance.grpc_api.server import Rpc, RpcCall
from appliance.services.revisions import artifact_location

MAX_ROWS = 200  # Kumiho's server caps a batch at 200 rows; its SDK documents the cap
MAX_PREFIX = 160  # the prefix of the rows' idempotency keys


def batch_create_revisions(call: RpcCall, request: Any) -> Message:
    rows = list(request.revisions)
    if len(rows) > MAX_ROWS:
        raise InvalidArgument(f"revisions: at most {MAX_ROWS} rows per call (got {len(rows)}); split the batch",
                              field="revisions")
    prefix = request.idempotency_prefix
    if len(prefix) > MAX_PREFIX or prefix != prefix.strip() or not prefix.isprintable():
        raise InvalidArgument(f"idempotency_prefix: at most {MAX_PREFIX} printable characters, no surrounding "
                              "spaces", field="idempotency_prefix")
    args = redacted(idempotency_prefix=prefix, revisions=[_row_arguments(row) for row in rows])
    failures: dict[int, str] = {}
    planned: dict[int, NewRevision] = {}
    for index, row in enumerate(args["revisions"]):
        try:
            planned[index] = _new_revision(index, row, call.services.data_dir.root, args["idempotency_prefix"])
        except KumihoError as exc:
            failures[index] = exc.message
    graph = call.services.graph
    created = graph.atomic(lambda: _write(graph, planned, args["idempotency_prefix"], failures))
    return message("BatchCreateRevisionsResponse")(
        results=[convert.revision_response(created[i]) if i in created else message("RevisionResponse")()
                 for i in range(len(rows))],
        failures=[message("BatchRevisionFailure")(index=i, reason=reason) for i, reason in sorted(failures.items())],
        requested_count=len(rows), succeeded_count=len(created))


def _row_arguments(row: Any) -> dict[str, Any]:
    return {"item_kref": row.revision.item_kref.uri, "metadata": dict(row.revision.metadata),
            "artifacts": [{"name": a.name, "location": a.location, "metadata": dict(a.metadata),
                           "is_default": a.is_default} for a in row.artifacts]}


def _new_revision(index: int, row: dict[str, Any], data_root: Path, prefix: str) -> NewRevision:
    """One row checked (the store checks the rest: names, kinds, metadata), its errors naming the row."""
    where = f"revisions[{index}]"
    krefs.parse(row["item_kref"], f"{where}.revision.item_kref")
    meta = names.metadata(row["metadata"], f"{where}.revision.metadata")
    if prefix:
        meta[IDEMPOTENCY_KEY] = f"{prefix}:{index}"
    artifacts = []
    for number, artifact in enumerate(row["artifacts"]):
        location = artifact["location"]
        try:
            if len(location) > MAX_LOCATION:
                raise InvalidArgument(f"location: at most {MAX_LOCATION} characters", field="location")
            location = artifact_location(data_root, location)
        except InvalidArgument as exc:
            raise InvalidArgument(f"{where}.artifacts[{number}].{exc.message}",
                                  field=f"{where}.artifacts[{number}].location") from None
        artifacts.append(NewArtifact(artifact["name"], location, artifact["metadata"], artifact["is_default"]))
    if sum(a.is_default for a in artifacts) > 1:
        raise InvalidArgument(f"{where}.artifacts: at most one default artifact per row", field=f"{where}.artifacts")
    return NewRevision(row["item_kref"], meta, tuple(artifacts))


def _write(graph: GraphStore, planned: dict[int, NewRevision], prefix: str, failures: dict[int, str]
           ) -> dict[int, Revision]:
    """Inside the batch's transaction: the rows an earlier batch with this prefix wrote, then the others."""
    done = _replayed(graph, planned, prefix, failures) if prefix else {}
    fresh = [i for i in sorted(planned) if i not in done and i not in failures]
    if fresh:
        outcome = graph.create_revisions([planned[i] for i in fresh])
        for position, index in enumerate(fresh):
            revision = outcome.revisions[position]
            if revision is None:  # the store names the row by its place among the rows it got
                failures[index] = outcome.failures[position].replace(f"rows[{position}]", f"revisions[{index}]", 1)
            else:
                done[index] = revision
    return done


def _replayed(graph: GraphStore, planned: dict[int, NewRevision], prefix: str, failures: dict[int, str]
              ) -> dict[int, Revision]:
    """Row index → the revision an earlier batch wrote under the row's key, as it is now (its tags moved on)."""
    keys = {f"{prefix}:{index}": index for index in planned}
    found: dict[str, Revision] = {}
    for project in sorted({krefs.parse(row.item_kref).project for row in planned.values()}):
        found.update(graph.revisions_with_metadata(project, IDEMPOTENCY_KEY, list(keys)))
    done = {}
    for key, revision in found.items():
        index = keys[key]
        if revision.item_kref != str(krefs.parse(planned[index].item_kref).item()):
            failures[index] = (f"revisions[{index}]: idempotency key {key!r} already names {revision.kref}, a "
                               "revision of another item; give a new idempotency_prefix for a new batch")
        else:
            done[index] = revision
    return done


RPCS: dict[str, Rpc] = {"BatchCreateRevisions": batch_create_revisions}
