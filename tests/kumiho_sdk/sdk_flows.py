"""The public Kumiho SDK's flows against a running appliance, run by ``.venv-kumiho``'s python (never imported by
pytest): ``python sdk_flows.py <flow> '<json arguments>'`` prints one JSON line of what the SDK saw, and the test
(tests/kumiho_sdk/test_sdk.py) asserts on it and looks at the same data through the appliance's REST API and MCP.

Only the SDK's public API is used, and its client comes from its own local-CE discovery: the appliance's port is
in ``KUMIHO_LOCAL_SERVER_PORT`` (or ``KUMIHO_LOCAL_SERVER_ENDPOINT``) and nothing else names it. An RPC that fails
raises (the traceback with the gRPC status goes to stderr and the test prints it); a refusal a flow expects is
recorded as its status code name.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from datetime import UTC, datetime
from typing import Any

import grpc
import kumiho
from kumiho.discovery import resolve_local_ce_endpoint


def code_of(call: Any) -> str:
    """The gRPC status name a call ends with ("OK" when it returns)."""
    try:
        call()
    except grpc.RpcError as error:
        return str(error.code().name)
    return "OK"


def discover(args: dict[str, Any]) -> dict[str, Any]:
    """The SDK's own way in: probe, configure the default client, and use it."""
    target = resolve_local_ce_endpoint()
    client = kumiho.auto_configure_from_discovery()
    project = kumiho.create_project(args["project"], "made by the SDK's discovered client")
    return {"target": target, "default_is_configured": kumiho.get_client() is client,
            "project": {"name": project.name, "id": project.project_id},
            "projects": sorted(p.name for p in kumiho.get_projects()),
            "local_ce_client": kumiho.client_from_local_ce() is not None}


def graph(args: dict[str, Any]) -> dict[str, Any]:
    """Project → space → sub-space → item → revisions, read back every way the SDK offers."""
    kumiho.auto_configure_from_discovery()
    project = kumiho.create_project(args["project"])
    space = project.create_space("assets")
    sub = space.create_space("characters")
    item = sub.create_item("hero", "model")
    first = item.create_revision(metadata={"artist": "jane", "note": "blocking"})
    second = item.create_revision(metadata={"artist": "kim", "note": "final"})
    again = kumiho.get_item(item.kref.uri)
    return {
        "project": project.name, "space": space.path, "sub": sub.path, "item": item.kref.uri,
        "revisions": [first.kref.uri, second.kref.uri],
        "numbers": [first.number, second.number],
        # Kumiho's CE lists revisions newest first, its SDK's docs say by number: the test takes either order
        "read_revisions": sorted(({"number": r.number, "metadata": dict(r.metadata), "tags": sorted(r.tags)}
                                  for r in item.get_revisions()), key=lambda r: r["number"]),
        "by_number": item.get_revision(1).metadata.get("note"),
        "latest": item.get_latest_revision().number,
        "item_again": {"kref": again.kref.uri, "name": again.name, "kind": again.kind},
        "spaces": sorted(s.path for s in project.get_spaces()),
        "children": sorted(s.path for s in space.get_child_spaces()),
        "items": sorted(i.kref.uri for i in sub.get_items()),
        "get_space": project.get_space("assets").path,
        "duplicate_project": code_of(lambda: kumiho.create_project(args["project"])),
        "missing_item": code_of(lambda: kumiho.get_item(f"kref://{args['project']}/assets/none.model")),
    }


def tags(args: dict[str, Any]) -> dict[str, Any]:
    """``latest`` follows the newest revision; ``published`` moves when given to another one (it is no freeze);
    tags have a history (was_tagged, resolution by time)."""
    kumiho.auto_configure_from_discovery()
    project = kumiho.create_project(args["project"])
    item = project.create_space("shots").create_item("opening", "plate")
    r1 = item.create_revision(metadata={"take": "1"})
    r2 = item.create_revision(metadata={"take": "2"})
    r1.tag("published")
    time.sleep(0.05)
    between = datetime.now(UTC)
    time.sleep(0.05)
    published_first = item.get_revision_by_tag("published").number
    r2.tag("published")
    r3 = item.create_revision(metadata={"take": "3"})  # published does not freeze the item
    r3.tag("approved")
    approved_before = r3.has_tag("approved")
    r3.untag("approved")
    return {
        "published_first": published_first,
        "published_after_move": item.get_revision_by_tag("published").number,
        "r1_has_published": r1.has_tag("published"), "r2_has_published": r2.has_tag("published"),
        "r1_was_published": r1.was_tagged("published"),
        "published_at_between": item.get_revision_by_time(between, tag="published").number,
        "latest": item.get_revision_by_tag("latest").number,
        "approved_before_untag": approved_before, "approved_after_untag": r3.has_tag("approved"),
        "item": item.kref.uri, "revisions": [r.kref.uri for r in (r1, r2, r3)],
    }


