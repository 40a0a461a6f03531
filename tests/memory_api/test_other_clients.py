"""Entries stored through the Memory API are the memory every other client reads: the MCP tools recall them
(the official ``mcp`` client over real HTTP), and Revka's ``revka memory list|get|stats|clear`` (replayed call
for call, decoded as Revka's client decodes) reads them through Kumiho's REST subset."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from mcp.client.session import ClientSession

from tests.admin_api.test_kumiho_rest import revka_decodes, revka_list
from tests.inprocess import serve_in_process
from tests.mcp_api.clients import call, in_http_session
from tests.memory_api.conftest import API, Memories

KUMIHO = "/api/v1"


def test_the_mcp_engage_finds_an_entry_stored_through_the_memory_api(tmp_path: Path) -> None:
    with serve_in_process(tmp_path / "data", None, inference={"chat_model": "none"}) as app:
        stored = httpx.post(app.base_url + API, json={
            "key": "build-tool", "content": "The monorepo builds with Bazel and remote caching.",
            "category": "core", "importance": 0.9}, timeout=30)
        assert stored.status_code == 201, stored.text
        kref = stored.json()["kref"]

        async def steps(session: ClientSession) -> dict[str, Any]:
            return await call(session, "kumiho_memory_engage", query="which build tool does the monorepo use?")

        engaged = in_http_session(app.base_url, steps)
        found = [r for r in engaged["results"] if r["kref"].startswith(kref)]
        assert found, engaged
        assert "Bazel" in engaged["context"]


def test_revka_memory_list_get_stats_clear_read_memory_api_entries(mem: Memories) -> None:
    """`revka memory …` (src/memory/cli.rs) reads the default namespace's space, /<project>/Memory."""
    c = mem.client
    project = mem.services.settings.kumiho.default_project
    space = f"/{project}/Memory"
    entries = {"revka-db-host": ("the db is on db1", "core", "s1"), "Revka Standup": ("daily at 9", "daily", "s2")}
    for key, (content, category, session) in entries.items():
        mem.store(key, content, category=category, session_id=session)
    mem.store("revka-elsewhere", "in another namespace", namespace="revka-ns")

    # list: the space's items, then each one's latest revision; key, content and category from its metadata
    items = revka_list(c.get(f"{KUMIHO}/items", params={"space_path": space, "include_deprecated": "false",
                                                        "limit": "500", "offset": "0"}), "ItemResponse")
    shown = {}
    for item in items:
        latest = c.get(f"{KUMIHO}/revisions/latest", params={"item_kref": item["kref"]})
        assert latest.status_code == 200, latest.text
        meta = revka_decodes(latest.json(), "RevisionResponse")["metadata"]
        shown[meta["key"]] = (meta["content"], meta["category"], meta["session_id"])
    assert {k: v for k, v in shown.items() if k.startswith(("revka", "Revka"))} == entries

    # get: Revka slugs the key, filters items by name, picks the exact item_name
    slug = "revka-standup"  # slugify("Revka Standup")
    found = revka_list(c.get(f"{KUMIHO}/items", params={"space_path": space, "name_filter": slug,
                                                        "include_deprecated": "false"}), "ItemResponse")
    item = next(i for i in found if i["item_name"] == slug)
    rev = revka_decodes(c.get(f"{KUMIHO}/revisions/latest", params={"item_kref": item["kref"]}).json(),
                        "RevisionResponse")
    assert rev["metadata"]["key"] == "Revka Standup" and rev["metadata"]["content"] == "daily at 9"
    assert isinstance(rev["created_at"], str)

    # stats: the spaces under the project (recursive) and the items of each
    spaces = revka_list(c.get(f"{KUMIHO}/spaces", params={"parent_path": f"/{project}", "recursive": "true"}),
                        "SpaceResponse")
    counts = {s["path"]: len(revka_list(c.get(f"{KUMIHO}/items", params={
        "space_path": s["path"], "include_deprecated": "false", "limit": "500", "offset": "0"}), "ItemResponse"))
        for s in spaces}
    assert counts[space] == mem.count() and counts[f"{space}/revka-ns"] == mem.count(namespace="revka-ns") == 1

    # clear --key revka: the items whose name starts with the slug, DELETE each with force=true
    for item in items:
        if item["item_name"].startswith("revka"):
            gone = c.delete(f"{KUMIHO}/items/by-kref", params={"kref": item["kref"], "force": "true"})
            assert gone.status_code == 200, gone.text
    assert not [k for k in (e["key"] for e in c.get(API, params={"limit": 1000}).json()["entries"])
                if k.lower().startswith("revka")]
    assert c.get(f"{API}/revka-db-host").status_code == 404
