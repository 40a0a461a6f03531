"""The unmodified public Kumiho SDK (0.14.3, in .venv-kumiho) against a real appliance process: its own local-CE
discovery with no endpoint given, then every flow Kumiho's clients rely on, each checked through the appliance's
own REST API or MCP tools as well (one store, several doors)."""

from __future__ import annotations

from typing import Any

import httpx

from tests.kumiho_sdk.conftest import Appliance
from tests.kumiho_sdk_env import run_snippet, sdk_env
from tests.mcp_api.clients import call, in_http_session


def test_the_sdk_finds_the_appliance_by_its_local_ce_probe(appliance: Appliance, project_name: str) -> None:
    """No endpoint, no token: ``kumiho.auto_configure_from_discovery()`` probes ``/api/_live`` and speaks gRPC on
    the same port. The probe's default port (9190) is named by ``KUMIHO_LOCAL_SERVER_PORT`` here, as Revka's
    ``local_ce`` mode does, because a test never takes a fixed port."""
    seen = appliance.sdk("discover", "discover", project=project_name)
    assert seen["target"] == f"127.0.0.1:{appliance.port}" and seen["default_is_configured"]
    assert seen["local_ce_client"] and project_name in seen["projects"]
    assert project_name in [p["name"] for p in appliance.rest("/api/v1/projects")]


def test_the_endpoint_form_of_the_probe_and_a_bare_client(appliance: Appliance, project_name: str) -> None:
    """KUMIHO_LOCAL_SERVER_ENDPOINT, and ``_Client()`` with no argument at all (what the SDK's modules build)."""
    env = sdk_env(appliance.root / "endpoint", appliance.port, endpoint=True)
    seen = run_snippet(
        "import json, kumiho\n"
        "from kumiho.client import _Client\n"
        f"client = _Client()\nclient.create_project({project_name!r})\n"
        "print(json.dumps(sorted(p.name for p in client.get_projects())))", env=env)
    assert project_name in seen


def test_create_and_read_back_project_space_item_revisions(appliance: Appliance, project_name: str) -> None:
    seen = appliance.sdk("graph", "graph", project=project_name)
    item = f"kref://{project_name}/assets/characters/hero.model"
    assert seen["item"] == item and seen["numbers"] == [1, 2]
    assert seen["revisions"] == [f"{item}?r=1", f"{item}?r=2"]
    assert [(r["number"], r["metadata"]["artist"]) for r in seen["read_revisions"]] == [(1, "jane"), (2, "kim")]
    assert "latest" in seen["read_revisions"][1]["tags"] and "latest" not in seen["read_revisions"][0]["tags"]
    assert seen["by_number"] == "blocking" and seen["latest"] == 2
    assert seen["item_again"] == {"kref": item, "name": "hero.model", "kind": "model"}
    assert f"/{project_name}/assets" in seen["spaces"]
    assert seen["children"] == [f"/{project_name}/assets/characters"] and seen["items"] == [item]
    assert seen["get_space"] == f"/{project_name}/assets"
    assert seen["duplicate_project"] == "ALREADY_EXISTS" and seen["missing_item"] == "NOT_FOUND"

    assert appliance.rest("/api/v1/items/by-kref", kref=item)["kind"] == "model"
    revisions = appliance.rest("/api/v1/revisions", item_kref=item)
    assert [(r["number"], r["metadata"]["note"]) for r in revisions] == [(1, "blocking"), (2, "final")]
    spaces = appliance.rest("/api/v1/spaces", parent_path=f"/{project_name}", recursive=True)
    assert {s["path"] for s in spaces} == {f"/{project_name}/assets", f"/{project_name}/assets/characters"}


def test_tags_published_moves_and_tag_history(appliance: Appliance, project_name: str) -> None:
    seen = appliance.sdk("tags", "tags", project=project_name)
    assert seen["published_first"] == 1 and seen["published_after_move"] == 2
    assert seen["r1_has_published"] is False and seen["r2_has_published"] is True
    assert seen["r1_was_published"] is True and seen["published_at_between"] == 1
    assert seen["latest"] == 3, "a published revision does not freeze the item: a new one becomes latest"
    assert seen["approved_before_untag"] is True and seen["approved_after_untag"] is False

    published = appliance.rest("/api/v1/revisions/by-kref", kref=seen["item"], t="published")
    assert published["kref"] == seen["revisions"][1] and published["published"] is True

    async def by_mcp(session: Any) -> dict[str, Any]:
        return await call(session, "kumiho_get_revision_by_tag", item_kref=seen["item"], tag="published")

    assert in_http_session(appliance.running.base_url, by_mcp)["kref"] == seen["revisions"][1]


