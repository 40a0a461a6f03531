"""The edge and provenance tools through the official MCP client over HTTP, on real stores: a small
provenance chain built with kumiho_memory_store and kumiho_create_edge, walked by dependencies, dependents,
impact, find_path and the provenance summary; deleting an edge changes every walk; graph-augmented recall
follows an edge these tools made; malformed calls name their field and change nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from appliance.graph.links import NewEdge
from appliance.graph.revisions import NewRevision
from appliance.inference.chat import ScriptedCall, ScriptedModel
from appliance.services.provenance import MAX_REACHED
from tests.inprocess import InProcess, serve_in_process
from tests.mcp_api.clients import call, in_http_session

ANGLE = "melatonin as a sleep aid"


def _angles(scripted: ScriptedCall) -> dict[str, Any]:
    return {"queries": [ANGLE]}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with serve_in_process(tmp_path_factory.mktemp("provenance") / "data", ScriptedModel([_angles] * 100)) as running:
        yield running


def run(app: InProcess, steps: Callable[[Any], Any]) -> Any:
    return in_http_session(app.base_url, steps)


async def _memory(session: Any, title: str, text: str, **metadata: str) -> str:
    stored = await call(session, "kumiho_memory_store", title=title, user_text=text, space_path="renders",
                        stack_revisions=False, metadata=metadata)
    return stored["revision_kref"]  # type: ignore[no-any-return]


@pytest.fixture(scope="module")
def chain(app: InProcess) -> dict[str, str]:
    """upscale -DERIVED_FROM-> image -DEPENDS_ON-> checkpoint, and upscale -REFERENCED-> a note."""
    async def steps(session: Any) -> dict[str, str]:
        krefs = {
            "checkpoint": await _memory(session, "Checkpoint", "The base checkpoint for fox renders",
                                        model="sdxl-base", seed="7", steps="30"),
            "image": await _memory(session, "Fox image", "A red fox in snow, first render",
                                   prompt="a red fox in snow", cfg="7.5"),
            "upscale": await _memory(session, "Fox upscale", "The fox render upscaled to 4k"),
            "note": await _memory(session, "Render note", "Upscales go to the gallery folder"),
        }
        for source, target, kind in (("upscale", "image", "DERIVED_FROM"), ("image", "checkpoint", "DEPENDS_ON"),
                                     ("upscale", "note", "REFERENCED")):
            made = await call(session, "kumiho_create_edge", source_kref=krefs[source], target_kref=krefs[target],
                              edge_type=kind, metadata={"by": "test"})
            assert made["created"] is True and made["edge"]["edge_type"] == kind
        return krefs

    return run(app, steps)  # type: ignore[no-any-return]


def _edge_count(app: InProcess, kref: str) -> int:
    return app.services.graph.get_edges(kref).total_count


def test_create_edge_returns_the_edge_and_again_returns_the_same_one(app: InProcess, chain: dict[str, str]) -> None:
    item_kref = chain["note"].split("?")[0]  # an item kref: its latest revision

    async def steps(session: Any) -> tuple[dict[str, Any], ...]:
        first = await call(session, "kumiho_create_edge", source_kref=chain["image"], target_kref=item_kref,
                           edge_type="SUPPORTS", metadata={"reason": "same series"})
        again = await call(session, "kumiho_create_edge", source_kref=chain["image"], target_kref=item_kref,
                           edge_type="SUPPORTS")
        listed = await call(session, "kumiho_get_edges", revision_kref=chain["note"], direction="incoming",
                            edge_type="SUPPORTS")
        gone = await call(session, "kumiho_delete_edge", source_kref=chain["image"], target_kref=chain["note"],
                          edge_type="SUPPORTS")
        return first, again, listed, gone

    first, again, listed, gone = run(app, steps)
    edge = first["edge"]
    assert first["created"] is True
    assert edge == {"source_kref": chain["image"], "target_kref": chain["note"], "edge_type": "SUPPORTS",
                    "metadata": {"reason": "same series"}, "created_at": edge["created_at"]}
    assert again["edge"] == edge  # the existing edge, metadata unchanged
    assert listed["count"] == 1 and listed["edges"] == [edge] and listed["truncated"] is False
    assert gone == {"deleted": True, "source_kref": chain["image"], "target_kref": chain["note"],
                    "edge_type": "SUPPORTS"}
    keys = [e["routing_key"] for e in app.services.graph.events(limit=10_000) if e["kref"] == chain["image"]
            and e["details"] == {"target": chain["note"], "edge_type": "SUPPORTS"}]
    assert keys == ["edge.created", "edge.deleted"]  # creating it again wrote nothing


def test_walks_follow_the_chain_by_direction_type_and_depth(app: InProcess, chain: dict[str, str]) -> None:
    c = chain

    async def steps(session: Any) -> dict[str, dict[str, Any]]:
        return {
            "deps": await call(session, "kumiho_get_dependencies", revision_kref=c["upscale"]),
            "deps_typed": await call(session, "kumiho_get_dependencies", revision_kref=c["upscale"],
                                     edge_types=["DERIVED_FROM", "DEPENDS_ON"]),
            "deps_1": await call(session, "kumiho_get_dependencies", revision_kref=c["upscale"], max_depth=1),
            "dependents": await call(session, "kumiho_get_dependents", revision_kref=c["checkpoint"]),
            "impact": await call(session, "kumiho_analyze_impact", revision_kref=c["checkpoint"]),
            "path": await call(session, "kumiho_find_path", source_kref=c["upscale"], target_kref=c["checkpoint"]),
            "backwards": await call(session, "kumiho_find_path", source_kref=c["checkpoint"],
                                    target_kref=c["upscale"]),
            "summary": await call(session, "kumiho_get_provenance_summary", revision_kref=c["upscale"]),
            "edges": await call(session, "kumiho_get_edges", revision_kref=c["upscale"], direction="outgoing"),
        }

    out = run(app, steps)
    deps = out["deps"]
    assert deps["revision_kref"] == c["upscale"] and deps["max_depth"] == 5 and deps["truncated"] is False
    assert set(deps["dependencies"][:2]) == {c["image"], c["note"]} and deps["dependencies"][2] == c["checkpoint"]
    assert deps["count"] == 3
    assert out["deps_typed"]["dependencies"] == [c["image"], c["checkpoint"]]
    assert set(out["deps_1"]["dependencies"]) == {c["image"], c["note"]} and out["deps_1"]["max_depth"] == 1
    assert out["dependents"]["dependents"] == [c["image"], c["upscale"]] and out["dependents"]["count"] == 2
    impact = out["impact"]
    assert impact["impacted_revisions"] == [{"revision_kref": c["image"], "impact_depth": 1},
                                            {"revision_kref": c["upscale"], "impact_depth": 2}]
    assert impact["max_depth"] == 10 and impact["count"] == 2
    assert out["path"] == {"source_kref": c["upscale"], "target_kref": c["checkpoint"], "path_found": True,
                           "total_depth": 2, "steps": [
                               {"revision_kref": c["image"], "edge_type": "DERIVED_FROM", "depth": 1},
                               {"revision_kref": c["checkpoint"], "edge_type": "DEPENDS_ON", "depth": 2}]}
    assert out["backwards"]["path_found"] is False and "No path found" in out["backwards"]["message"]
    summary = out["summary"]
    assert summary["dependency_count"] == 3  # the note has no generation parameters: counted, not listed
    assert summary["provenance_summary"] == [
        {"kref": c["upscale"], "role": "target", "params": {}},
        {"kref": c["image"], "role": "dependency", "params": {"prompt": "a red fox in snow", "cfg": "7.5"}},
        {"kref": c["checkpoint"], "role": "dependency", "params": {"model": "sdxl-base", "seed": "7",
                                                                   "steps": "30"}}]
    assert out["edges"]["count"] == 2 and {e["edge_type"] for e in out["edges"]["edges"]} == {"DERIVED_FROM",
                                                                                              "REFERENCED"}


def test_deleting_an_edge_changes_every_walk(app: InProcess, chain: dict[str, str]) -> None:
    c = chain

    async def steps(session: Any) -> dict[str, dict[str, Any]]:
        gone = await call(session, "kumiho_delete_edge", source_kref=c["image"], target_kref=c["checkpoint"],
                          edge_type="DEPENDS_ON")
        out = {
            "gone": gone,
            "again": await call(session, "kumiho_delete_edge", source_kref=c["image"],
                                target_kref=c["checkpoint"], edge_type="DEPENDS_ON"),
            "deps": await call(session, "kumiho_get_dependencies", revision_kref=c["upscale"]),
            "impact": await call(session, "kumiho_analyze_impact", revision_kref=c["checkpoint"]),
            "path": await call(session, "kumiho_find_path", source_kref=c["upscale"], target_kref=c["checkpoint"]),
            "summary": await call(session, "kumiho_get_provenance_summary", revision_kref=c["upscale"]),
        }
        await call(session, "kumiho_create_edge", source_kref=c["image"], target_kref=c["checkpoint"],
                   edge_type="DEPENDS_ON")  # the chain as the other tests expect it
        return out

    out = run(app, steps)
    assert out["gone"]["deleted"] is True and out["again"]["deleted"] is False
    assert set(out["deps"]["dependencies"]) == {c["image"], c["note"]}
    assert out["impact"]["impacted_revisions"] == [] and out["impact"]["count"] == 0
    assert out["path"]["path_found"] is False
    assert [s["kref"] for s in out["summary"]["provenance_summary"]] == [c["upscale"], c["image"]]


def test_graph_augmented_recall_sees_an_edge_made_by_create_edge(app: InProcess) -> None:
    async def steps(session: Any) -> dict[str, Any]:
        sleep = await _memory(session, "Melatonin", "Melatonin helped with insomnia, 3 mg before bed")
        roster = await _memory(session, "Roster", "The hospital roster rotates every fortnight")
        query = {"query": "melatonin insomnia", "limit": 1, "graph_augmented": True}
        before = await call(session, "kumiho_memory_recall", **query)
        await call(session, "kumiho_create_edge", source_kref=sleep, target_kref=roster, edge_type="DEPENDS_ON")
        linked = await call(session, "kumiho_memory_recall", **query)
        await call(session, "kumiho_delete_edge", source_kref=sleep, target_kref=roster, edge_type="DEPENDS_ON")
        unlinked = await call(session, "kumiho_memory_recall", **query)
        return {"sleep": sleep, "roster": roster, "before": before, "linked": linked, "unlinked": unlinked}

    out = run(app, steps)

    def neighbours(answer: dict[str, Any]) -> list[dict[str, Any]]:
        assert answer["results"][0]["kref"] == out["sleep"], answer["results"]
        return [r for r in answer["results"] if r.get("graph_augmented")]

    assert out["linked"]["graph_augmented"]["used"] is True
    assert not [r for r in neighbours(out["before"]) if r["kref"] == out["roster"]]
    walked = [r for r in neighbours(out["linked"]) if r["kref"] == out["roster"]]
    assert len(walked) == 1 and walked[0]["edge_type"] == "DEPENDS_ON" and walked[0]["from_kref"] == out["sleep"]
    assert not [r for r in neighbours(out["unlinked"]) if r["kref"] == out["roster"]]


def _refused(app: InProcess, tool: str, **arguments: Any) -> dict[str, Any]:
    answer = run(app, lambda session: call(session, tool, **arguments))
    assert "error" in answer, answer
    return answer["error"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(("tool", "arguments", "field", "code"), [
    ("kumiho_get_dependencies", {"revision_kref": "kref://a/b c.d"}, "revision_kref", "invalid_kref"),
    ("kumiho_get_dependents", {"revision_kref": ""}, "revision_kref", "invalid_kref"),
    ("kumiho_analyze_impact", {"revision_kref": "http://example.com"}, "revision_kref", "invalid_kref"),
    ("kumiho_find_path", {"source_kref": "kref://CognitiveMemory/renders/x.conversation?r=1",
                          "target_kref": "kref://../../etc/passwd"}, "target_kref", "invalid_kref"),
    ("kumiho_get_edges", {"revision_kref": "kref://CognitiveMemory/renders/missing.conversation"},
     "revision_kref", "not_found"),
    ("kumiho_get_dependencies", {"revision_kref": "kref://CognitiveMemory/x.y", "max_depth": 0}, "max_depth",
     "invalid_argument"),
    ("kumiho_analyze_impact", {"revision_kref": "kref://CognitiveMemory/x.y", "max_depth": 21}, "max_depth",
     "invalid_argument"),
    ("kumiho_find_path", {"source_kref": "kref://CognitiveMemory/x.y", "target_kref": "kref://CognitiveMemory/x.y",
                          "max_depth": 1000}, "max_depth", "invalid_argument"),
    ("kumiho_get_provenance_summary", {"revision_kref": "kref://CognitiveMemory/x.y", "max_depth": -1},
     "max_depth", "invalid_argument"),
    ("kumiho_get_dependents", {"revision_kref": "kref://CognitiveMemory/x.y", "edge_types": ["DERIVED_FROM"] * 17},
     "edge_types", "invalid_argument"),
    ("kumiho_get_edges", {"revision_kref": "kref://CognitiveMemory/x.y", "direction": "sideways"}, "direction",
     "invalid_argument"),
])
def test_malformed_walks_name_the_field(app: InProcess, tool: str, arguments: dict[str, Any], field: str,
                                        code: str) -> None:
    error = _refused(app, tool, **arguments)
    assert error["field"] == field and error["code"] == code, error
    assert error["message"].startswith(field) or code == "not_found", error


def test_a_lowercase_edge_type_filter_is_refused_naming_the_field(app: InProcess, chain: dict[str, str]) -> None:
    error = _refused(app, "kumiho_get_dependencies", revision_kref=chain["upscale"], edge_types=["derived_from"])
    assert error["field"] == "edge_types" and "^[A-Z][A-Z0-9_]{0,49}$" in error["message"], error


def test_malformed_edge_writes_name_the_field_and_write_nothing(app: InProcess, chain: dict[str, str]) -> None:
    c = chain
    before = _edge_count(app, c["upscale"]), _edge_count(app, c["note"])
    missing = "kref://CognitiveMemory/renders/missing.conversation?r=1"
    for arguments, field, code in [
        ({"edge_type": "SUPERSEDES"}, "edge_type", "invalid_argument"),
        ({"edge_type": "derived_from"}, "edge_type", "invalid_argument"),
        ({"edge_type": "CONTRADICTS"}, "edge_type", "invalid_argument"),
        ({"edge_type": "REFERENCED", "target_kref": missing}, "target_kref", "not_found"),
        ({"edge_type": "REFERENCED", "source_kref": "kref://a/b.c?r=0"}, "source_kref", "invalid_kref"),
        ({"edge_type": "REFERENCED", "target_kref": c["upscale"]}, "target_kref", "invalid_argument"),  # itself
        ({"edge_type": "REFERENCED", "metadata": {"k": 1}}, "metadata.k", "invalid_argument"),
        ({"edge_type": "REFERENCED", "metadata": {f"k{i}": "v" for i in range(33)}}, "metadata", "invalid_argument"),
    ]:
        error = _refused(app, "kumiho_create_edge", **{"source_kref": c["upscale"], "target_kref": c["note"],
                                                       **arguments})
        assert error["field"] == field and error["code"] == code, (arguments, error)
    error = _refused(app, "kumiho_delete_edge", source_kref=c["upscale"], target_kref=c["note"],
                     edge_type="SUPERSEDES")
    assert error["field"] == "edge_type" and "SUPPORTS" in error["message"], error
    assert (_edge_count(app, c["upscale"]), _edge_count(app, c["note"])) == before


def test_a_walk_returns_at_most_its_bound_nearest_first_and_says_it_was_cut(app: InProcess) -> None:
    graph = app.services.graph
    graph.create_space("/CognitiveMemory", "fan")
    names = ["hub", *(f"leaf{i:03d}" for i in range(MAX_REACHED + 5))]
    made = graph.create_revisions([NewRevision(f"kref://CognitiveMemory/fan/{n}.conversation") for n in names])
    hub, *leaves = [revision.kref for revision in made.revisions if revision is not None]
    graph.create_edges([NewEdge(leaf, hub, "DEPENDS_ON") for leaf in leaves])

    async def steps(session: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        return (await call(session, "kumiho_get_dependents", revision_kref=hub, max_depth=1),
                await call(session, "kumiho_get_provenance_summary", revision_kref=leaves[0]))

    dependents, summary = run(app, steps)
    assert dependents["count"] == MAX_REACHED and dependents["truncated"] is True
    assert dependents["dependents"] == sorted(leaves)[:MAX_REACHED]
    assert summary["dependency_count"] == 1 and summary["truncated"] is False
