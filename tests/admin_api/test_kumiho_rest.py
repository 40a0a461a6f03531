"""Kumiho's REST subset at /api/v1 through Litestar's test client over the real app on real stores (Kùzu and
LanceDB in a tmp dir): every route, its errors (with the field named), and a replay of the calls Revka makes
(`revka memory list|get|stats|clear`, its dashboard's memory-graph fallback) decoded as Revka's client decodes
them (the structs of its src/gateway/kumiho_client.rs: required fields, strict types)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar.testing import TestClient

from appliance.app import Services, build_app, open_services
from appliance.config import load_settings
from appliance.graph.revisions import NewRevision
from tests.inprocess import serve_in_process
from tests.problems import problem as problem_body

API = "/api/v1"
_names = itertools.count()


@dataclass
class Rest:
    client: TestClient[Any]
    services: Services

    def op(self, operation: str, /, **args: Any) -> dict[str, Any]:
        """Seed the graph through the typed operations (what the MCP tools call)."""
        return self.services.perform(operation, args)

    def project(self) -> str:
        name = f"P{next(_names)}"
        self.op("kumiho_create_project", name=name)
        return name

    def memory(self, space: str, name: str, *revisions: dict[str, str], kind: str = "memory") -> tuple[str, list[str]]:
        item = self.op("kumiho_create_item", space_path=space, item_name=name, kind=kind)["item"]["kref"]
        revs = [self.op("kumiho_create_revision", item_kref=item, metadata=m)["revision"]["kref"] for m in revisions]
        return item, revs


@pytest.fixture(scope="module")
def rest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rest]:
    settings = load_settings(data_dir=Path(tmp_path_factory.mktemp("kumiho-rest")), search={"embedder": "hashing"})
    with open_services(settings) as services, TestClient(build_app(services), base_url="http://127.0.0.1") as client:
        yield Rest(client, services)


def problem(response: Any, status: int, field: str | None = None) -> dict[str, Any]:
    """The error answer: an RFC 9457 problem of that status naming the field (in ``field`` and in its detail)."""
    assert response.status_code == status, response.text
    error = problem_body(response)
    assert "Traceback" not in response.text
    if field is not None:
        assert error["field"] == field, error
        assert field in error["detail"], error
    return error


# -- Revka's client, as serde decodes: a field is required unless it is an Option or has #[serde(default)] --
def _opt_str(v: Any) -> bool:
    return v is None or isinstance(v, str)


def _str_map(v: Any) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and isinstance(x, str) for k, x in v.items())


def _i32(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and -2**31 <= v < 2**31


REQUIRED, OPTIONAL = True, False
STRUCTS: dict[str, dict[str, tuple[bool, Any]]] = {
    "ProjectResponse": {"name": (REQUIRED, str), "description": (OPTIONAL, _opt_str),
                        "deprecated": (OPTIONAL, bool), "created_at": (OPTIONAL, _opt_str),
                        "metadata": (OPTIONAL, _str_map)},
    "ItemResponse": {"kref": (REQUIRED, str), "name": (REQUIRED, str), "item_name": (REQUIRED, str),
                     "kind": (REQUIRED, str), "deprecated": (OPTIONAL, bool), "created_at": (OPTIONAL, _opt_str),
                     "author": (OPTIONAL, _opt_str), "username": (OPTIONAL, _opt_str),
                     "author_display": (OPTIONAL, _opt_str), "metadata": (OPTIONAL, _str_map)},
    "RevisionResponse": {"kref": (REQUIRED, str), "item_kref": (REQUIRED, str), "number": (REQUIRED, _i32),
                         "latest": (OPTIONAL, bool), "tags": (OPTIONAL, lambda v: all(isinstance(t, str) for t in v)),
                         "metadata": (OPTIONAL, _str_map), "deprecated": (OPTIONAL, bool),
                         "created_at": (OPTIONAL, _opt_str), "author": (OPTIONAL, _opt_str),
                         "username": (OPTIONAL, _opt_str), "author_display": (OPTIONAL, _opt_str)},
    "SpaceResponse": {"path": (REQUIRED, str), "name": (REQUIRED, str), "parent_path": (OPTIONAL, _opt_str),
                      "created_at": (OPTIONAL, _opt_str), "author": (OPTIONAL, _opt_str),
                      "username": (OPTIONAL, _opt_str), "author_display": (OPTIONAL, _opt_str)},
    "ArtifactResponse": {"kref": (REQUIRED, str), "name": (REQUIRED, str), "location": (REQUIRED, str),
                         "revision_kref": (REQUIRED, str), "item_kref": (OPTIONAL, _opt_str),
                         "deprecated": (OPTIONAL, bool), "created_at": (OPTIONAL, _opt_str),
                         "metadata": (OPTIONAL, _str_map)},
    "EdgeResponse": {"source_kref": (REQUIRED, str), "target_kref": (REQUIRED, str), "edge_type": (REQUIRED, str),
                     "created_at": (OPTIONAL, _opt_str), "metadata": (OPTIONAL, lambda v: v is None or _str_map(v))},
    "BundleMemberInfo": {"item_kref": (REQUIRED, str), "added_at": (OPTIONAL, _opt_str),
                         "added_by": (OPTIONAL, _opt_str),
                         "added_in_revision": (OPTIONAL, lambda v: v is None or _i32(v))},
}


def revka_decodes(value: Any, struct: str) -> dict[str, Any]:
    assert isinstance(value, dict), value
    for field, (required, check) in STRUCTS[struct].items():
        if field not in value:
            assert not required, f"{struct}.{field} missing in {value}"
            continue
        ok = isinstance(value[field], check) if isinstance(check, type) else check(value[field])
        assert ok, f"{struct}.{field} = {value[field]!r} does not decode"
    return value


def revka_list(response: Any, struct: str) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    body = response.json()
    assert isinstance(body, list), body
    return [revka_decodes(v, struct) for v in body]


# -- the replay of Revka's calls --------------------------------------------------------------------------------
@pytest.mark.parametrize("token", ["", "revka-service-token"], ids=["empty-token", "a-token"])
def test_revka_memory_cli_replay(rest: Rest, token: str) -> None:
    """`revka memory stats|list|get|clear` (src/memory/cli.rs) against the appliance, call for call."""
    h = {"X-Kumiho-Token": token, "Accept": "application/json"}
    c = rest.client
    project = f"RevkaMem{next(_names)}"
    space = f"/{project}/Memory"

    # ensure_space: POST /projects then POST /spaces; a 409 the second time means "already there"
    for expected in (201, 409):
        assert c.post(f"{API}/projects", json={"name": project}, headers=h).status_code == expected
        assert c.post(f"{API}/spaces", json={"parent_path": f"/{project}", "name": "Memory"},
                      headers=h).status_code == expected
    entries = {"db-host": ("the db is on 10.0.0.5", "core", "s1"), "standup": ("daily at 9", "daily", "s2")}
    for key, (content, category, session) in entries.items():
        rest.memory(space, key, {"key": key, "content": content, "category": category, "session_id": session,
                                 "kind": "memory"})
    rest.memory(space, "empty")  # an item without revisions: Revka skips it on the 404 of /revisions/latest

    # list: items (a superset), then each one's latest revision; content and category from its metadata
    items = revka_list(c.get(f"{API}/items", params={"space_path": space, "include_deprecated": "false",
                                                     "limit": "50", "offset": "0"}, headers=h), "ItemResponse")
    assert sorted(i["item_name"] for i in items) == ["db-host", "empty", "standup"]
    shown = {}
    for item in items:
        latest = c.get(f"{API}/revisions/latest", params={"item_kref": item["kref"]}, headers=h)
        if item["item_name"] == "empty":
            problem(latest, 404, "item_kref")
            continue
        assert latest.status_code == 200, latest.text
        rev = revka_decodes(latest.json(), "RevisionResponse")
        shown[rev["metadata"]["key"]] = (rev["metadata"]["content"], rev["metadata"]["category"],
                                         rev["metadata"]["session_id"])
    assert shown == entries

    # get: the slug through name_filter, the exact item_name picked client-side
    found = revka_list(c.get(f"{API}/items", params={"space_path": space, "name_filter": "db-host",
                                                     "include_deprecated": "false"}, headers=h), "ItemResponse")
    item = next(i for i in found if i["item_name"] == "db-host")
    rev = revka_decodes(c.get(f"{API}/revisions/latest", params={"item_kref": item["kref"]}, headers=h).json(),
                        "RevisionResponse")
    assert rev["metadata"]["content"] == "the db is on 10.0.0.5" and isinstance(rev["created_at"], str)

    # stats: the spaces under the project (recursive), then the items of the root and of each space
    spaces = revka_list(c.get(f"{API}/spaces", params={"parent_path": f"/{project}", "recursive": "true"},
                              headers=h), "SpaceResponse")
    assert [s["path"] for s in spaces] == [space]
    counts = {path: len(revka_list(c.get(f"{API}/items", params={"space_path": path, "include_deprecated": "false",
                                                                 "limit": "500", "offset": "0"}, headers=h),
                                   "ItemResponse"))
              for path in [f"/{project}"] + [s["path"] for s in spaces]}
    assert counts == {f"/{project}": 0, space: 3}

    # clear: list (limit 500), DELETE each with force=true, then nothing is left
    for item in revka_list(c.get(f"{API}/items", params={"space_path": space, "include_deprecated": "false",
                                                         "limit": "500", "offset": "0"}, headers=h), "ItemResponse"):
        gone = c.delete(f"{API}/items/by-kref", params={"kref": item["kref"], "force": "true"}, headers=h)
        assert gone.status_code == 200 and gone.json() == {"success": True, "item_kref": item["kref"]}
    assert c.get(f"{API}/items", params={"space_path": space}, headers=h).json() == []


@pytest.mark.parametrize("token", ["", "revka-service-token"], ids=["empty-token", "a-token"])
def test_revka_dashboard_memory_graph_fallback_replay(rest: Rest, token: str) -> None:
    """The dashboard's `GET /api/memory/graph` fallback (src/gateway/api_memory_graph.rs): spaces, items per
    space, full-text search, one batch of latest revisions, each revision's edges in both directions."""
    h = {"X-Kumiho-Token": token}
    c = rest.client
    project = rest.project()
    rest.op("kumiho_create_space", project_name=project, space_name="decisions")
    space = f"/{project}/decisions"
    a, (a1,) = rest.memory(space, "use-kuzu", {"title": "Use Kuzu", "summary": "embedded graph store"},
                           kind="decision")
    b, (b1,) = rest.memory(space, "use-lancedb", {"title": "Use LanceDB", "summary": "vector index"},
                           kind="decision")
    rest.op("kumiho_create_edge", source_kref=b1, target_kref=a1, edge_type="DEPENDS_ON")

    root = f"/{project}"
    spaces = [root] + [s["path"] for s in revka_list(
        c.get(f"{API}/spaces", params={"parent_path": root, "recursive": "true"}, headers=h), "SpaceResponse")]
    items = [i for path in spaces for i in revka_list(
        c.get(f"{API}/items", params={"space_path": path, "include_deprecated": "false", "limit": "200",
                                      "offset": "0"}, headers=h), "ItemResponse")]
    assert sorted(i["kref"] for i in items) == sorted([a, b])
    assert {i["kind"] for i in items} == {"decision"} and all(isinstance(i["created_at"], str) for i in items)

    hits = c.get(f"{API}/items/fulltext-search", params={"query": "LanceDB", "context": project, "kind": "",
                                                        "include_deprecated": "false"}, headers=h)
    assert hits.status_code == 200, hits.text
    assert [revka_decodes(hit["item"], "ItemResponse")["kref"] for hit in hits.json()][:1] == [b]
    assert all(isinstance(hit["score"], float) for hit in hits.json())

    batch = c.post(f"{API}/revisions/batch", json={"item_krefs": [a, b], "tag": "latest", "allow_partial": True},
                   headers=h)
    assert batch.status_code == 200, batch.text
    body = batch.json()
    assert (body["requested_count"], body["found_count"], body["not_found"]) == (2, 2, [])
    by_item = {revka_decodes(r, "RevisionResponse")["item_kref"]: r for r in body["revisions"]}
    assert by_item[a]["metadata"]["title"] == "Use Kuzu" and by_item[b]["metadata"]["summary"] == "vector index"
    assert by_item[a]["kref"] == a1

    edges = revka_list(c.get(f"{API}/edges", params={"kref": a1, "direction": "2"}, headers=h), "EdgeResponse")
    assert [(e["source_kref"], e["target_kref"], e["edge_type"]) for e in edges] == [(b1, a1, "DEPENDS_ON")]