def test_edges_traversal_path_and_impact(appliance: Appliance, project_name: str) -> None:
    seen = appliance.sdk("edges", "edges", project=project_name)
    a, b, c = seen["revisions"]["a"], seen["revisions"]["b"], seen["revisions"]["c"]
    assert seen["a_out"] == [[b, "DEPENDS_ON"]] and seen["c_in"] == [[b, "DEPENDS_ON"]]
    assert seen["b_both"] == ["DEPENDS_ON", "DEPENDS_ON"] and seen["edge_metadata"] == [{"why": "skin"}]
    assert seen["dependencies"] == sorted([b, c]) and seen["dependents"] == sorted([a, b])
    assert seen["path_depth"] == 2 and seen["path"][-1] == c and b in seen["path"], seen["path"]
    assert seen["impact"] == sorted([a, b])
    assert seen["a_out_after_delete"] == []

    assert appliance.rest("/api/v1/edges", kref=a) == []
    assert [(e["source_kref"], e["target_kref"]) for e in appliance.rest("/api/v1/edges", kref=c, direction="in")] \
        == [(b, c)]


def test_typo_tolerant_search(appliance: Appliance, project_name: str) -> None:
    seen = appliance.sdk("search", "search", project=project_name)
    base = f"kref://{project_name}/notes"
    typo = [hit["kref"] for hit in seen["typo"]]
    assert set(typo[:2]) == {f"{base}/transport-schedule.note", f"{base}/transport-map.diagram"}, seen["typo"]
    assert f"{base}/quarterly-budget.note" not in typo[:2]
    assert all(0 < hit["score"] <= 1 for hit in seen["typo"])
    assert [hit["kref"] for hit in seen["exact"]][:1] == [f"{base}/quarterly-budget.note"]
    assert [hit["kref"] for hit in seen["kind"]] == [f"{base}/transport-map.diagram"]
    assert [hit["kref"] for hit in seen["metadata"]][:1] == [f"{base}/transport-schedule.note"]
    assert seen["nothing"] == []

    # the appliance's own search answers as gRPC does: by name with the typo, and by what a revision says
    rest = appliance.rest("/api/v1/items/fulltext-search", query="transprot", context=project_name)
    assert {hit["item"]["kref"] for hit in rest[:2]} == set(typo[:2]), rest
    rest = appliance.rest("/api/v1/items/fulltext-search", query="night bus timetable", context=project_name)
    assert [hit["item"]["kref"] for hit in rest][:1] == [f"{base}/transport-schedule.note"], rest


def test_attributes_on_revision_item_and_space(appliance: Appliance, project_name: str) -> None:
    seen = appliance.sdk("attributes", "attributes", project=project_name)
    assert seen["before"] == {"revision": "approved", "item": "jane", "space": "lighting", "top_level": "warm"}
    assert seen["after_delete"] is None and seen["missing"] is None
    revision = appliance.rest("/api/v1/revisions/by-kref", kref=seen["revision"])
    assert revision["metadata"].get("colour") == "warm" and "status" not in revision["metadata"]
    assert appliance.rest("/api/v1/items/by-kref", kref=seen["item"])["metadata"].get("owner") == "jane"


def test_batch_creation_with_a_replayed_idempotency_prefix(appliance: Appliance, project_name: str) -> None:
    seen = appliance.sdk("batch", "batch", project=project_name)
    base = f"kref://{project_name}/bulk"
    assert seen["failures"] == [] and seen["replay_failures"] == []
    assert seen["first"] == [f"{base}/mem-0.memory?r=1", f"{base}/mem-1.memory?r=1", f"{base}/mem-2.memory?r=1",
                             f"{base}/mem-0.memory?r=2", f"{base}/mem-1.memory?r=2"]
    assert seen["replay"] == seen["first"], "the replayed batch answers with the revisions it created before"
    assert seen["counts"] == {"mem-0": 2, "mem-1": 2, "mem-2": 1}
    assert seen["fetched"] == sorted([f"{base}/mem-0.memory?r=2", f"{base}/mem-1.memory?r=2",
                                      f"{base}/mem-2.memory?r=1"])
    assert seen["missing"] == [f"{base}/absent.memory"]
    assert seen["over_cap"] == "INVALID_ARGUMENT"
    assert [r["metadata"]["title"] for r in appliance.rest("/api/v1/revisions", item_kref=f"{base}/mem-0.memory")] \
        == ["row 0", "row 3"]
    assert {i["item_name"] for i in appliance.rest("/api/v1/items", space_path=f"/{project_name}/bulk")} \
        == {"mem-0", "mem-1", "mem-2"}, "the refused 201-row batch wrote nothing"


def test_deletions(appliance: Appliance, project_name: str) -> None:
    seen = appliance.sdk("delete", "delete", project=project_name)
    assert seen["keep_revisions"] == [1] and seen["gone_unforced"] == "FAILED_PRECONDITION"
    assert seen["gone_deprecated"] is True
    assert seen["gone_after"] == "NOT_FOUND" and seen["space_after"] == "NOT_FOUND"
    assert seen["project_after"] is True and seen["project_listed"] is False
    assert project_name not in [p["name"] for p in appliance.rest("/api/v1/projects")]
    gone = httpx.get(f"{appliance.running.base_url}/api/v1/items/by-kref",
                                   params={"kref": seen["keep"]}, timeout=30)
    assert gone.status_code == 404, gone.text
