"""The methods of ``kumiho.KumihoService`` this appliance serves, one module per group of the service.

Each module's ``RPCS`` maps a method name to its handler ``(call, request) -> response`` (an iterator of
responses for a streaming method); methods in no table answer UNIMPLEMENTED."""

from __future__ import annotations

from appliance.grpc_api.rpcs import (
    artifacts,
    attributes,
    batch,
    bundles,
    deprecation,
    edges,
    events,
    items,
    projects,
    revisions,
    search,
    spaces,
    tags,
    traversal,
)
from appliance.grpc_api.server import Rpc


def _gather(*tables: dict[str, Rpc]) -> dict[str, Rpc]:
    gathered: dict[str, Rpc] = {}
    for table in tables:
        twice = set(gathered) & set(table)
        if twice:
            raise ValueError(f"methods served twice: {sorted(twice)}")
        gathered.update(table)
    return gathered


RPCS: dict[str, Rpc] = _gather(projects.RPCS, spaces.RPCS, items.RPCS, search.RPCS, attributes.RPCS,
                               deprecation.RPCS, events.RPCS, revisions.RPCS, batch.RPCS, tags.RPCS,
                               artifacts.RPCS, edges.RPCS, traversal.RPCS, bundles.RPCS)