def test_revka_reads_projects_and_tolerates_existing_ones(rest: Rest) -> None:
    """Asset browser / proxy: GET /projects; create_project on an existing name is a 409 Revka turns into OK."""
    name = f"Assets{next(_names)}"
    made = rest.client.post(f"{API}/projects", json={"name": name, "description": "assets"})
    assert made.status_code == 201
    assert revka_decodes(made.json(), "ProjectResponse")["description"] == "assets"
    listed = revka_list(rest.client.get(f"{API}/projects", headers={"X-Kumiho-Token": ""}), "ProjectResponse")
    assert name in [p["name"] for p in listed]
    problem(rest.client.post(f"{API}/projects", json={"name": name}), 409, "name")


# -- every route: answers and errors ----------------------------------------------------------------------------
def test_projects_bad_input(rest: Rest) -> None:
    problem(rest.client.post(f"{API}/projects", json={}), 400, "name")
    problem(rest.client.post(f"{API}/projects", json={"name": "x" * 129}), 400, "name")
    problem(rest.client.post(f"{API}/projects", json={"name": "p", "description": "d" * 4097}), 400, "description")
    problem(rest.client.post(f"{API}/projects", json={"name": "has space"}), 400, "name")


def test_spaces_create_nested_list_and_errors(rest: Rest) -> None:
    c = rest.client
    project = rest.project()
    made = c.post(f"{API}/spaces", json={"parent_path": f"/{project}", "name": "a"})
    assert made.status_code == 201
    assert made.json() | {"created_at": None} == {
        "path": f"/{project}/a", "name": "a", "parent_path": f"/{project}", "type": "root", "created_at": None,
        "author": "local", "username": "local", "metadata": {}}
    assert c.post(f"{API}/spaces", json={"parent_path": f"/{project}/a", "name": "b"}).json()["parent_path"] == \
        f"/{project}/a"
    problem(c.post(f"{API}/spaces", json={"parent_path": f"/{project}/a", "name": "b"}), 409, "name")
    problem(c.post(f"{API}/spaces", json={"parent_path": "/NoSuchProject", "name": "b"}), 404, "parent_path")
    problem(c.post(f"{API}/spaces", json={"parent_path": f"/{project}", "name": "bad name"}), 400, "name")
    problem(c.post(f"{API}/spaces", json={"parent_path": "no-slash//x", "name": "b"}), 400, "parent_path")
    problem(c.post(f"{API}/spaces", json={"parent_path": f"/{project}"}), 400, "name")

    children = c.get(f"{API}/spaces", params={"parent_path": f"/{project}"}).json()
    assert [s["path"] for s in children] == [f"/{project}/a"]
    every = c.get(f"{API}/spaces", params={"parent_path": f"/{project}", "recursive": "true"}).json()
    assert [s["path"] for s in every] == [f"/{project}/a", f"/{project}/a/b"]
    roots = c.get(f"{API}/spaces").json()
    assert {"path": f"/{project}", "parent_path": "/"}.items() <= next(
        s for s in roots if s["path"] == f"/{project}").items()
    problem(c.get(f"{API}/spaces", params={"parent_path": f"/{project}/nope"}), 404)
    problem(c.get(f"{API}/spaces", params={"parent_path": "/" + "x" * 600}), 400, "parent_path")
    problem(c.get(f"{API}/spaces", params={"recursive": "maybe"}), 400, "recursive")


