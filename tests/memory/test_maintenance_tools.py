"""The maintenance family beyond the model calls, through the official MCP client on real stores:
decomposing a memory into the typed graph, space profiles, and Dream State's graph maintenance (with a
ScriptedModel for the model's merge proposals, and without any model)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from appliance.inference.chat import ScriptedCall, ScriptedModel
from tests.inprocess import InProcess, serve_in_process
from tests.mcp_api.clients import call, in_http_session


class Script:
    """Answers by task, recognised from the system prompt."""

    def __init__(self) -> None:
        self.answers: dict[str, Any] = {}
        self.calls: dict[str, list[ScriptedCall]] = {}

    def __call__(self, scripted: ScriptedCall) -> Any:
        system = scripted.messages[0]["content"]
        task = "merges" if "entity list" in system else "dream" if "Dream State" in system else "other"
        self.calls.setdefault(task, []).append(scripted)
        answer = self.answers.get(task)
        if answer is None:
            raise AssertionError(f"the test gave no answer for a {task} call")
        return answer(scripted) if callable(answer) else answer


def keep_all(scripted: ScriptedCall) -> dict[str, Any]:
    count = scripted.schema["properties"]["assessments"]["minItems"]
    return {"assessments": [{"title": "m", "verdict": "keep", "reason": "", "relevance": 5, "tags": [],
                             "related": [], "relationship": ""} for _ in range(count)]}


@pytest.fixture
def script() -> Script:
    return Script()


@pytest.fixture
def app(tmp_path: Path, script: Script) -> Iterator[InProcess]:
    with serve_in_process(tmp_path / "data", ScriptedModel([script] * 1000),
                          maintenance={"dream_state_min_age_days": 0, "idle_consolidation_minutes": 0}) as running:
        yield running


def run(app: InProcess, steps: Callable[[Any], Any]) -> Any:
    return in_http_session(app.base_url, steps)


def mcp(app: InProcess, tool: str, **arguments: Any) -> dict[str, Any]:
    return run(app, lambda s: call(s, tool, **arguments))  # type: ignore[no-any-return]


def _store(app: InProcess, title: str, text: str, space: str = "notes") -> dict[str, Any]:
    return mcp(app, "kumiho_memory_store", title=title, user_text=text, space_path=space, stack_revisions=False)


def _edges(app: InProcess, kref: str, direction: str = "outgoing") -> list[tuple[str, str]]:
    found = mcp(app, "kumiho_get_edges", revision_kref=kref, direction=direction)["edges"]
    return sorted((e["edge_type"], e["target_kref"] if direction == "outgoing" else e["source_kref"]) for e in found)


def _counts(app: InProcess) -> dict[str, int]:
    """The graph's counts, without the search index's progress (which moves on by itself)."""
    return {k: v for k, v in app.services.graph.stats().items() if k != "unindexed_revisions"}


def _node(app: InProcess, kref: str) -> Any:
    graph = app.services.graph
    return graph.current_revisions([kref])[kref]


# -- decompose ----------------------------------------------------------------------------------------------

def test_decompose_writes_typed_nodes_and_edges_anchored_to_the_memory(app: InProcess) -> None:
    memory = _store(app, "Ana's new job", "Ana joined Acme as a database engineer; Acme runs Postgres 16")
    anchor = memory["revision_kref"]
    first = mcp(app, "kumiho_memory_decompose", kref=anchor, entities=[
        {"name": "Ana", "type": "person"}, {"name": "Acme", "type": "organisation", "aliases": ["Acme Corp"]}],
        facts=[{"statement": "Acme runs Postgres 16", "about": ["Acme", "Postgres"], "type": "tooling"}],
        relations=[{"subject": "Ana", "predicate": "works at", "object": "Acme"},
                   {"subject": "Ana", "predicate": "admires", "object": "Postgres"}],
        supersedes=[{"statement": "Acme runs Postgres 16", "replaces": "Acme runs Postgres 12",
                     "reason": "upgraded"}],
        contradicts=[{"statement": "Ana works from home", "conflicts_with": "Ana works in the office"}])
    assert first["kref"] == anchor and first["project"] == "CognitiveMemory"
    counts = first["decomposed"]
    assert counts["entities"] == 3 and counts["relations"] == 2  # Ana, Acme and Postgres (named by a fact)
    assert counts["facts"] == 4 and counts["supersedes"] == 1 and counts["contradicts"] == 1
    base = "kref://CognitiveMemory"
    ana, acme = _node(app, f"{base}/entities/ana.entity"), _node(app, f"{base}/entities/acme.entity")
    postgres = _node(app, f"{base}/entities/postgres.entity")
    assert ana.metadata["entity_type"] == "person" and '"Acme Corp"' in acme.metadata["aliases"]
    assert _edges(app, ana.kref) == sorted([("DERIVED_FROM", anchor), ("WORKS_AT", acme.kref),
                                            ("RELATES_TO", postgres.kref)])
    relates = [e for e in mcp(app, "kumiho_get_edges", revision_kref=ana.kref, direction="outgoing")["edges"]
               if e["edge_type"] == "RELATES_TO"]
    assert relates[0]["metadata"]["predicate"] == "admires"
    facts = {r.metadata["statement"]: r for r in app.services.graph.current_revisions(
        [i.kref for i in app.services.graph.list_items("/CognitiveMemory/facts").items]).values()}
    new, old = facts["Acme runs Postgres 16"], facts["Acme runs Postgres 12"]
    assert ("SUPERSEDES", old.kref) in _edges(app, new.kref) and old.metadata["status"] == "superseded"
    assert ("ABOUT", acme.kref) in _edges(app, new.kref) and ("ABOUT", postgres.kref) in _edges(app, new.kref)
    assert ("CONTRADICTS", facts["Ana works in the office"].kref) in _edges(app, facts["Ana works from home"].kref)
    # naming an entity again reuses its node and adds the aliases
    again = mcp(app, "kumiho_memory_decompose", kref=memory["item_kref"],
                entities=[{"name": "ACME", "aliases": ["Acme Inc"]}])
    assert again["decomposed"]["entities"] == 0 and again["kref"] == anchor
    assert '"Acme Inc"' in _node(app, acme.item_kref).metadata["aliases"]
    # typed nodes are not memories: recall does not show them
    recalled = mcp(app, "kumiho_memory_recall", query="Acme runs Postgres", limit=10)
    assert all(r["item_kref"] == memory["item_kref"] for r in recalled["results"])


def test_decompose_refuses_bad_input_whole(app: InProcess) -> None:
    anchor = _store(app, "Ferry", "The ferry leaves at 7")["revision_kref"]
    before = _counts(app)
    missing = mcp(app, "kumiho_memory_decompose", kref="kref://CognitiveMemory/notes/nothing.conversation?r=1",
                  entities=[{"name": "Ferry"}])
    too_many = mcp(app, "kumiho_memory_decompose", kref=anchor, entities=[{"name": f"e{i}"} for i in range(51)])
    unnamed = mcp(app, "kumiho_memory_decompose", kref=anchor, entities=[{"name": ""}])
    dangling = mcp(app, "kumiho_memory_decompose", kref=anchor, entities=[{"name": "Harbour"}],
                   supersedes=[{"statement": "The ferry leaves at 8",
                                "replaces": "kref://CognitiveMemory/facts/gone.fact?r=1"}])
    assert missing["error"]["code"] == "not_found"
    assert too_many["error"]["field"] == "entities" and "50" in too_many["error"]["message"]
    assert unnamed["error"]["field"] == "entities[0].name"
    assert dangling["error"]["code"] == "not_found" and dangling["error"]["field"] == "supersedes[0].replaces"
    assert _counts(app) == before  # nothing half-written


# -- space profiles -----------------------------------------------------------------------------------------

def _busy_space(app: InProcess) -> str:
    """One item with six unpublished revisions, each superseding the one before."""
    graph = app.services.graph
    item = graph.create_item(graph.ensure_space("/CognitiveMemory/inbox").path, "thread", "conversation")
    revisions = [graph.create_revision(item.kref, {"title": f"reply {n}"}) for n in range(6)]
    for newer, older in zip(revisions[1:], revisions, strict=False):
        graph.create_edge(newer.kref, older.kref, "SUPERSEDES")
    return "/CognitiveMemory/inbox"


def test_space_profile_labels_spaces_pins_and_tracks_drift(app: InProcess) -> None:
    for n in range(3):
        _store(app, f"Policy {n}", f"The travel policy rule {n} is fixed", space="policies")
    _store(app, "Pinned note", "Kept as reference", space="handbook")
    busy = _busy_space(app)
    app.services.graph.update_space_metadata("/CognitiveMemory/handbook", {"space_class": "correspondence"})
    graph = app.services.graph
    before, events = _counts(app), len(graph.events(limit=10000))
    dry = mcp(app, "kumiho_memory_space_profile", dry_run=True)
    assert _counts(app) == before and len(graph.events(limit=10000)) == events  # a dry run writes nothing
    profiles = dry["profiles"]
    assert profiles["/CognitiveMemory/policies"]["label"] == "canonical"
    assert profiles[busy]["label"] == "correspondence" and profiles[busy]["scores"]["churn"] >= 0.6
    pinned = profiles["/CognitiveMemory/handbook"]
    assert pinned["label"] == "correspondence" and pinned["pinned"] and pinned["observed_label"] == "canonical"
    assert dry["dry_run"] and dry["labels"] == {"canonical": 1, "correspondence": 2} and dry["drift"] == []

    first = mcp(app, "kumiho_memory_space_profile", window_days=7)
    kref = "kref://CognitiveMemory/policies/_space_profile.space-profile"
    stored = _node(app, kref)
    assert first["spaces_profiled"] == 3 and stored.metadata["label"] == "canonical"
    assert stored.metadata["window_days"] == "7"
    graph.update_space_metadata("/CognitiveMemory/handbook", {"space_class": "working"})
    second = mcp(app, "kumiho_memory_space_profile")
    assert second["drift"] == [{"space_path": "/CognitiveMemory/handbook", "from": "correspondence",
                                "to": "working", "pinned": True}]
    latest = _node(app, kref)
    assert latest.number == 2 and _edges(app, latest.kref) == [("SUPERSEDES", stored.kref)]
    assert mcp(app, "kumiho_memory_space_profile", window_days=0)["error"]["field"] == "window_days"
    assert mcp(app, "kumiho_memory_space_profile", project="Nope")["error"]["code"] == "not_found"


# -- Dream State's graph maintenance --------------------------------------------------------------------------

def _typed_graph(app: InProcess) -> dict[str, Any]:
    anchor = _store(app, "Server notes", "Postgres on Debian; PostgreSQL listens on 5432")["revision_kref"]
    gone = _store(app, "Scratch", "Temporary note about Redis", space="scratch")
    mcp(app, "kumiho_memory_decompose", kref=anchor,
        entities=[{"name": "Postgres", "aliases": ["PostgreSQL"]}, {"name": "Debian"}, {"name": "Debian Linux"}],
        facts=[{"statement": "Postgres listens on 5432.", "about": ["Postgres"]}])
    mcp(app, "kumiho_memory_decompose", kref=anchor, entities=[{"name": "PostgreSQL"}],
        facts=[{"statement": "postgres listens on 5432", "about": ["PostgreSQL"]}])
    mcp(app, "kumiho_memory_decompose", kref=gone["revision_kref"], entities=[{"name": "Redis"}])
    app.services.graph.delete_item(gone["item_kref"], force=True)  # its typed node is left without edges
    base = "kref://CognitiveMemory/entities"
    return {"anchor": anchor, "postgres": f"{base}/postgres.entity", "postgresql": f"{base}/postgresql.entity",
            "debian": f"{base}/debian.entity", "debian_linux": f"{base}/debian-linux.entity",
            "redis": f"{base}/redis.entity"}


def test_dream_state_maintains_the_typed_graph_with_the_models_merges(app: InProcess, script: Script) -> None:
    nodes = _typed_graph(app)
    script.answers["dream"] = keep_all
    script.answers["merges"] = {"merges": [{"canonical": "Debian", "duplicate": "Debian Linux"},
                                           {"canonical": "Debian", "duplicate": "Made Up"}]}
    graph = app.services.graph
    before = _counts(app)
    dry = mcp(app, "kumiho_memory_dream_state", dry_run=True, maintain_graph=True, maintenance_llm=True)
    assert _counts(app) == before
    would = dry["maintenance"]
    assert would["entities_merged"] == 2 and would["facts_merged"] == 1 and would["orphans_pruned"] == 1
    assert {(m["canonical"].split("?")[0], m["duplicate"].split("?")[0], m["basis"]) for m in would["would_merge"]} >= {
        (nodes["postgres"], nodes["postgresql"], "alias"), (nodes["debian"], nodes["debian_linux"], "model")}
    assert [k.split("?")[0] for k in would["would_prune"]] == [nodes["redis"]]
    assert "Debian Linux" in script.calls["merges"][0].messages[-1]["content"]

    report = mcp(app, "kumiho_memory_dream_state", maintain_graph=True, maintenance_llm=True,
                 extra_instructions="Never deprecate memories about servers.")
    done = report["maintenance"]
    assert report["success"] and done["entities_merged"] == 2 and done["llm_merges"] == 1
    assert done["facts_merged"] == 1 and done["orphans_pruned"] == 1 and done["edges_repointed"] >= 3
    assert "Never deprecate memories about servers." in script.calls["dream"][-1].messages[0]["content"]
    assert report["extra_instructions_active"] is True
    duplicate = graph.get_item(nodes["postgresql"])
    kept = _node(app, nodes["postgres"])
    assert duplicate.deprecated and '"PostgreSQL"' in kept.metadata["aliases"]
    assert graph.get_item(nodes["redis"]).deprecated and graph.get_item(nodes["debian_linux"]).deprecated
    # the fact about the duplicate is now about the entity kept
    abouts = [e for e in mcp(app, "kumiho_get_edges", revision_kref=kept.kref, direction="incoming")["edges"]
              if e["edge_type"] == "ABOUT"]
    assert len(abouts) == 2
    # what maintenance deprecated is no longer found
    for name, query in (("postgresql", "PostgreSQL"), ("redis", "Redis")):
        hits = mcp(app, "kumiho_fulltext_search", query=query, kind="entity")["results"]
        assert nodes[name] not in [h["item"]["kref"] for h in hits]
        shown = mcp(app, "kumiho_fulltext_search", query=query, kind="entity", include_deprecated=True)["results"]
        assert nodes[name] in [h["item"]["kref"] for h in shown]
    cursor = graph.get_revision(report["report_kref"])
    assert cursor.metadata["maintenance_entities_merged"] == "2"
    assert "## Graph maintenance" in Path(report["report_path"]).read_text()
    again = mcp(app, "kumiho_memory_dream_state", maintain_graph=True)
    assert again["maintenance"]["entities_merged"] == 0 and again["maintenance"]["orphans_pruned"] == 0


def test_maintenance_options_without_maintain_graph_are_refused(app: InProcess) -> None:
    for field in ("maintenance_llm", "code_project"):
        value: Any = True if field == "maintenance_llm" else "CognitiveMemory-decisions"
        error = mcp(app, "kumiho_memory_dream_state", **{field: value})["error"]
        assert error["field"] == field and "maintain_graph" in error["message"]


def test_graph_maintenance_runs_without_a_model_and_says_what_it_skipped(tmp_path: Path) -> None:
    with serve_in_process(tmp_path / "data", None, maintenance={"idle_consolidation_minutes": 0}) as app:
        nodes = _typed_graph(app)
        report = mcp(app, "kumiho_memory_dream_state", maintain_graph=True, maintenance_llm=True)
        assert report["success"] and report["revisions_assessed"] == 0 and "no local model" in report["skipped"]
        assert report["maintenance"]["entities_merged"] == 1 and report["maintenance"]["orphans_pruned"] == 1
        assert "skipped" in report["maintenance"]["llm_merges_skipped"]
        assert app.services.graph.get_item(nodes["postgresql"]).deprecated
        plain = mcp(app, "kumiho_memory_dream_state")
        assert plain["success"] is False and "no local model" in plain["skipped"]