def edges(args: dict[str, Any]) -> dict[str, Any]:
    """A depends on B depends on C: edges both ways, transitive traversal, the shortest path, impact."""
    kumiho.auto_configure_from_discovery()
    space = kumiho.create_project(args["project"]).create_space("deps")
    a, b, c = (space.create_item(name, "asset").create_revision() for name in ("shot", "rig", "texture"))
    a.create_edge(b, kumiho.DEPENDS_ON)
    b.create_edge(c, kumiho.DEPENDS_ON, {"why": "skin"})
    path = a.find_path_to(c)  # the first shortest path (a RevisionPath), None when there is none
    result = {
        "revisions": {"a": a.kref.uri, "b": b.kref.uri, "c": c.kref.uri},
        "a_out": [(e.target_kref.uri, e.edge_type) for e in a.get_edges(direction=kumiho.OUTGOING)],
        "c_in": [(e.source_kref.uri, e.edge_type) for e in c.get_edges(direction=kumiho.INCOMING)],
        "b_both": sorted(e.edge_type for e in b.get_edges(direction=kumiho.BOTH)),
        "edge_metadata": [dict(e.metadata) for e in c.get_edges(kumiho.DEPENDS_ON, kumiho.INCOMING)],
        "dependencies": sorted(k.uri for k in a.get_all_dependencies([kumiho.DEPENDS_ON]).revision_krefs),
        "dependents": sorted(k.uri for k in c.get_all_dependents([kumiho.DEPENDS_ON]).revision_krefs),
        "path": [step.revision_kref.uri for step in path.steps] if path else None,
        "path_depth": path.total_depth if path else None,
        "impact": sorted(iv.revision_kref.uri for iv in c.analyze_impact([kumiho.DEPENDS_ON])),
    }
    a.delete_edge(b, kumiho.DEPENDS_ON)
    result["a_out_after_delete"] = [e.target_kref.uri for e in a.get_edges(direction=kumiho.OUTGOING)]
    return result


def search(args: dict[str, Any]) -> dict[str, Any]:
    """Typo-tolerant search, scoped to the project, with kind filter and revision metadata."""
    kumiho.auto_configure_from_discovery()
    project = kumiho.create_project(args["project"])
    space = project.create_space("notes")
    for name, kind, metadata in (("transport-schedule", "note", {"summary": "the night bus timetable"}),
                                 ("quarterly-budget", "note", {"summary": "spending per team"}),
                                 ("transport-map", "diagram", {"summary": "lines and stations"})):
        space.create_item(name, kind).create_revision(metadata=metadata)

    def hits(query: str, **options: Any) -> list[dict[str, Any]]:
        return [{"kref": r.item.kref.uri, "score": r.score, "matched_in": list(r.matched_in)}
                for r in kumiho.search(query, context=args["project"], **options)]

    return {"typo": hits("transprot"), "exact": hits("budget"), "kind": hits("transport", kind="diagram"),
            "metadata": hits("timetable", include_revision_metadata=True), "nothing": hits("zzqxv")}


def attributes(args: dict[str, Any]) -> dict[str, Any]:
    """Attributes on a revision, an item and a space (the space addressed by its path)."""
    kumiho.auto_configure_from_discovery()
    space = kumiho.create_project(args["project"]).create_space("attrs")
    item = space.create_item("lamp", "prop")
    revision = item.create_revision()
    revision.set_attribute("status", "approved")
    item.set_attribute("owner", "jane")
    space.set_attribute("department", "lighting")
    kumiho.set_attribute(revision.kref.uri, "colour", "warm")
    before = {"revision": revision.get_attribute("status"), "item": item.get_attribute("owner"),
              "space": space.get_attribute("department"), "top_level": kumiho.get_attribute(revision.kref.uri,
                                                                                            "colour")}
    revision.delete_attribute("status")
    return {"before": before, "after_delete": revision.get_attribute("status"),
            "missing": item.get_attribute("nothing-here"), "revision": revision.kref.uri, "item": item.kref.uri}


def batch(args: dict[str, Any]) -> dict[str, Any]:
    """Batch creation in one call: new items created on the way, rows for one item in order, and the same batch
    sent again with its idempotency prefix writes nothing new."""
    kumiho.auto_configure_from_discovery()
    project = kumiho.create_project(args["project"])
    project.create_space("bulk")
    base = f"kref://{args['project']}/bulk"
    rows = [{"item_kref": f"{base}/mem-{i % 3}.memory", "metadata": {"title": f"row {i}"}} for i in range(5)]
    first, failures = kumiho.batch_create_revisions(rows, idempotency_prefix="backfill-1")
    replay, replay_failures = kumiho.batch_create_revisions(rows, idempotency_prefix="backfill-1")
    fetched, missing = kumiho.batch_get_revisions(item_krefs=[f"{base}/mem-{i}.memory" for i in range(3)]
                                                  + [f"{base}/absent.memory"])
    too_many = [{"item_kref": f"{base}/many.memory", "metadata": {"n": str(i)}} for i in range(201)]
    return {
        "first": [r.kref.uri if r else None for r in first], "failures": [list(f) for f in failures],
        "replay": [r.kref.uri if r else None for r in replay], "replay_failures": [list(f) for f in replay_failures],
        "counts": {f"mem-{i}": len(kumiho.get_item(f"{base}/mem-{i}.memory").get_revisions()) for i in range(3)},
        "fetched": sorted(r.kref.uri for r in fetched), "missing": missing,
        "over_cap": code_of(lambda: kumiho.batch_create_revisions(too_many)),
    }