def test_items_paging_filters_and_bounds(rest: Rest) -> None:
    c = rest.client
    project = rest.project()
    rest.op("kumiho_create_space", project_name=project, space_name="s")
    space = f"/{project}/s"
    krefs = [rest.memory(space, f"n{i}", kind="fact" if i % 2 else "note")[0] for i in range(5)]
    rest.op("kumiho_deprecate_item", item_kref=krefs[4])

    def names(**params: Any) -> list[str]:
        response = c.get(f"{API}/items", params={"space_path": space, **params})
        assert response.status_code == 200, response.text
        return [i["item_name"] for i in response.json()]

    assert names() == ["n0", "n1", "n2", "n3"]
    assert names(include_deprecated="true") == ["n0", "n1", "n2", "n3", "n4"]
    pages = [names(limit=2, offset=o, include_deprecated="true") for o in (0, 2, 4, 6)]
    assert pages == [["n0", "n1"], ["n2", "n3"], ["n4"], []]
    assert names(kind_filter="fact") == ["n1", "n3"]
    assert names(name_filter="2") == ["n2"]
    one = c.get(f"{API}/items", params={"space_path": space, "limit": 1}).json()[0]
    assert one == {**one, "kref": krefs[0], "name": "n0.note", "item_name": "n0", "kind": "note",
                   "space": f"{project}/s", "deprecated": False, "metadata": {}}

    for params in ({"limit": 0}, {"limit": 5001}, {"offset": -1}, {"offset": 100_001}, {"name_filter": "x" * 257}):
        problem(c.get(f"{API}/items", params={"space_path": space, **params}), 400, next(iter(params)))
    problem(c.get(f"{API}/items"), 400, "space_path")  # required
    problem(c.get(f"{API}/items", params={"space_path": f"/{project}/missing"}), 404, "space_path")
    problem(c.get(f"{API}/items", params={"space_path": "bad//path"}), 400, "space_path")


