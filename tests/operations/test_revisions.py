"""Revisions, tags, artifacts and bundles through the official MCP client over real HTTP (in-process app, real
Kùzu and LanceDB): published moves and never freezes, time travel over tag history, artifacts and the data
directory, bundle membership, batch reads, deletions with their guards (and the search index in step), and
malformed calls answered with the error shape naming the field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from mcp.client.session import ClientSession

from appliance.operations.revisions import BATCH_KREFS
from tests.inprocess import InProcess, serve_in_process
from tests.mcp_api.clients import call, in_http_session

SPACE = "/Films/characters"


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with serve_in_process(tmp_path_factory.mktemp("revisions") / "data", None) as running:
        graph = running.services.graph  # the structure tools are another family: set the scene in the store
        graph.ensure_space(SPACE)
        yield running


def item(app: InProcess, name: str, kind: str = "model") -> str:
    return app.services.graph.create_item(SPACE, name, kind).kref


async def error(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    """The tool's error object, after checking that the call failed as agents see failures."""
    result = await session.call_tool(tool, arguments)
    assert result.is_error is True, result.content[0].text  # type: ignore[union-attr]
    body = json.loads(result.content[0].text)["error"]  # type: ignore[union-attr]
    assert "Traceback" not in body["message"] and body["message"]
    return body  # type: ignore[no-any-return]


def now() -> str:
    return datetime.now(UTC).isoformat()


