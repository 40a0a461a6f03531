"""The graph structure tools through the official MCP client over real HTTP (the in-process appliance, real
Kùzu and LanceDB): a project built with spaces and items, searched, edited, deprecated, then taken apart piece
by piece — and search and recall see exactly what remains."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from tests.inprocess import InProcess, serve_in_process
from tests.mcp_api.clients import call

PROJECT, OTHER = "Atlas", "Keep"


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with serve_in_process(tmp_path_factory.mktemp("structure") / "data", None) as running:
        yield running


@asynccontextmanager
async def session_for(app: InProcess, project: str | None = None) -> AsyncIterator[ClientSession]:
    """An MCP session over HTTP; ``project`` is the client's default project (as a stdio shim sends it)."""
    headers = {"x-kumiho-project": project} if project else {}
    async with httpx.AsyncClient(headers=headers, timeout=60) as http, \
            streamable_http_client(app.base_url + "/mcp", http_client=http) as (read, write, *_), \
            ClientSession(read, write) as session:
        await session.initialize()
        yield session


def tool(app: InProcess, tool_name: str, /, client_project: str | None = None, **arguments: Any) -> dict[str, Any]:
    async def main() -> dict[str, Any]:
        async with session_for(app, client_project) as session:
            return await call(session, tool_name, **arguments)

    return anyio.run(main)


def error_of(answer: dict[str, Any]) -> tuple[str, str | None]:
    assert "error" in answer, answer
    return answer["error"]["code"], answer["error"].get("field")


def remember(app: InProcess, project: str, space: str, title: str, text: str, **extra: Any) -> str:
    stored = tool(app, "kumiho_memory_store", project=project, space_path=space, title=title, user_text=text,
                  memory_type="fact", **extra)
    assert stored["stored"] is True, stored
    return str(stored["revision_kref"])


def recalled(app: InProcess, project: str, query: str) -> set[str]:
    found = tool(app, "kumiho_memory_recall", client_project=project, query=query, limit=10)
    return {r["kref"].split("?r=")[0] for r in found["results"]}


def fulltext(app: InProcess, query: str, context: str = "") -> set[str]:
    found = tool(app, "kumiho_fulltext_search", query=query, context=context, limit=20)
    return {r["item"]["kref"] for r in found["results"]}