def test_items_pages_past_the_stores_page_size(rest: Rest) -> None:
    """`revka memory list --limit 600` asks for 1200 items; the store pages by 1000 at most."""
    project = rest.project()
    rest.op("kumiho_create_space", project_name=project, space_name="big")
    rest.services.graph.create_revisions([NewRevision(f"kref://{project}/big/e{i:04d}.memory", {"i": str(i)})
                                          for i in range(1205)])

    def names(**params: Any) -> list[str]:
        response = rest.client.get(f"{API}/items", params={"space_path": f"/{project}/big", **params})
        assert response.status_code == 200, response.text
        return [i["item_name"] for i in response.json()]

    every = [f"e{i:04d}" for i in range(1205)]
    assert names(limit=1200) == every[:1200]
    assert names(limit=5000) == every
    assert names(limit=200, offset=1100) == every[1100:]
    assert names(limit=1000, offset=999) == every[999:]


def test_item_by_kref_and_delete(rest: Rest) -> None:
    c = rest.client
    project = rest.project()
    rest.op("kumiho_create_space", project_name=project, space_name="s")
    item, _ = rest.memory(f"/{project}/s", "zebra-crossing", {"title": "zebra crossing near the quarry"})
    bare, _ = rest.memory(f"/{project}/s", "bare")

    got = c.get(f"{API}/items/by-kref", params={"kref": item})
    assert got.status_code == 200 and got.json()["kref"] == item and got.json()["name"] == "zebra-crossing.memory"
    problem(c.get(f"{API}/items/by-kref", params={"kref": f"kref://{project}/s/nope.memory"}), 404, "kref")
    problem(c.get(f"{API}/items/by-kref", params={"kref": "not a kref"}), 400, "kref")
    problem(c.get(f"{API}/items/by-kref"), 400, "kref")
    problem(c.get(f"{API}/items/by-kref", params={"kref": "k" * 1025}), 400, "kref")

    def found() -> list[str]:
        hits = c.get(f"{API}/items/fulltext-search", params={"query": "zebra quarry", "context": project})
        assert hits.status_code == 200, hits.text
        return [h["item"]["kref"] for h in hits.json()]

    assert found() == [item]
    problem(c.delete(f"{API}/items/by-kref", params={"kref": item}), 409, "kref")  # revisions, no force
    assert c.delete(f"{API}/items/by-kref", params={"kref": bare}).json() == {"success": True, "item_kref": bare}
    assert c.delete(f"{API}/items/by-kref", params={"kref": item, "force": "true"}).status_code == 200
    problem(c.get(f"{API}/items/by-kref", params={"kref": item}), 404, "kref")
    assert found() == []
    problem(c.delete(f"{API}/items/by-kref", params={"kref": item, "force": "true"}), 404, "kref")