def delete(args: dict[str, Any]) -> dict[str, Any]:
    """Deletions: a revision, an item (refused without force while it has revisions, deprecated, then removed), a
    space, and the project (archive, impact snapshot, hard delete)."""
    kumiho.auto_configure_from_discovery()
    project = kumiho.create_project(args["project"])
    space = project.create_space("trash")
    keep = space.create_item("keep", "note")
    keep.create_revision()
    second = keep.create_revision()
    second.delete(force=True)
    gone = space.create_item("gone", "note")
    gone.create_revision()
    unforced = code_of(lambda: gone.delete(force=False))  # an item with revisions needs force (or deprecation)
    gone.set_deprecated(True)
    deprecated = kumiho.get_item(gone.kref.uri).deprecated
    gone.delete(force=True)
    empty = project.create_space("empty")
    empty.delete(force=True)
    observed = {
        "keep_revisions": [r.number for r in keep.get_revisions()],
        "gone_unforced": unforced, "gone_deprecated": deprecated,
        "gone_after": code_of(lambda: kumiho.get_item(gone.kref.uri)),
        "space_after": code_of(lambda: project.get_space("empty")),
        "keep": keep.kref.uri, "gone": gone.kref.uri,
    }
    project.deprecate()
    impact = project.analyze_deletion()
    project.hard_delete(impact, confirmed=True)
    observed["project_after"] = kumiho.get_project(args["project"]) is None
    observed["project_listed"] = args["project"] in [p.name for p in kumiho.get_projects()]
    return observed


def mixed(args: dict[str, Any]) -> dict[str, Any]:
    """``clients`` SDK clients (each its own discovered client and gRPC channel) in threads of this process, each
    running a mixed flow for ``seconds``: create, tag, read by tag, search, edge, batch read. Every error is
    counted; the revisions each client created are returned so the test can look for lost writes."""
    clients, seconds, name = int(args["clients"]), float(args["seconds"]), args["project"]
    setup = kumiho.client_from_local_ce()
    assert setup is not None, "the local-CE probe found no appliance"
    with kumiho.use_client(setup):
        project = kumiho.create_project(name)
        for n in range(clients):
            project.create_space(f"c{n}")
    created: list[list[str]] = [[] for _ in range(clients)]
    operations = [0] * clients
    errors: list[str] = []
    start = threading.Barrier(clients, timeout=120)

    def run(n: int) -> None:
        client = kumiho.client_from_local_ce()
        try:
            assert client is not None, "the local-CE probe found no appliance"
            with kumiho.use_client(client):
                space = kumiho.get_project(name).get_space(f"c{n}")
                previous = None
                start.wait()
                deadline = time.monotonic() + seconds
                i = 0
                while time.monotonic() < deadline:
                    item = space.create_item(f"note-{i}", "note")
                    revision = item.create_revision(metadata={"text": f"client {n} note {i} about transport"})
                    revision.tag("published")
                    assert item.get_revision_by_tag("published").kref.uri == revision.kref.uri
                    kumiho.search("transprot", context=f"{name}/c{n}")
                    if previous is not None:
                        revision.create_edge(previous, kumiho.DERIVED_FROM)
                    found, missing = kumiho.batch_get_revisions(revision_krefs=[revision.kref.uri])
                    assert not missing and found[0].kref.uri == revision.kref.uri
                    created[n].append(revision.kref.uri)
                    previous = revision
                    operations[n] += 7 if i else 6
                    i += 1
        except Exception as error:  # every failure is reported, none ends the run silently
            errors.append(f"client {n}: {type(error).__name__}: {error}"[:500])
            start.abort()  # a client that fails before the start must not leave the others waiting

    threads = [threading.Thread(target=run, args=(n,)) for n in range(clients)]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - began
    return {"clients": clients, "operations": sum(operations), "per_client": operations, "errors": errors,
            "created": created, "elapsed_s": round(elapsed, 2)}


FLOWS = {f.__name__: f for f in (discover, graph, tags, edges, search, attributes, batch, delete, mixed)}

if __name__ == "__main__":
    flow, arguments = sys.argv[1], json.loads(sys.argv[2]) if len(sys.argv) > 2 else {}
    print(json.dumps(FLOWS[flow](arguments)))