def test_projects_spaces_and_items_are_built_searched_and_taken_apart(app: InProcess) -> None:
    # -- a project: created once, listed, read ------------------------------------------------------------
    created = tool(app, "kumiho_create_project", name=PROJECT, description="A world atlas")
    assert created["created"] is True and created["project"]["name"] == PROJECT
    assert set(created["project"]) == {"project_id", "name", "description", "created_at", "updated_at",
                                       "deprecated", "allow_public"}
    assert error_of(tool(app, "kumiho_create_project", name=PROJECT)) == ("already_exists", "name")
    assert PROJECT in {p["name"] for p in tool(app, "kumiho_list_projects")["projects"]}
    assert tool(app, "kumiho_get_project", name=PROJECT)["description"] == "A world atlas"
    assert error_of(tool(app, "kumiho_get_project", name="Nowhere")) == ("not_found", "name")

    # -- spaces, nested; creating an existing one returns it ----------------------------------------------
    top = tool(app, "kumiho_create_space", project_name=PROJECT, space_name="characters")
    assert top["created"] is True and top["space"]["path"] == f"/{PROJECT}/characters"
    assert top["space"]["type"] == "root"
    nested = tool(app, "kumiho_create_space", project_name=PROJECT, space_name="heroes",
                  parent_path=f"/{PROJECT}/characters")
    assert (nested["space"]["path"], nested["space"]["type"]) == (f"/{PROJECT}/characters/heroes", "sub")
    again = tool(app, "kumiho_create_space", project_name=PROJECT, space_name="heroes",
                 parent_path=f"/{PROJECT}/characters")
    assert again["created"] is False and again["space"]["created_at"] == nested["space"]["created_at"]
    tool(app, "kumiho_create_space", project_name=PROJECT, space_name="places")
    assert error_of(tool(app, "kumiho_create_space", project_name=PROJECT, space_name="x",
                         parent_path="/Elsewhere/a")) == ("invalid_argument", "parent_path")
    assert error_of(tool(app, "kumiho_create_space", project_name=PROJECT, space_name="x",
                         parent_path=f"/{PROJECT}/missing")) == ("not_found", "parent_path")
    assert error_of(tool(app, "kumiho_create_space", project_name="Nowhere", space_name="x")) == (
        "not_found", "project_name")
    assert error_of(tool(app, "kumiho_create_space", project_name=PROJECT, space_name="has.dot")) == (
        "invalid_argument", "space_name")
    listed = tool(app, "kumiho_get_spaces", project_name=PROJECT)
    assert [s["path"] for s in listed["spaces"]] == [f"/{PROJECT}/characters", f"/{PROJECT}/places"]
    assert listed["count"] == 2 and listed["project"] == PROJECT
    every = tool(app, "kumiho_get_spaces", project_name=PROJECT, recursive=True)
    assert f"/{PROJECT}/characters/heroes" in {s["path"] for s in every["spaces"]}
    assert tool(app, "kumiho_get_space", space_path=f"/{PROJECT}/characters/heroes")["name"] == "heroes"
    assert error_of(tool(app, "kumiho_get_space", space_path=f"/{PROJECT}/nope")) == ("not_found", "space_path")

    # -- items: created with metadata; an existing one gets the metadata merged ------------------------------
    heroes = f"/{PROJECT}/characters/heroes"
    hero = tool(app, "kumiho_create_item", space_path=heroes, item_name="hero", kind="model",
                metadata={"stage": "draft"})
    assert hero["created"] is True and hero["item"]["kref"] == f"kref://{PROJECT}/characters/heroes/hero.model"
    merged = tool(app, "kumiho_create_item", space_path=heroes, item_name="hero", kind="model",
                  metadata={"owner": "ann"})
    assert merged["created"] is False and merged["item"]["metadata"] == {"stage": "draft", "owner": "ann"}
    tool(app, "kumiho_create_item", space_path=heroes, item_name="heroine", kind="texture")
    tool(app, "kumiho_create_item", space_path=f"/{PROJECT}/places", item_name="harbour", kind="model")
    assert error_of(tool(app, "kumiho_create_item", space_path=heroes, item_name="b", kind="bundle")) == (
        "invalid_argument", "kind")
    assert error_of(tool(app, "kumiho_create_item", space_path=heroes, item_name="two words", kind="x")) == (
        "invalid_argument", "item_name")
    hero_kref = hero["item"]["kref"]
    item = tool(app, "kumiho_get_item", kref=hero_kref)
    assert set(item) >= {"kref", "name", "item_name", "kind", "created_at", "author", "username", "metadata",
                         "deprecated"} and item["name"] == "hero.model"
    assert error_of(tool(app, "kumiho_get_item", kref=f"kref://{PROJECT}/characters/nobody.model"))[0] == "not_found"

    # -- memories in the project (and one in another project that stays) ------------------------------------
    lighthouse = remember(app, PROJECT, f"{PROJECT}/places", "Lighthouse keeper",
                          "The lighthouse keeper of the harbour rows a blue boat every morning.")
    glacier = remember(app, PROJECT, f"{PROJECT}/characters", "Glacier guide",
                       "The glacier guide carries a brass compass across the ice field.")
    kept = remember(app, OTHER, f"{OTHER}/notes", "Kept lighthouse note",
                    "Another lighthouse, in a different project, keeps its lamp lit through storms.")
    lighthouse_item, glacier_item, kept_item = (k.split("?r=")[0] for k in (lighthouse, glacier, kept))
    assert {lighthouse_item, kept_item} <= fulltext(app, "lighthouse")
    assert recalled(app, PROJECT, "lighthouse keeper boat") >= {lighthouse_item}

    resolved = tool(app, "kumiho_resolve_kref", kref=lighthouse)
    assert resolved["resolved"] is True and resolved["location"].endswith(".md")
    assert tool(app, "kumiho_get_revision_by_tag", item_kref=lighthouse_item)["kref"] == lighthouse
    assert error_of(tool(app, "kumiho_get_revision_by_tag", item_kref=lighthouse_item, tag="nope")) == (
        "not_found", "item_kref")

    # -- metadata on an item and on a revision -------------------------------------------------------------
    on_item = tool(app, "kumiho_set_metadata", kref=hero_kref, metadata={"stage": "final"})
    assert on_item == {"updated": True, "kref": hero_kref, "metadata": {"stage": "final", "owner": "ann"}}
    on_revision = tool(app, "kumiho_set_metadata", kref=glacier, metadata={"reviewed": "yes"})
    assert on_revision["kref"] == glacier and on_revision["metadata"]["reviewed"] == "yes"
    assert error_of(tool(app, "kumiho_set_metadata", kref=hero_kref, metadata={"n": 3})) == (
        "invalid_argument", "metadata.n")
    assert error_of(tool(app, "kumiho_set_metadata", kref=glacier + "&a=chat_io", metadata={"a": "b"})) == (
        "invalid_argument", "kref")

    # -- item search: context prefix or glob, name substring or glob, kind exact; auth_token ignored --------
    def search(**filters: Any) -> list[str]:
        return [i["item_name"] for i in tool(app, "kumiho_search_items", **filters)["items"]]

    assert search(context_filter=f"{PROJECT}/characters", name_filter="her*") == ["hero", "heroine"]
    assert search(context_filter="Atl*", name_filter="hero", kind_filter="model") == ["hero"]
    assert search(context_filter="*/heroes", auth_token="token-from-a-kumiho-client") == ["hero", "heroine"]
    assert search(context_filter=PROJECT, name_filter="*bour") == ["harbour"]
    answer = tool(app, "kumiho_search_items", context_filter=PROJECT, name_filter="hero", kind_filter="model",
                  include_metadata=True)
    assert answer["items"][0]["metadata"]["stage"] == "final" and answer["count"] == 1
    assert answer["filters"] == {"context": PROJECT, "name": "hero", "kind": "model"}
    assert "metadata" not in tool(app, "kumiho_search_items", context_filter=PROJECT)["items"][0]
    assert error_of(tool(app, "kumiho_search_items", name_filter="*a" * 9)) == ("invalid_argument", "name_filter")

    # -- deprecation hides an item from search; restoring brings it back -----------------------------------
    gone = tool(app, "kumiho_deprecate_item", item_kref=hero_kref)
    assert gone == {"updated": True, "item_kref": hero_kref, "deprecated": True}
    assert search(context_filter=PROJECT, name_filter="hero") == ["heroine"]
    tool(app, "kumiho_deprecate_item", item_kref=hero_kref, deprecated=False)
    assert search(context_filter=PROJECT, name_filter="hero") == ["hero", "heroine"]

    # -- deleting an item: its revisions need force; then search and recall no longer find it ----------------
    assert error_of(tool(app, "kumiho_delete_item", item_kref=glacier_item)) == ("conflict", "item_kref")
    deleted = tool(app, "kumiho_delete_item", item_kref=glacier_item, force=True)
    assert deleted == {"deleted": True, "item_kref": glacier_item, "force": True}
    assert glacier_item not in fulltext(app, "glacier compass")
    assert glacier_item not in recalled(app, PROJECT, "glacier guide compass")
    assert tool(app, "kumiho_delete_item", item_kref=f"kref://{PROJECT}/places/harbour.model")["deleted"] is True

    # -- deleting a space: a non-empty one needs force -------------------------------------------------------
    assert error_of(tool(app, "kumiho_delete_space", space_path=f"/{PROJECT}/characters")) == (
        "conflict", "space_path")
    assert tool(app, "kumiho_delete_space", space_path=f"/{PROJECT}/characters", force=True)["deleted"] is True
    assert error_of(tool(app, "kumiho_get_space", space_path=heroes))[0] == "not_found"
    assert error_of(tool(app, "kumiho_get_item", kref=hero_kref))[0] == "not_found"
    assert error_of(tool(app, "kumiho_delete_space", space_path=f"/{PROJECT}")) == ("invalid_argument", "space_path")

    # -- archiving the project: hidden from listings, search and recall; nothing removed ---------------------
    assert lighthouse_item in fulltext(app, "lighthouse keeper")
    archived = tool(app, "kumiho_delete_project", project_name=PROJECT)
    assert archived == {"deleted": True, "archived": True, "project_name": PROJECT, "force": False}
    assert PROJECT not in {p["name"] for p in tool(app, "kumiho_list_projects")["projects"]}
    assert tool(app, "kumiho_get_project", name=PROJECT)["deprecated"] is True
    assert fulltext(app, "lighthouse") == {kept_item}
    assert recalled(app, PROJECT, "lighthouse keeper boat") == set()
    assert recalled(app, OTHER, "lighthouse lamp storms") == {kept_item}
    assert search(context_filter=PROJECT) == []
    assert tool(app, "kumiho_get_item", kref=lighthouse_item)["kref"] == lighthouse_item  # still there
    assert error_of(tool(app, "kumiho_create_project", name=PROJECT))[0] == "already_exists"

    # -- deleting it for good: the impact snapshot, then the confirmation ----------------------------------
    first = tool(app, "kumiho_delete_project", project_name=PROJECT, force=True)
    assert first["deleted"] is False and first["requires_confirmation"] is True
    assert first["blockers"] == [] and f"kref://{PROJECT}/places" in first["descendants"]
    assert lighthouse_item in first["descendants"] and first["counts"]["revisions"] == 1
    assert len(first["impact_snapshot_hash"]) == 64 and first["impact_snapshot_id"][14] == "7"  # a UUIDv7
    assert tool(app, "kumiho_get_project", name=PROJECT)["name"] == PROJECT  # nothing deleted yet
    wrong = tool(app, "kumiho_delete_project", project_name=PROJECT, force=True, confirmed=True,
                 impact_snapshot_id=first["impact_snapshot_id"], impact_snapshot_hash="0" * 64)
    assert error_of(wrong) == ("conflict", "impact_snapshot_hash")
    assert error_of(tool(app, "kumiho_delete_project", project_name=PROJECT, force=True, confirmed=True,
                         impact_snapshot_id="not-a-uuid", impact_snapshot_hash=first["impact_snapshot_hash"])) == (
        "invalid_argument", "impact_snapshot_id")

    # another project now refers into this one: the old snapshot no longer holds, a new one names the blocker
    referring = remember(app, OTHER, f"{OTHER}/notes", "Derived lighthouse plan",
                         "A plan derived from the harbour lighthouse keeper's routine.",
                         source_revision_krefs=[lighthouse])
    stale = tool(app, "kumiho_delete_project", project_name=PROJECT, force=True, confirmed=True,
                 impact_snapshot_id=first["impact_snapshot_id"],
                 impact_snapshot_hash=first["impact_snapshot_hash"])
    assert error_of(stale) == ("conflict", "impact_snapshot_hash")
    blocked = tool(app, "kumiho_delete_project", project_name=PROJECT, force=True)
    assert blocked["blockers"] == [f"{referring} DERIVED_FROM {lighthouse}"]
    refused = tool(app, "kumiho_delete_project", project_name=PROJECT, force=True, confirmed=True,
                   impact_snapshot_id=blocked["impact_snapshot_id"],
                   impact_snapshot_hash=blocked["impact_snapshot_hash"])
    assert error_of(refused) == ("conflict", "project_name") and referring in refused["error"]["message"]
    tool(app, "kumiho_delete_item", item_kref=referring.split("?r=")[0], force=True)

    final = tool(app, "kumiho_delete_project", project_name=PROJECT, force=True)
    done = tool(app, "kumiho_delete_project", project_name=PROJECT, force=True, confirmed=True,
                impact_snapshot_id=final["impact_snapshot_id"], impact_snapshot_hash=final["impact_snapshot_hash"])
    assert done["deleted"] is True and done["force"] is True and done["removed"]["items"] == 1
    assert error_of(tool(app, "kumiho_get_project", name=PROJECT)) == ("not_found", "name")
    assert error_of(tool(app, "kumiho_get_item", kref=lighthouse_item))[0] == "not_found"
    assert error_of(tool(app, "kumiho_delete_project", project_name=PROJECT)) == ("not_found", "project_name")

    # -- what remains: exactly the other project's first memory, in the graph and in the search index --------
    assert fulltext(app, "lighthouse") == {kept_item}
    assert recalled(app, OTHER, "lighthouse") == {kept_item}
    assert app.services.index_worker.wait_idle()
    indexed = app.services.index.revision_krefs()
    assert not any(k.startswith(f"kref://{PROJECT}/") for k in indexed) and kept in indexed
    assert referring not in indexed and glacier not in indexed
    events = [e["routing_key"] for e in app.services.graph.events(limit=10_000)]
    assert {"project.archived", "project.deleted", "space.deleted", "item.deleted"} <= set(events)