def test_deprecate_and_restore_an_item(rest: Rest) -> None:
    """Revka's deprecate_item (skills, teams): POST /items/deprecate?kref=…&deprecated=…, no body; the item back."""
    c = rest.client
    project = rest.project()
    rest.op("kumiho_create_space", project_name=project, space_name="Skills")
    item, _ = rest.memory(f"/{project}/Skills", "example", {"title": "an example skill"}, kind="skill")
    h = {"X-Kumiho-Token": ""}

    gone = c.post(f"{API}/items/deprecate", params={"kref": item, "deprecated": "true"}, headers=h)
    assert gone.status_code == 200 and revka_decodes(gone.json(), "ItemResponse")["deprecated"] is True
    assert c.get(f"{API}/items", params={"space_path": f"/{project}/Skills"}).json() == []
    back = c.post(f"{API}/items/deprecate", params={"kref": item, "deprecated": "false"}, headers=h)
    assert back.status_code == 200 and back.json()["deprecated"] is False
    assert [i["kref"] for i in c.get(f"{API}/items", params={"space_path": f"/{project}/Skills"}).json()] == [item]
    problem(c.post(f"{API}/items/deprecate", params={"kref": f"kref://{project}/Skills/none.skill"}), 404, "kref")
    problem(c.post(f"{API}/items/deprecate", params={"kref": f"{item}?r=1"}), 400, "kref")
    problem(c.post(f"{API}/items/deprecate"), 400, "kref")


def test_fulltext_search_filters_and_bounds(rest: Rest) -> None:
    c = rest.client
    project = rest.project()
    rest.op("kumiho_create_space", project_name=project, space_name="s")
    fact, _ = rest.memory(f"/{project}/s", "heron", {"title": "grey heron by the pond"}, kind="fact")
    note, _ = rest.memory(f"/{project}/s", "heron-note", {"title": "heron sighting"}, kind="note")
    rest.op("kumiho_deprecate_item", item_kref=note)

    def krefs(**params: Any) -> set[str]:
        response = c.get(f"{API}/items/fulltext-search", params={"query": "heron", "context": project, **params})
        assert response.status_code == 200, response.text
        return {h["item"]["kref"] for h in response.json()}

    assert krefs() == {fact}
    assert krefs(include_deprecated="true") == {fact, note}
    assert krefs(include_deprecated="true", kind="note") == {note}
    assert krefs(context="SomeOtherProject") == set()
    assert len(krefs(include_deprecated="true", limit=1)) == 1
    for params, field in (({}, "query"), ({"query": ""}, "query"), ({"query": "q" * 2001}, "query"),
                          ({"query": "q", "limit": 0}, "limit"), ({"query": "q", "limit": 1001}, "limit"),
                          ({"query": "q", "context": "c" * 513}, "context"),
                          ({"query": "q", "kind": "k" * 129}, "kind")):
        problem(c.get(f"{API}/items/fulltext-search", params=params), 400, field)


def test_revisions_latest_by_kref_and_tags(rest: Rest) -> None:
    c = rest.client
    project = rest.project()
    rest.op("kumiho_create_space", project_name=project, space_name="s")
    item, (r1, r2) = rest.memory(f"/{project}/s", "m", {"v": "1"}, {"v": "2"})
    rest.op("kumiho_tag_revision", revision_kref=r1, tag="published")

    listed = c.get(f"{API}/revisions", params={"item_kref": item}).json()
    assert [(r["number"], r["latest"], r["metadata"]) for r in listed] == [(1, False, {"v": "1"}),
                                                                           (2, True, {"v": "2"})]
    latest = c.get(f"{API}/revisions/latest", params={"item_kref": item}).json()
    assert (latest["kref"], latest["item_kref"], latest["number"], latest["latest"]) == (r2, item, 2, True)
    assert c.get(f"{API}/revisions/by-kref", params={"kref": r1}).json()["number"] == 1
    assert c.get(f"{API}/revisions/by-kref", params={"kref": item, "t": "published"}).json()["kref"] == r1
    assert c.get(f"{API}/revisions/by-kref", params={"kref": item, "tag": "latest"}).json()["kref"] == r2

    missing = f"kref://{project}/s/none.memory"
    problem(c.get(f"{API}/revisions", params={"item_kref": missing}), 404, "item_kref")
    problem(c.get(f"{API}/revisions/latest", params={"item_kref": missing}), 404, "item_kref")
    problem(c.get(f"{API}/revisions/by-kref", params={"kref": f"{item}?r=9"}), 404, "kref")
    problem(c.get(f"{API}/revisions/by-kref", params={"kref": "::"}), 400, "kref")
    problem(c.get(f"{API}/revisions/by-kref", params={"kref": item, "t": "x" * 129}), 400, "t")