def test_published_moves_stays_open_to_tags_and_revisions_and_time_travel_finds_past_holders(
        app: InProcess) -> None:
    hero = item(app, "hero")

    async def steps(s: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {}
        one = await call(s, "kumiho_create_revision", item_kref=hero, metadata={"title": "first cut"})
        two = await call(s, "kumiho_create_revision", item_kref=hero, metadata={"memory_type": "fact"})
        out["one"], out["two"] = one, two
        r1, r2 = one["revision"]["kref"], two["revision"]["kref"]
        out["tag1"] = await call(s, "kumiho_tag_revision", revision_kref=r1, tag="published")
        out["before"] = now()
        out["by_tag"] = await call(s, "kumiho_get_revision", kref=hero + "?t=published")
        await call(s, "kumiho_tag_revision", revision_kref=r2, tag="published")  # moves it
        out["after"] = now()
        out["r1"] = await call(s, "kumiho_get_revision", kref=r1)
        out["approved"] = await call(s, "kumiho_tag_revision", revision_kref=r2, tag="approved")
        out["three"] = await call(s, "kumiho_create_revision", item_kref=hero)
        out["r2"] = await call(s, "kumiho_get_revision", kref=r2)
        out["latest"] = await call(s, "kumiho_get_revision", kref=hero)
        out["as_of_before"] = await call(s, "kumiho_get_revision_as_of", item_kref=hero, tag="published",
                                         time=out["before"])
        out["as_of_after"] = await call(s, "kumiho_get_revision_as_of", item_kref=hero, tag="published",
                                        time=out["after"])
        out["as_of_compact"] = await call(s, "kumiho_get_revision_as_of", item_kref=hero, tag="published",
                                          time="209912312359")
        out["latest_then"] = await call(s, "kumiho_get_revision_as_of", item_kref=hero, tag="latest",
                                        time=out["before"])
        out["too_early"] = await error(s, "kumiho_get_revision_as_of", item_kref=hero, tag="published",
                                       time="200001010000")
        out["not_a_time"] = await error(s, "kumiho_get_revision_as_of", item_kref=hero, tag="published",
                                        time="yesterday")
        out["no_item"] = await error(s, "kumiho_get_revision_as_of", item_kref=f"kref:/{SPACE}/nobody.model",
                                     tag="published", time="209912312359")
        out["listed"] = await call(s, "kumiho_get_item_revisions", item_kref=hero)
        out["listed_meta"] = await call(s, "kumiho_get_item_revisions", item_kref=hero, include_metadata=True)
        out["untag"] = await call(s, "kumiho_untag_revision", revision_kref=r2, tag="approved")
        out["untag_again"] = await call(s, "kumiho_untag_revision", revision_kref=r2, tag="approved")
        out["tag_latest"] = await error(s, "kumiho_tag_revision", revision_kref=r1, tag="latest")
        out["untag_latest"] = await error(s, "kumiho_untag_revision", revision_kref=r1, tag="latest")
        out["untag_published_by_tag"] = await call(s, "kumiho_untag_revision", revision_kref=hero + "?t=published",
                                                   tag="published")
        out["no_published"] = await error(s, "kumiho_get_revision", kref=hero + "?t=published")
        return out

    out = in_http_session(app.base_url, steps)
    one, two = out["one"]["revision"], out["two"]["revision"]
    assert out["one"]["created"] is True and one["number"] == 1 and one["metadata"] == {"title": "first cut"}
    assert two["number"] == 2 and two["latest"] is True and two["tags"] == ["latest"]
    assert two["metadata"]["type"] == "fact"  # the reference re-aliases memory_type as type on read
    assert out["tag1"] == {"tagged": True, "revision_kref": one["kref"], "tag": "published"}
    assert out["by_tag"]["kref"] == one["kref"] and out["by_tag"]["published"] is True
    assert out["r1"]["published"] is False and out["r1"]["tags"] == []  # published moved away
    assert out["approved"]["tagged"] is True  # a published revision still takes tags (no freeze) …
    assert out["three"]["revision"]["number"] == 3  # … and its item new revisions
    assert out["r2"]["tags"] == ["approved", "published"] and out["r2"]["latest"] is False
    assert out["latest"]["number"] == 3 and out["latest"]["latest"] is True
    assert out["as_of_before"]["kref"] == one["kref"]
    assert out["as_of_after"]["kref"] == two["kref"] == out["as_of_compact"]["kref"]
    assert out["latest_then"]["kref"] == two["kref"]
    assert out["too_early"]["code"] == "not_found" and out["too_early"]["field"] == "time"
    assert out["not_a_time"]["code"] == "invalid_argument" and out["not_a_time"]["field"] == "time"
    assert out["no_item"]["code"] == "not_found" and out["no_item"]["field"] == "item_kref"
    listed = out["listed"]
    assert listed["item_kref"] == hero and listed["count"] == 3
    assert [r["number"] for r in listed["revisions"]] == [3, 2, 1]  # newest first, as the reference
    assert all("metadata" not in r for r in listed["revisions"])
    assert out["listed_meta"]["revisions"][2]["metadata"] == {"title": "first cut"}
    assert out["untag"]["untagged"] is True and out["untag_again"]["untagged"] is False
    assert out["tag_latest"]["field"] == out["untag_latest"]["field"] == "tag"
    assert out["untag_published_by_tag"] == {"untagged": True, "revision_kref": two["kref"], "tag": "published"}
    assert out["no_published"]["code"] == "not_found"
    tagged = [e for e in app.services.graph.events(limit=10_000) if e["routing_key"] == "revision.tagged"
              and e["kref"] == two["kref"] and e["details"]["tag"] == "published"]
    assert tagged and tagged[0]["details"]["moved_from"] == one["kref"][len("kref://"):]


def test_artifacts_default_lookup_reuse_and_deletion(app: InProcess) -> None:
    prop = item(app, "sword")
    revision = app.services.graph.create_revision(prop).kref

    async def steps(s: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["mesh"] = await call(s, "kumiho_create_artifact", revision_kref=revision, name="mesh.fbx",
                                 location="/projects/film/sword/mesh.fbx")
        out["texture"] = await call(s, "kumiho_create_artifact", revision_kref=prop, name="texture.png",
                                    location="s3://film-assets/sword/texture.png")  # an item kref: its latest
        out["same"] = await call(s, "kumiho_create_artifact", revision_kref=revision, name="mesh.fbx",
                                 location="/projects/film/sword/mesh.fbx")
        out["clash"] = await error(s, "kumiho_create_artifact", revision_kref=revision, name="mesh.fbx",
                                   location="/elsewhere/mesh.fbx")
        out["bad_name"] = await error(s, "kumiho_create_artifact", revision_kref=revision, name="a/b",
                                      location="/x")
        out["blank"] = await error(s, "kumiho_create_artifact", revision_kref=revision, name="c.txt",
                                   location="  ")
        out["listed"] = await call(s, "kumiho_get_artifacts", revision_kref=revision)
        out["first"] = await call(s, "kumiho_get_artifact", artifact_kref=revision)
        app.services.graph.set_default_artifact(revision, "texture.png")
        out["default"] = await call(s, "kumiho_get_artifact", artifact_kref=prop)  # item → latest → default
        out["named"] = await call(s, "kumiho_get_artifact", artifact_kref=revision + "&a=mesh.fbx")
        out["by_location"] = await call(s, "kumiho_get_artifacts_by_location",
                                        location="/projects/film/sword/mesh.fbx")
        out["nowhere"] = await call(s, "kumiho_get_artifacts_by_location", location="/no/such/file")
        out["delete_unnamed"] = await error(s, "kumiho_delete_artifact", artifact_kref=revision)
        out["deleted"] = await call(s, "kumiho_delete_artifact", artifact_kref=revision + "&a=texture.png")
        out["gone"] = await error(s, "kumiho_get_artifact", artifact_kref=revision + "&a=texture.png")
        out["again"] = await error(s, "kumiho_delete_artifact", artifact_kref=revision + "&a=texture.png")
        out["revision"] = await call(s, "kumiho_get_revision", kref=revision)
        return out

    out = in_http_session(app.base_url, steps)
    mesh = out["mesh"]["artifact"]
    assert out["mesh"]["created"] is True and mesh["kref"] == revision + "&a=mesh.fbx"
    assert set(mesh) == {"kref", "name", "location", "revision_kref", "created_at", "metadata"}
    assert out["texture"]["artifact"]["revision_kref"] == revision
    assert out["same"]["created"] is False and out["same"]["artifact"]["kref"] == mesh["kref"]
    assert out["clash"]["code"] == "already_exists" and out["clash"]["field"] == "name"
    assert out["bad_name"]["field"] == "name" and out["blank"]["field"] == "location"
    assert out["listed"]["count"] == 2 and [a["name"] for a in out["listed"]["artifacts"]] == ["mesh.fbx",
                                                                                               "texture.png"]
    assert out["first"]["name"] == "mesh.fbx"  # no default yet: the first one
    assert out["default"]["name"] == "texture.png" and out["named"]["name"] == "mesh.fbx"
    assert [a["kref"] for a in out["by_location"]["artifacts"]] == [mesh["kref"]]
    assert out["nowhere"] == {"location": "/no/such/file", "artifacts": [], "count": 0}
    assert out["delete_unnamed"]["field"] == "artifact_kref"
    assert out["deleted"] == {"deleted": True, "artifact_kref": revision + "&a=texture.png"}
    assert out["gone"]["code"] == out["again"]["code"] == "not_found"
    assert out["gone"]["field"] == "artifact_kref"
    assert out["revision"]["default_artifact"] is None  # the deleted default is cleared
    events = [e for e in app.services.graph.events(limit=10_000) if e["routing_key"] == "artifact.deleted"]
    assert [e["kref"] for e in events] == [revision + "&a=texture.png"]


def test_a_location_inside_the_data_directory_stays_inside_it(app: InProcess, tmp_path: Path) -> None:
    revision = app.services.graph.create_revision(item(app, "shield")).kref
    root = app.services.data_dir.root
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "artifacts" / "leak").symlink_to(outside)

    async def steps(s: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["dotted"] = await call(s, "kumiho_create_artifact", revision_kref=revision, name="notes.md",
                                   location=f"file://{root}/artifacts/./shield/notes.md")
        out["found"] = await call(s, "kumiho_get_artifacts_by_location",
                                  location=f"file://{root.resolve()}/artifacts/shield/notes.md")
        out["escape"] = await error(s, "kumiho_create_artifact", revision_kref=revision, name="x.md",
                                    location=f"{root}/artifacts/../../escape.md")
        out["symlink"] = await error(s, "kumiho_create_artifact", revision_kref=revision, name="y.md",
                                     location=f"{root}/artifacts/leak/y.md")
        out["elsewhere"] = await call(s, "kumiho_create_artifact", revision_kref=revision, name="z.md",
                                      location=f"{outside}/z.md")
        out["relative"] = await call(s, "kumiho_create_artifact", revision_kref=revision, name="r.md",
                                     location="docs/../r.md")
        return out

    out = in_http_session(app.base_url, steps)
    expected = f"file://{root.resolve()}/artifacts/shield/notes.md"
    assert out["dotted"]["artifact"]["location"] == expected
    assert [a["name"] for a in out["found"]["artifacts"]] == ["notes.md"]
    for refused in (out["escape"], out["symlink"]):
        assert refused["code"] == "invalid_argument" and refused["field"] == "location"
        assert "data directory" in refused["message"]
    assert out["elsewhere"]["artifact"]["location"] == f"{outside}/z.md"  # not ours to judge: kept as given
    assert out["relative"]["artifact"]["location"] == "docs/../r.md"
    assert not any((outside / name).exists() for name in ("y.md", "z.md"))  # nothing is read or written


def test_bundles_collect_items_with_history_and_guards(app: InProcess) -> None:
    hero, villain = item(app, "lead"), item(app, "villain")

    async def steps(s: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["created"] = await call(s, "kumiho_create_bundle", space_path=SPACE, bundle_name="cast",
                                    metadata={"season": "1"})
        bundle = out["created"]["bundle"]["kref"]
        out["again"] = await call(s, "kumiho_create_bundle", space_path=SPACE.lstrip("/"), bundle_name="cast")
        out["no_space"] = await error(s, "kumiho_create_bundle", space_path="/Films/nowhere", bundle_name="x")
        out["got"] = await call(s, "kumiho_get_bundle", bundle_kref=bundle)
        out["not_a_bundle"] = await error(s, "kumiho_get_bundle", bundle_kref=hero)
        out["add"] = await call(s, "kumiho_add_bundle_member", bundle_kref=bundle, item_kref=hero)
        await call(s, "kumiho_add_bundle_member", bundle_kref=bundle, item_kref=villain)
        out["twice"] = await error(s, "kumiho_add_bundle_member", bundle_kref=bundle, item_kref=hero)
        out["missing_item"] = await error(s, "kumiho_add_bundle_member", bundle_kref=bundle,
                                          item_kref=f"kref:/{SPACE}/nobody.model")
        out["itself"] = await error(s, "kumiho_add_bundle_member", bundle_kref=bundle, item_kref=bundle)
        out["members"] = await call(s, "kumiho_get_bundle_members", bundle_kref=bundle)
        out["remove"] = await call(s, "kumiho_remove_bundle_member", bundle_kref=bundle, item_kref=hero)
        out["remove_again"] = await error(s, "kumiho_remove_bundle_member", bundle_kref=bundle, item_kref=hero)
        out["after"] = await call(s, "kumiho_get_bundle_members", bundle_kref=bundle)
        out["history"] = await call(s, "kumiho_get_item_revisions", item_kref=bundle, include_metadata=True)
        out["revise_bundle"] = await error(s, "kumiho_create_revision", item_kref=bundle)
        out["delete_bundle_revision"] = await error(s, "kumiho_delete_revision", revision_kref=bundle + "?r=2",
                                                    force=True)
        return out

    out = in_http_session(app.base_url, steps)
    bundle = out["created"]["bundle"]
    assert out["created"]["created"] is True and bundle["kind"] == "bundle" and bundle["metadata"] == {"season": "1"}
    assert out["again"]["created"] is False and out["again"]["bundle"]["kref"] == bundle["kref"]
    assert out["no_space"]["code"] == "not_found" and out["no_space"]["field"] == "space_path"
    assert out["got"]["kref"] == bundle["kref"]
    assert out["not_a_bundle"]["field"] == "bundle_kref"
    assert out["add"] == {"added": True, "bundle_kref": bundle["kref"], "item_kref": hero}
    assert out["twice"]["code"] == "already_exists" and out["twice"]["field"] == "item_kref"
    assert out["missing_item"]["code"] == "not_found" and out["missing_item"]["field"] == "item_kref"
    assert out["itself"]["field"] == "item_kref"
    members = out["members"]
    assert members["count"] == 2 and [m["item_kref"] for m in members["members"]] == [hero, villain]
    assert members["members"][0]["added_in_revision"] == 2 and members["members"][0]["added_by"] == "local"
    assert out["remove"] == {"removed": True, "bundle_kref": bundle["kref"], "item_kref": hero}
    assert out["remove_again"]["code"] == "not_found" and out["remove_again"]["field"] == "item_kref"
    assert [m["item_kref"] for m in out["after"]["members"]] == [villain] and out["after"]["revision_number"] == 4
    actions = [r["metadata"]["action"] for r in reversed(out["history"]["revisions"])]
    assert actions == ["CREATED", "ADDED", "ADDED", "REMOVED"]  # every change is a bundle revision
    assert out["revise_bundle"]["field"] == "item_kref"
    assert out["delete_bundle_revision"]["code"] == "conflict"


def test_batch_get_by_revision_krefs_or_item_krefs_and_a_tag(app: InProcess) -> None:
    graph = app.services.graph
    first, second = item(app, "extra-a"), item(app, "extra-b")
    r1 = graph.create_revision(first).kref
    graph.create_revision(first)
    graph.tag_revision(r1, "published")
    graph.create_revision(second)  # never published

    async def steps(s: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["mixed"] = await call(s, "kumiho_batch_get_revisions", revision_krefs=[r1, first + "?r=9"],
                                  item_krefs=[first, second], tag="published")
        out["latest"] = await call(s, "kumiho_batch_get_revisions", item_krefs=[first, second])
        out["strict"] = await error(s, "kumiho_batch_get_revisions", revision_krefs=[r1, first + "?r=9"],
                                    allow_partial=False)
        out["empty"] = await error(s, "kumiho_batch_get_revisions", revision_krefs=[], item_krefs=[])
        out["too_many"] = await error(s, "kumiho_batch_get_revisions", item_krefs=[first] * (BATCH_KREFS + 1))
        out["bad_kref"] = await error(s, "kumiho_batch_get_revisions", item_krefs=[first, "kref://a/../b"])
        out["a_space"] = await call(s, "kumiho_batch_get_revisions", item_krefs=["kref://Films/characters"])
        return out

    out = in_http_session(app.base_url, steps)
    mixed = out["mixed"]
    assert [r["kref"] for r in mixed["revisions"]] == [r1, r1]  # r1 by kref, and first's published one
    assert mixed["not_found"] == [first + "?r=9", second]
    assert (mixed["found_count"], mixed["requested_count"]) == (2, 4)
    assert [r["number"] for r in out["latest"]["revisions"]] == [2, 1]
    assert out["strict"]["code"] == "not_found" and out["strict"]["field"] == "revision_krefs[1]"
    assert "allow_partial" in out["strict"]["message"]
    assert out["empty"]["field"] == "revision_krefs"
    assert out["too_many"]["field"] == "item_krefs" and f"at most {BATCH_KREFS}" in out["too_many"]["message"]
    assert out["bad_kref"]["code"] == "invalid_kref" and out["bad_kref"]["field"] == "item_krefs[1]"
    assert out["a_space"]["not_found"] == ["kref://Films/characters"]  # a space holds no tagged revision


def test_deleting_a_revision_is_guarded_recorded_and_leaves_search(app: InProcess) -> None:
    async def steps(s: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {}
        stored = await call(s, "kumiho_memory_store", title="Ridge walk", space_path="walks",
                            user_text="We walked along the ridge on Sunday morning.")
        memory = stored["item_kref"]
        added = await call(s, "kumiho_create_revision", item_kref=memory, metadata={
            "title": "Quetzalcoatlus sighting", "summary": "A quetzalcoatlus glided over the ridge at noon.",
            "memory_type": "fact"})
        r1, r2 = stored["revision_kref"], added["revision"]["kref"]
        out["r1"], out["r2"], out["memory"] = r1, r2, memory
        await call(s, "kumiho_tag_revision", revision_kref=r2, tag="published")
        app.services.graph.create_edge(r1, r2, "DEPENDS_ON")
        out["found_before"] = await call(s, "kumiho_fulltext_search", query="quetzalcoatlus")
        out["recalled_before"] = await call(s, "kumiho_memory_recall", query="quetzalcoatlus over the ridge")
        out["by_item"] = await error(s, "kumiho_delete_revision", revision_kref=memory)
        out["guarded"] = await error(s, "kumiho_delete_revision", revision_kref=r2)
        out["still"] = await call(s, "kumiho_get_revision", kref=r2)
        out["deleted"] = await call(s, "kumiho_delete_revision", revision_kref=r2, force=True)
        out["gone"] = await error(s, "kumiho_get_revision", kref=r2)
        out["again"] = await error(s, "kumiho_delete_revision", revision_kref=r2, force=True)
        out["latest"] = await call(s, "kumiho_get_revision", kref=memory)
        out["artifacts_gone"] = await error(s, "kumiho_get_artifacts", revision_kref=r2)
        out["found_after"] = await call(s, "kumiho_fulltext_search", query="quetzalcoatlus")
        out["recalled_after"] = await call(s, "kumiho_memory_recall", query="quetzalcoatlus over the ridge")
        out["walk"] = await call(s, "kumiho_fulltext_search", query="ridge walk Sunday")
        out["plain_delete"] = await call(s, "kumiho_delete_revision", revision_kref=(await call(
            s, "kumiho_create_revision", item_kref=memory))["revision"]["kref"])
        return out

    out = in_http_session(app.base_url, steps)
    r1, r2, memory = out["r1"], out["r2"], out["memory"]
    assert any(r["item"]["kref"] == memory for r in out["found_before"]["results"])
    assert any(r["kref"] == r2 for r in out["recalled_before"]["results"])
    assert out["by_item"]["field"] == "revision_kref" and "?r=" in out["by_item"]["message"]
    guarded = out["guarded"]
    assert guarded["code"] == "conflict" and guarded["field"] == "force"
    assert "published" in guarded["message"] and "1 edge" in guarded["message"]
    assert out["still"]["published"] is True  # the refused call changed nothing
    assert out["deleted"] == {"deleted": True, "revision_kref": r2, "force": True}
    assert out["gone"]["code"] == out["again"]["code"] == "not_found"
    assert out["again"]["field"] == "revision_kref" and out["artifacts_gone"]["field"] == "revision_kref"
    assert out["latest"]["kref"] == r1 and out["latest"]["latest"] is True  # latest fell back
    assert not any(r["item"]["kref"] == memory for r in out["found_after"]["results"])
    recalled = out["recalled_after"]["results"]
    assert not any(r["kref"] == r2 or "uetzalcoatlus" in json.dumps(r) for r in recalled)
    assert any(r["item"]["kref"] == memory for r in out["walk"]["results"])  # what remains is still found
    assert out["plain_delete"]["deleted"] is True  # unpublished and unlinked: no force needed
    deleted = [e for e in app.services.graph.events(limit=10_000) if e["routing_key"] == "revision.deleted"
               and e["kref"] == r2]
    assert deleted and deleted[0]["details"]["force"] is True and deleted[0]["details"]["incoming_edges"] == 1
    assert "published" in deleted[0]["details"]["tags"]
    assert app.services.graph.get_revision(memory).kref == r1


@pytest.mark.parametrize(("tool", "arguments", "code", "field"), [
    ("kumiho_get_revision", {}, "invalid_argument", "kref"),
    ("kumiho_get_revision", {"kref": "not-a-kref"}, "invalid_kref", "kref"),
    ("kumiho_get_item_revisions", {"item_kref": "kref://Films/characters/nobody.model"}, "not_found", "item_kref"),
    ("kumiho_tag_revision", {"revision_kref": "kref://Films/characters/hero.model?r=1", "tag": 5},
     "invalid_argument", "tag"),
    ("kumiho_tag_revision", {"revision_kref": "kref://Films/characters/hero.model?r=1", "tag": " spaced "},
     "invalid_argument", "tag"),
    ("kumiho_create_revision", {"item_kref": "kref://Films/characters/hero.model", "metadata": {"n": 1}},
     "invalid_argument", "metadata.n"),
    ("kumiho_create_revision", {"item_kref": "kref://Films/characters/hero.model?r=1"}, "invalid_argument",
     "item_kref"),
    ("kumiho_get_revision_as_of", {"item_kref": "kref://Films/characters/hero.model", "tag": "published",
                                   "time": "2" * 65}, "invalid_argument", "time"),
    ("kumiho_create_artifact", {"revision_kref": "kref://Films/characters/hero.model?r=1", "name": "a.txt",
                                "location": "/tmp/a\x00b"}, "invalid_argument", "location"),
    ("kumiho_get_artifacts_by_location", {"location": "x" * 4097}, "invalid_argument", "location"),
    ("kumiho_delete_revision", {"revision_kref": "kref://Films/characters/hero.model?r=1", "force": "yes"},
     "invalid_argument", "force"),
    ("kumiho_create_bundle", {"space_path": "/Films/../x", "bundle_name": "b"}, "invalid_argument", "space_path"),
    ("kumiho_create_bundle", {"space_path": SPACE, "bundle_name": "no spaces"}, "invalid_argument", "bundle_name"),
    ("kumiho_get_bundle_members", {"bundle_kref": "kref://Films/characters/none.bundle"}, "not_found",
     "bundle_kref"),
])
def test_malformed_calls_name_the_field(app: InProcess, tool: str, arguments: dict[str, Any], code: str,
                                        field: str) -> None:
    async def steps(s: ClientSession) -> dict[str, Any]:
        return await error(s, tool, **arguments)

    body = in_http_session(app.base_url, steps)
    assert (body["code"], body["field"]) == (code, field), body
