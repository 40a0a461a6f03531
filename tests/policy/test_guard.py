"""The read-only guard on a real graph store: which doors it refuses, what counts as touching a namespace
(its space, spaces under it, the containers that hold it, both ends of an edge, bulk writes), and that a refused
transaction leaves nothing behind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from appliance.core.caller import Caller, calling
from appliance.errors import PermissionDenied
from appliance.graph import GraphStore, NewEdge, NewRevision
from appliance.graph.write_policy import WritePolicy
from appliance.memory.policy import ReadOnlyNamespaces
from appliance.server.callers import client_of, door_of

P = "CognitiveMemory"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[GraphStore]:
    with GraphStore.open(tmp_path / "g.kuzu", buffer_pool_mb=64, readers=1) as graph:
        graph.ensure_space(f"/{P}/Memory/vault/deep")
        graph.ensure_space(f"/{P}/Memory/open")
        graph.ensure_space("/Other/Memory/vault")
        graph.create_item(f"/{P}/Memory", "root-entry", "memory")
        graph.create_item(f"/{P}/Memory/vault", "kept", "memory")
        graph.create_revision(f"kref://{P}/Memory/vault/kept.memory")
        graph.create_item(f"/{P}/Memory/open", "free", "memory")
        graph.create_revision(f"kref://{P}/Memory/open/free.memory")
        graph.policy = WritePolicy(ReadOnlyNamespaces.of(P, ["vault"]), audit=True)
        yield graph


@pytest.mark.parametrize("door", ["mcp", "memory_api", "kumiho_rest", "console", "grpc", "maintenance",
                                  "internal"])
@pytest.mark.parametrize("operation", ["op", "import", "restore"])
def test_every_door_and_operation_is_refused(store: GraphStore, door: Any, operation: str) -> None:
    """No exemption: an import or a restore job (whatever door queued it) is refused like any other write."""
    with calling(Caller(door, "c", operation)), pytest.raises(PermissionDenied, match="'vault' is read-only"):
        store.create_item(f"/{P}/Memory/vault", "new", "memory")


def test_what_touches_a_namespace(store: GraphStore) -> None:
    refused = [
        lambda: store.create_item(f"/{P}/Memory/vault/deep", "x", "memory"),  # a space under the namespace's
        lambda: store.ensure_space(f"/{P}/Memory/vault/deeper"),
        lambda: store.delete_space(f"/{P}/Memory", force=True),  # a container that holds it
        lambda: store.delete_project(P, force=True),
        lambda: store.delete_project(P),  # archiving hides it
        lambda: store.set_attribute(f"/{P}/Memory/vault", "owner", "me"),  # the space itself
        lambda: store.create_edge(f"kref://{P}/Memory/open/free.memory?r=1", f"kref://{P}/Memory/vault/kept.memory?r=1",
                                  "REFERENCED"),  # the target end
        lambda: store.create_revisions([NewRevision(f"kref://{P}/Memory/open/free.memory"),
                                        NewRevision(f"kref://{P}/Memory/vault/kept.memory")]),  # bulk
        lambda: store.create_edges([NewEdge(f"kref://{P}/Memory/open/free.memory?r=1",
                                            f"kref://{P}/Memory/vault/kept.memory?r=1", "REFERENCED")]),
    ]
    events, rows = store.last_event_seq(), len(store.audit_entries())
    for index, write in enumerate(refused):
        with pytest.raises(PermissionDenied):
            write()
        assert store.last_event_seq() == events, f"write {index} left a change"
    assert len(store.audit_entries()) == rows
    # the bulk write's other row is gone too
    assert store.revision_by_tag(f"kref://{P}/Memory/open/free.memory", "latest").number == 1
    assert store.get_project(P).deprecated is False
    # not the namespace: the default namespace's own space, another namespace, another project's Memory space
    store.create_item(f"/{P}/Memory", "root-2", "memory")
    store.create_item(f"/{P}/Memory/open", "free-2", "memory")
    store.create_item("/Other/Memory/vault", "elsewhere", "memory")
    store.delete_space(f"/{P}/Memory/open", force=True)


def test_a_read_only_default_namespace_leaves_the_others_writable(store: GraphStore) -> None:
    store.policy = WritePolicy(ReadOnlyNamespaces.of(P, ["default"]))
    with pytest.raises(PermissionDenied, match="'default' is read-only"):
        store.create_revision(f"kref://{P}/Memory/root-entry.memory")
    store.create_revision(f"kref://{P}/Memory/vault/kept.memory")


def test_the_door_comes_from_the_route() -> None:
    class Handler:
        def __init__(self, opt: dict[str, str]) -> None:
            self.opt = opt

    assert door_of({"path": "/api/v1/memories", "route_handler": Handler({})}) == "memory_api"
    assert door_of({"path": "/api/v1/memories/abc", "route_handler": Handler({})}) == "memory_api"
    assert door_of({"path": "/api/v1/memoriesx", "route_handler": Handler({})}) == "console"
    assert door_of({"path": "/api/v1/items", "route_handler": Handler({"door": "kumiho_rest"})}) == "kumiho_rest"
    assert door_of({"path": "/api/v1/deprecate", "route_handler": Handler({})}) == "console"


def test_the_client_label_is_bounded_and_holds_no_credential() -> None:
    assert len(client_of({"headers": [(b"user-agent", b"agent/1 " + b"x" * 500)]})) == 200
    label = client_of({"headers": [(b"x-kumiho-client", b"bot/2 sk-proj-abcdefghijklmnopqrstuvwxyz0123456789AB"),
                                   (b"user-agent", b"ua/1")]})
    assert label.startswith("bot/2 ") and "abcdefghij" not in label and "[secret]" in label
    assert client_of({"headers": [(b"user-agent", b"ua/1\x00\n")]}) == "ua/1"