def test_revision_by_kref_takes_a_tag_as_a_tag_never_as_kref_text(rest: Rest) -> None:
    """t/tag select by the tag itself: `t=a&r=1` is the tag "a&r=1" (tags may hold '&' and '='), not revision 1;
    a tag against the tag rules, or a tag with a kref that already chooses its revision, is refused naming it."""
    c = rest.client
    project = rest.project()
    rest.op("kumiho_create_space", project_name=project, space_name="s")
    item, (r1, r2) = rest.memory(f"/{project}/s", "m", {"v": "1"}, {"v": "2"})

    for name in ("t", "tag"):
        found = problem(c.get(f"{API}/revisions/by-kref", params={"kref": item, name: "a&r=1"}), 404, "kref")
        assert "holds tag 'a&r=1'" in found["detail"], found  # no revision holds that tag: not revision 1
    rest.op("kumiho_tag_revision", revision_kref=r2, tag="a&r=1")
    for name in ("t", "tag"):
        held = c.get(f"{API}/revisions/by-kref", params={"kref": item, name: "a&r=1"})
        assert held.status_code == 200 and held.json()["kref"] == r2, held.text

    for name in ("t", "tag"):
        for bad in (" padded", "tab\there", "x" * 129):
            refused = problem(c.get(f"{API}/revisions/by-kref", params={"kref": item, name: bad}), 400, name)
            assert refused["detail"].startswith(f"{name}: "), refused
        for chosen in (r1, f"{item}?t=latest", f"{r1}&a=data"):
            refused = problem(c.get(f"{API}/revisions/by-kref", params={"kref": chosen, name: "latest"}), 400, name)
            assert "item kref" in refused["detail"], refused
    problem(c.get(f"{API}/revisions/by-kref", params={"kref": f"kref://{project}/s/none.memory", "t": "latest"}),
            404, "kref")
    problem(c.get(f"{API}/revisions/by-kref", params={"kref": "::", "t": "latest"}), 400, "kref")


def test_revisions_batch(rest: Rest) -> None:
    c = rest.client
    project = rest.project()
    rest.op("kumiho_create_space", project_name=project, space_name="s")
    items = [rest.memory(f"/{project}/s", f"m{i}", {"i": str(i)}) for i in range(3)]
    missing = f"kref://{project}/s/none.memory"

    body = c.post(f"{API}/revisions/batch", json={"item_krefs": [items[0][0], missing],
                                                  "revision_krefs": [items[1][1][0]]}).json()
    assert (body["requested_count"], body["found_count"], body["not_found"]) == (3, 2, [missing])
    assert {r["kref"] for r in body["revisions"]} == {items[0][1][0], items[1][1][0]}
    problem(c.post(f"{API}/revisions/batch", json={"item_krefs": [missing], "allow_partial": False}), 404, "item_krefs")
    problem(c.post(f"{API}/revisions/batch", json={}), 400, "revision_krefs")
    # more than one operation call's worth (100) is answered in one response
    many = [items[2][0]] * 250
    body = c.post(f"{API}/revisions/batch", json={"item_krefs": many}).json()
    assert (body["requested_count"], body["found_count"]) == (250, 250)
    # the bound: 1000 krefs in all
    too_many = {"item_krefs": many * 3, "revision_krefs": [items[2][1][0]] * 251}
    problem(c.post(f"{API}/revisions/batch", json=too_many), 400, "item_krefs")
    problem(c.post(f"{API}/revisions/batch", json={"item_krefs": [items[2][0]] * 1001}), 400, "item_krefs")
    problem(c.post(f"{API}/revisions/batch", json={"item_krefs": ["k" * 1025]}), 400, "item_krefs.0")