def test_delete_project_refuses_confirmation_fields_that_would_be_ignored(app: InProcess) -> None:
    tool(app, "kumiho_create_project", name="Ledger")
    snapshot = tool(app, "kumiho_delete_project", project_name="Ledger", force=True)
    sid, digest = snapshot["impact_snapshot_id"], snapshot["impact_snapshot_hash"]
    cases = [  # (arguments, the field the refusal names)
        ({"confirmed": True}, "confirmed"),  # without force: it would only archive
        ({"confirmed": True, "impact_snapshot_id": sid, "impact_snapshot_hash": digest}, "confirmed"),
        ({"impact_snapshot_id": sid}, "impact_snapshot_id"),
        ({"impact_snapshot_hash": digest}, "impact_snapshot_hash"),
        ({"force": True, "confirmed": True}, "impact_snapshot_hash"),  # it would answer a fresh snapshot
        ({"force": True, "confirmed": True, "impact_snapshot_id": sid}, "impact_snapshot_hash"),
        ({"force": True, "confirmed": True, "impact_snapshot_hash": digest}, "impact_snapshot_id"),
        ({"force": True, "impact_snapshot_id": sid, "impact_snapshot_hash": digest}, "confirmed"),
    ]
    for arguments, field in cases:
        answer = tool(app, "kumiho_delete_project", project_name="Ledger", **arguments)
        assert error_of(answer) == ("invalid_argument", field), (arguments, answer)
        assert field in answer["error"]["message"].split(":")[0]
    project = tool(app, "kumiho_get_project", name="Ledger")  # none of them archived or deleted it
    assert project["name"] == "Ledger" and project["deprecated"] is False
    unforced = tool(app, "kumiho_delete_project", project_name="Ledger", confirmed=True)
    assert "confirmed needs force=true" in unforced["error"]["message"]
    done = tool(app, "kumiho_delete_project", project_name="Ledger", force=True, confirmed=True,
                impact_snapshot_id=sid, impact_snapshot_hash=digest)
    assert done["deleted"] is True and done["force"] is True