def test_edges_bundles_artifacts(rest: Rest) -> None:
    c = rest.client
    project = rest.project()
    rest.op("kumiho_create_space", project_name=project, space_name="s")
    space = f"/{project}/s"
    a, (a1,) = rest.memory(space, "a", {"x": "1"})
    b, (b1,) = rest.memory(space, "b", {"x": "2"})
    rest.op("kumiho_create_edge", source_kref=a1, target_kref=b1, edge_type="DEPENDS_ON",
            metadata={"why": "test"})
    rest.op("kumiho_create_edge", source_kref=a1, target_kref=b1, edge_type="REFERENCED")

    def edges(kref: str, **params: Any) -> list[tuple[str, str, str]]:
        response = c.get(f"{API}/edges", params={"kref": kref, **params})
        assert response.status_code == 200, response.text
        return sorted((e["source_kref"], e["target_kref"], e["edge_type"]) for e in response.json())

    both = [(a1, b1, "DEPENDS_ON"), (a1, b1, "REFERENCED")]
    assert edges(a1) == both  # Kumiho's default: outgoing
    assert edges(a1, direction="1") == [] and edges(b1, direction="incoming") == both
    assert edges(b1, direction="2", edge_type="DEPENDS_ON") == [(a1, b1, "DEPENDS_ON")]
    assert edges(a) == both  # an item kref: its latest revision
    typed = c.get(f"{API}/edges", params={"kref": a1, "edge_type": "DEPENDS_ON"}).json()
    assert typed[0]["metadata"] == {"why": "test"}
    problem(c.get(f"{API}/edges", params={"kref": a1, "direction": "3"}), 400, "direction")
    problem(c.get(f"{API}/edges", params={"kref": f"kref://{project}/s/none.memory"}), 404, "kref")

    bundle = rest.op("kumiho_create_bundle", space_path=space, bundle_name="set")["bundle"]["kref"]
    for member in (a, b):
        rest.op("kumiho_add_bundle_member", bundle_kref=bundle, item_kref=member)
    members = c.get(f"{API}/bundles/members", params={"bundle_kref": bundle}).json()
    assert members["total_count"] == 2
    assert sorted(m["item_kref"] for m in members["members"]) == [a, b]
    for m in members["members"]:
        revka_decodes(m, "BundleMemberInfo")
    problem(c.get(f"{API}/bundles/members", params={"bundle_kref": a}), 400, "bundle_kref")  # not a bundle
    problem(c.get(f"{API}/bundles/members", params={"bundle_kref": f"kref://{project}/s/none.bundle"}), 404,
            "bundle_kref")

    rest.op("kumiho_create_artifact", revision_kref=a1, name="notes.md", location="/tmp/notes.md")
    listed = revka_list(c.get(f"{API}/artifacts", params={"revision_kref": a1}), "ArtifactResponse")
    assert [(x["name"], x["location"], x["revision_kref"], x["item_kref"]) for x in listed] == \
        [("notes.md", "/tmp/notes.md", a1, a)]
    assert c.get(f"{API}/artifacts", params={"revision_kref": b1}).json() == []
    one = c.get(f"{API}/artifacts/by-kref", params={"kref": f"{a1}&a=notes.md"})
    assert revka_decodes(one.json(), "ArtifactResponse") == listed[0]
    assert c.get(f"{API}/artifacts/by-kref", params={"revision_kref": a1, "name": "notes.md"}).json() == listed[0]
    problem(c.get(f"{API}/artifacts/by-kref", params={"kref": f"{a1}&a=other.md"}), 404, "kref")
    problem(c.get(f"{API}/artifacts/by-kref", params={"revision_kref": a1, "name": "x"}), 404, "revision_kref")
    problem(c.get(f"{API}/artifacts/by-kref", params={"revision_kref": a1}), 400, "kref")
    at = c.get(f"{API}/artifacts/by-location", params={"location": "/tmp/notes.md"}).json()
    assert [x["kref"] for x in at] == [listed[0]["kref"]]
    problem(c.get(f"{API}/artifacts/by-location"), 400, "location")
    got = c.get(f"{API}/bundles/by-kref", params={"kref": bundle})
    assert revka_decodes(got.json(), "ItemResponse")["kind"] == "bundle"
    problem(c.get(f"{API}/bundles/by-kref", params={"kref": a}), 400, "kref")
    problem(c.get(f"{API}/artifacts", params={"revision_kref": f"{a}?r=7"}), 404, "revision_kref")


@pytest.mark.parametrize("route,param", [
    ("/items", "space_path"), ("/items/by-kref", "kref"), ("/items/fulltext-search", "query"),
    ("/revisions", "item_kref"), ("/revisions/latest", "item_kref"), ("/revisions/by-kref", "kref"),
    ("/edges", "kref"), ("/bundles/members", "bundle_kref"), ("/artifacts", "revision_kref"),
    ("/bundles/by-kref", "kref"), ("/artifacts/by-location", "location")])
def test_a_missing_parameter_is_named(rest: Rest, route: str, param: str) -> None:
    error = problem(rest.client.get(API + route), 400, param)
    assert error["code"] == "invalid_argument" and "required" in error["detail"]
    assert problem(rest.client.delete(f"{API}/items/by-kref"), 400, "kref")["code"] == "invalid_argument"


def test_openapi_documents_every_route_with_bounds(rest: Rest) -> None:
    schema = rest.client.get("/api/schema").json()
    paths = schema["paths"]
    expected = {("post", "/projects"), ("get", "/projects"), ("post", "/spaces"), ("get", "/spaces"),
                ("get", "/items"), ("get", "/items/by-kref"), ("delete", "/items/by-kref"),
                ("get", "/items/fulltext-search"), ("get", "/revisions"), ("get", "/revisions/latest"),
                ("get", "/revisions/by-kref"), ("post", "/revisions/batch"), ("get", "/edges"),
                ("get", "/bundles/members"), ("get", "/artifacts"), ("get", "/bundles/by-kref"),
                ("get", "/artifacts/by-kref"), ("get", "/artifacts/by-location"), ("post", "/items/deprecate")}
    for method, path in expected:
        route = paths[API + path][method]
        params = {p["name"]: p for p in route.get("parameters", [])}
        assert params["X-Kumiho-Token"]["in"] == "header" and not params["X-Kumiho-Token"]["required"]
        for p in params.values():  # every string parameter has a length bound, every integer a range
            if p["in"] == "header":  # the headers are bounded together (http.max_header_bytes)
                continue
            kind = p["schema"].get("type")
            if kind == "string" and "enum" not in p["schema"]:
                assert "maxLength" in p["schema"], (path, p)
            if kind == "integer":
                assert {"minimum", "maximum"} <= set(p["schema"]), (path, p)
    items = {p["name"]: p["schema"] for p in paths[f"{API}/items"]["get"]["parameters"]}
    assert (items["limit"]["minimum"], items["limit"]["maximum"], items["offset"]["maximum"]) == (1, 5000, 100_000)


ODD = ["", " ", "/", "//", "kref://", "kref://a", "kref://a/b", "kref://a/b/c.d?r=x", "kref://a/b/c.d?r=1&a=",
       "kref://a/b/c.d?t=", "kref://a/b/c.d?time=yesterday", "\u0000", "%", "..", "/../etc", "é" * 300, "*", "a" * 1024]


@pytest.mark.parametrize("route,param", [
    ("/items/by-kref", "kref"), ("/revisions", "item_kref"), ("/revisions/latest", "item_kref"),
    ("/revisions/by-kref", "kref"), ("/edges", "kref"), ("/bundles/members", "bundle_kref"),
    ("/artifacts", "revision_kref"), ("/items", "space_path"), ("/spaces", "parent_path"),
    ("/items/fulltext-search", "query"), ("/items/fulltext-search", "context"), ("/bundles/by-kref", "kref"),
    ("/artifacts/by-kref", "kref"), ("/artifacts/by-location", "location")])
def test_odd_values_are_4xx_never_5xx(rest: Rest, route: str, param: str) -> None:
    fixed = {"/items/fulltext-search": {"query": "x"}}.get(route, {})
    for value in ODD:
        response = rest.client.get(API + route, params={**fixed, param: value})
        assert response.status_code < 500, (route, param, value, response.text)
        if response.status_code >= 400:
            assert "Traceback" not in response.text and "kuzu" not in response.text.lower(), response.text


def test_odd_krefs_to_delete_are_4xx(rest: Rest) -> None:
    for value in ODD:
        response = rest.client.delete(f"{API}/items/by-kref", params={"kref": value, "force": "true"})
        assert 400 <= response.status_code < 500, (value, response.text)


def test_revka_calls_over_real_http_with_an_empty_token_header(tmp_path: Path) -> None:
    """The same routes over a real socket (uvicorn, the front door): `X-Kumiho-Token:` with an empty value, as
    Revka sends it when no service token is configured, is accepted."""
    with serve_in_process(tmp_path, None) as app, httpx.Client(base_url=app.base_url, timeout=30) as http:
        h = {"X-Kumiho-Token": "", "Accept": "application/json"}
        assert http.post(f"{API}/projects", json={"name": "Wire"}, headers=h).status_code == 201
        assert http.post(f"{API}/spaces", json={"parent_path": "/Wire", "name": "Memory"}, headers=h).status_code == 201
        assert http.post(f"{API}/spaces", json={"parent_path": "/Wire", "name": "Memory"}, headers=h).status_code == 409
        listed = http.get(f"{API}/items", params={"space_path": "/Wire/Memory", "include_deprecated": "false",
                                                  "limit": "50", "offset": "0"}, headers=h)
        assert listed.status_code == 200 and listed.json() == []
        spaces = http.get(f"{API}/spaces", params={"parent_path": "/Wire", "recursive": "true"}, headers=h)
        assert [s["path"] for s in spaces.json()] == ["/Wire/Memory"]
        gone = http.delete(f"{API}/items/by-kref", params={"kref": "kref://Wire/Memory/x.memory", "force": "true"},
                           headers=h)
        problem(gone, 404, "kref")


def test_odd_bodies_are_4xx_never_5xx(rest: Rest) -> None:
    c = rest.client
    for value in ODD:
        for route, body in ((f"{API}/projects", {"name": value}),
                            (f"{API}/spaces", {"parent_path": value, "name": "x"}),
                            (f"{API}/spaces", {"parent_path": "/CognitiveMemory", "name": value}),
                            (f"{API}/revisions/batch", {"item_krefs": [value]}),
                            (f"{API}/revisions/batch", {"revision_krefs": [value], "allow_partial": False}),
                            (f"{API}/revisions/batch", {"item_krefs": ["kref://CognitiveMemory/a/b.c"], "tag": value})):
            response = c.post(route, json=body)
            assert response.status_code < 500, (route, body, response.text)
    for body in (b"", b"{", b"[]", b'"x"', b"null", b'{"name": 5}', b'{"item_krefs": "k"}', b'{"item_krefs": [5]}'):
        for route in ("/projects", "/spaces", "/revisions/batch"):
            response = c.post(API + route, content=body, headers={"content-type": "application/json"})
            assert 400 <= response.status_code < 500, (route, body, response.text)