def test_malformed_calls_name_the_field(app: InProcess) -> None:
    cases = [
        ("kumiho_create_project", {"name": 7}, "name"),
        ("kumiho_create_project", {"name": "has space"}, "name"),
        ("kumiho_create_project", {"name": "x" * 129}, "name"),
        ("kumiho_delete_project", {"force": True}, "project_name"),
        ("kumiho_delete_project", {"project_name": "P", "impact_snapshot_hash": "f" * 65}, "impact_snapshot_hash"),
        ("kumiho_get_spaces", {}, "project_name"),
        ("kumiho_create_space", {"project_name": "P"}, "space_name"),
        ("kumiho_delete_space", {"space_path": "/P", "force": "yes"}, "force"),
        ("kumiho_get_item", {"kref": "not a kref"}, "kref"),
        ("kumiho_search_items", {"context_filter": "c" * 257}, "context_filter"),
        ("kumiho_create_item", {"space_path": "/P", "item_name": "a", "kind": "k", "metadata": "x"}, "metadata"),
        ("kumiho_delete_item", {"item_kref": ["a"]}, "item_kref"),
        ("kumiho_set_metadata", {"kref": "kref://P/a.b"}, "metadata"),
    ]
    for name, arguments, field in cases:
        answer = tool(app, name, **arguments)
        assert answer["error"]["field"] == field, (name, arguments, answer)
        assert answer["error"]["code"] in ("invalid_argument", "invalid_kref"), answer
        assert "Traceback" not in answer["error"]["message"]


def test_a_project_restored_after_archiving_is_found_again(tmp_path: Path) -> None:
    with serve_in_process(tmp_path / "data", None) as running:
        tool(running, "kumiho_create_project", name="Tide")
        stored = remember(running, "Tide", "Tide/notes", "Tide table", "High tide at the pier comes at noon.")
        item = stored.split("?r=")[0]
        tool(running, "kumiho_delete_project", project_name="Tide")
        assert item not in fulltext(running, "tide pier noon")
        running.services.graph.update_project("Tide", deprecated=False)  # no tool restores; the admin can
        assert item in fulltext(running, "tide pier noon")
