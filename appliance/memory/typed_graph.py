"""The typed graph: entities and facts drawn from memories, as items of their own (reference §4.18).

Per project, entities live in ``/<project>/entities`` (kind ``entity``, one item per name slug, so the same
name written twice is one node) and facts in ``/<project>/facts`` (kind ``fact``, one item per statement).
Each node has one anchor revision (no ``published`` tag: recall, which reads ``conversation`` items, never
shows them) and edges: ``DERIVED_FROM`` the memory revision it came from, ``fact ABOUT entity``,
``entity <PREDICATE> entity`` for relations (a registered predicate, else ``RELATES_TO`` with the predicate
in the edge's metadata), ``SUPERSEDES`` and ``CONTRADICTS`` between facts.

``decompose`` writes what an agent extracted (kumiho_memory_decompose); ``maintain`` is Dream State's graph
maintenance: it merges entities that share a name or alias, merges facts that say the same thing, prunes
(deprecates) nodes left without any edge, and deduplicates the decisions of a code-decision project.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from appliance.core.model import Revision, every_item
from appliance.errors import InvalidArgument, NotFound
from appliance.graph import GraphStore, NewEdge
from appliance.memory import records
from appliance.memory.spaces import slug

ENTITY_SPACE, ENTITY_KIND = "entities", "entity"
FACT_SPACE, FACT_KIND = "facts", "fact"
DECISION_KIND = "decision"
# Relations whose predicate is one of these become an edge of that type; any other is RELATES_TO.
PREDICATES = frozenset({"WORKS_AT", "WORKS_ON", "WORKS_WITH", "MEMBER_OF", "PART_OF", "LOCATED_IN", "LIVES_IN",
                        "OWNS", "USES", "DEPENDS_ON", "CREATED", "CREATED_BY", "MANAGES", "REPORTS_TO", "KNOWS",
                        "PREFERS", "RELATED_TO", "RELATES_TO"})
_TOKENS = re.compile(r"[0-9a-z]+")
MAX_LISTED = 500  # typed nodes one maintenance pass looks at, per kind


def entity_name(name: str) -> str:
    return slug(name, 64)


def fact_name(statement: str) -> str:
    """One item per statement (case and spacing aside): a readable slug and a digest of the text."""
    text = " ".join(statement.casefold().split())
    return f"{slug(statement, 55)}-{hashlib.sha1(text.encode()).hexdigest()[:8]}"


def predicate_edge(predicate: str) -> str:
    normal = re.sub(r"[^A-Z0-9]+", "_", predicate.upper()).strip("_")[:50]
    return normal if normal in PREDICATES else "RELATES_TO"


def _tokens(text: str) -> str:
    return " ".join(_TOKENS.findall(text.casefold()))


# -- decompose ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Entity:
    name: str
    type: str = ""
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Fact:
    statement: str
    about: tuple[str, ...] = ()
    type: str = ""
    valid_from: str = ""
    valid_to: str = ""


@dataclass(frozen=True)
class Link:
    """A statement that replaces (SUPERSEDES) or conflicts with (CONTRADICTS) another fact, named by its
    statement or its kref."""

    statement: str
    other: str
    reason: str = ""


@dataclass(frozen=True)
class Decomposition:
    entities: tuple[Entity, ...] = ()
    facts: tuple[Fact, ...] = ()
    relations: tuple[tuple[str, str, str], ...] = ()  # (subject, predicate, object)
    supersedes: tuple[Link, ...] = ()
    contradicts: tuple[Link, ...] = ()


@dataclass
class _Writer:
    graph: GraphStore
    project: str
    anchor: Revision
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(
        ("entities", "facts", "relations", "supersedes", "contradicts", "edges"), 0))
    _nodes: dict[tuple[str, str], str] = field(default_factory=dict)  # (kind, item name) → revision kref
    _spaces: dict[str, str] = field(default_factory=dict)
    _edges: dict[tuple[str, str, str], dict[str, str]] = field(default_factory=dict)  # written at the end

    def node(self, space: str, name: str, kind: str, metadata: dict[str, str]) -> str:
        """The node's anchor revision: created with ``metadata`` the first time, reused afterwards (an
        entity's aliases are merged into it)."""
        if (kind, name) in self._nodes:
            return self._nodes[(kind, name)]
        g = self.graph
        if space not in self._spaces:
            self._spaces[space] = g.ensure_space(f"/{self.project}/{space}").path
        item = g.create_item(self._spaces[space], name, kind)
        current = g.current_revisions([item.kref]).get(item.kref)
        if current is None:
            current = g.create_revision(item.kref, {**metadata, "anchor_kref": self.anchor.kref})
            self.counts["entities" if kind == ENTITY_KIND else "facts"] += 1
        elif kind == ENTITY_KIND and metadata.get("aliases"):
            known = records.json_strings(current.metadata.get("aliases"))
            merged = list(dict.fromkeys([*known, *records.json_strings(metadata["aliases"])]))
            if merged != known:
                current = g.update_revision_metadata(current.kref, {"aliases": json.dumps(merged)})
        self.edge(current.kref, self.anchor.kref, "DERIVED_FROM", {"basis": "decompose"})
        self._nodes[(kind, name)] = current.kref
        return current.kref

    def entity(self, name: str, kind: str = "", aliases: Iterable[str] = ()) -> str:
        meta = {"name": name.strip(), "title": name.strip(), "entity_type": kind, "aliases": json.dumps(list(aliases))}
        return self.node(ENTITY_SPACE, entity_name(name), ENTITY_KIND, {k: v for k, v in meta.items() if v})

    def fact(self, fact: Fact) -> str:
        meta = {"statement": fact.statement, "title": fact.statement[:200], "summary": fact.statement,
                "fact_type": fact.type, "valid_from": fact.valid_from, "valid_to": fact.valid_to}
        kref = self.node(FACT_SPACE, fact_name(fact.statement), FACT_KIND, {k: v for k, v in meta.items() if v})
        for name in fact.about:
            self.edge(kref, self.entity(name), "ABOUT", {"entity": entity_name(name)})
        return kref

    def other_fact(self, other: str, field_name: str) -> str:
        """The fact a supersedes/contradicts entry names: a kref of an existing revision or item, or a
        statement (an existing fact with that statement, else a new fact node)."""
        if other.startswith("kref://"):
            try:
                found = self.graph.resolve(other)
            except NotFound:
                raise NotFound(f"{field_name}: {other} does not exist; name a stored revision or give the "
                               "statement it replaces", field=field_name) from None
            if found.revision is None:
                raise InvalidArgument(f"{field_name}: {other} has no revision to link to", field=field_name)
            return found.revision.kref
        return self.fact(Fact(other))

    def edge(self, source: str, target: str, edge_type: str, metadata: dict[str, str]) -> None:
        if source != target:
            self._edges.setdefault((source, target, edge_type), metadata)

    def write_edges(self) -> None:
        """Every edge at once (one bulk write instead of a statement each: a full call has ~700 edges);
        edges that exist already are kept as they are."""
        self.counts["edges"] = self.graph.create_edges(
            [NewEdge(source, target, edge_type, meta) for (source, target, edge_type), meta in self._edges.items()])


def decompose(graph: GraphStore, anchor: Revision, project: str, parts: Decomposition) -> dict[str, int]:
    """Write ``parts`` as typed nodes and edges anchored to ``anchor``, in one transaction (all or nothing).
    Returns how many nodes were created and edges written."""

    def write() -> dict[str, int]:
        w = _Writer(graph, project, anchor)
        for entity in parts.entities:
            w.entity(entity.name, entity.type, entity.aliases)
        for fact in parts.facts:
            w.fact(fact)
        for subject, predicate, obj in parts.relations:
            edge_type = predicate_edge(predicate)
            w.edge(w.entity(subject), w.entity(obj), edge_type, {"predicate": predicate[:200], "basis": "decompose"})
            w.counts["relations"] += 1
        for index, link in enumerate(parts.supersedes):
            new, old = w.fact(Fact(link.statement)), w.other_fact(link.other, f"supersedes[{index}].replaces")
            w.edge(new, old, "SUPERSEDES", {"reason": link.reason[:500], "basis": "decompose"})
            graph.update_revision_metadata(old, {"status": "superseded", "superseded_by": new})
            w.counts["supersedes"] += 1
        for index, link in enumerate(parts.contradicts):
            new, other = w.fact(Fact(link.statement)), w.other_fact(link.other, f"contradicts[{index}].conflicts_with")
            w.edge(new, other, "CONTRADICTS", {"reason": link.reason[:500], "basis": "decompose"})
            w.counts["contradicts"] += 1
        w.write_edges()
        return w.counts

    return graph.atomic(write)


# -- maintenance ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Merge:
    canonical: Revision
    duplicate: Revision
    why: str  # "alias" / "statement" / "model" / "decision"


@dataclass
class MaintenancePlan:
    entity_merges: list[Merge] = field(default_factory=list)
    fact_merges: list[Merge] = field(default_factory=list)
    decision_dupes: list[Merge] = field(default_factory=list)
    orphans: list[Revision] = field(default_factory=list)
    llm_merges: list[Merge] = field(default_factory=list)
    notes: dict[str, str] = field(default_factory=dict)

    def counts(self) -> dict[str, Any]:
        return {"entities_merged": len(self.entity_merges) + len(self.llm_merges),
                "facts_merged": len(self.fact_merges), "orphans_pruned": len(self.orphans),
                "decisions_deduped": len(self.decision_dupes), "llm_merges": len(self.llm_merges), **self.notes}


def nodes(graph: GraphStore, project: str, kind: str, space: str | None = None) -> list[Revision]:
    """The current revisions of a project's live items of ``kind`` (``space``: only that space), oldest
    first, at most ``MAX_LISTED``."""
    context = f"{project}/{space}" if space else project
    page = graph.search_items(context_filter=context, kind_filter=kind, page_size=MAX_LISTED)
    items = [i.kref for i in page.items if not i.deprecated]
    current = graph.current_revisions(items)
    return sorted((r for r in current.values() if not r.deprecated), key=lambda r: (r.created_at, r.kref))


def plan_maintenance(graph: GraphStore, project: str, code_project: str | None) -> MaintenancePlan:
    plan = MaintenancePlan()
    entities = nodes(graph, project, ENTITY_KIND, ENTITY_SPACE)
    plan.entity_merges = _merge_by(entities, lambda r: [_tokens(r.metadata.get("name", "")), *(
        _tokens(a) for a in records.json_strings(r.metadata.get("aliases")))], "alias")
    facts = nodes(graph, project, FACT_KIND, FACT_SPACE)
    plan.fact_merges = _merge_by(facts, lambda r: [_tokens(r.metadata.get("statement", ""))], "statement")
    merged = {m.duplicate.kref for m in plan.entity_merges + plan.fact_merges}
    plan.orphans = [r for r in entities + facts if r.kref not in merged and not _has_edges(graph, r.kref)]
    if code_project:
        decisions = nodes(graph, code_project, DECISION_KIND)
        plan.decision_dupes = _merge_by(decisions, lambda r: [_tokens(r.metadata.get("title", "") + " " +
                                                                      r.metadata.get("decision", ""))], "decision")
    return plan


def model_merges(plan: MaintenancePlan, entities: list[Revision], pairs: list[tuple[str, str]]) -> None:
    """Add the merges a model proposed (canonical name, duplicate name) among ``entities`` that are not
    merged already; names it made up are ignored."""
    merged = {m.duplicate.kref for m in plan.entity_merges} | {m.canonical.kref for m in plan.entity_merges}
    by_name = {_tokens(r.metadata.get("name", "")): r for r in entities}
    for canonical_name, duplicate_name in pairs:
        canonical, duplicate = by_name.get(_tokens(canonical_name)), by_name.get(_tokens(duplicate_name))
        if canonical is None or duplicate is None or canonical.kref == duplicate.kref:
            continue
        if duplicate.kref in merged or canonical.kref in merged:
            continue
        plan.llm_merges.append(Merge(canonical, duplicate, "model"))
        merged |= {canonical.kref, duplicate.kref}


def apply_maintenance(graph: GraphStore, plan: MaintenancePlan) -> dict[str, int]:
    """Carry out ``plan`` (inside the caller's transaction): a merged duplicate's edges move to the node
    it merges into, its aliases too, and it is deprecated with ``merged_into``; orphans are deprecated.
    Returns the edges moved."""
    repointed = 0
    for merge in plan.entity_merges + plan.llm_merges + plan.fact_merges + plan.decision_dupes:
        repointed += _repoint(graph, merge)
        if merge.why in ("alias", "model"):
            aliases = [merge.duplicate.metadata.get("name", ""),
                       *records.json_strings(merge.duplicate.metadata.get("aliases")),
                       *records.json_strings(merge.canonical.metadata.get("aliases"))]
            graph.update_revision_metadata(merge.canonical.kref, {"aliases": json.dumps(
                [a for a in dict.fromkeys(aliases) if a and a != merge.canonical.metadata.get("name")])})
        graph.update_revision_metadata(merge.duplicate.kref, {"merged_into": merge.canonical.kref})
        graph.set_deprecated(merge.duplicate.item_kref, True)
    for orphan in plan.orphans:
        graph.update_revision_metadata(orphan.kref, {"pruned": "orphan"})
        graph.set_deprecated(orphan.item_kref, True)
    return {"edges_repointed": repointed}


def _merge_by(revisions: list[Revision], keys: Any, why: str) -> list[Merge]:
    """Group revisions sharing any non-empty key; the oldest of a group is kept, the others merge into it."""
    owner: dict[str, Revision] = {}
    merges: list[Merge] = []
    for revision in revisions:  # oldest first
        found = [k for k in keys(revision) if k]
        canonical = next((owner[k] for k in found if k in owner), None)
        if canonical is not None:
            merges.append(Merge(canonical, revision, why))
        for k in found:
            owner.setdefault(k, canonical or revision)
    return merges


def _has_edges(graph: GraphStore, kref: str) -> bool:
    return bool(graph.get_edges(kref, direction="both", page_size=1).items)


def _repoint(graph: GraphStore, merge: Merge) -> int:
    moved = 0
    keep, gone = merge.canonical.kref, merge.duplicate.kref
    for direction in ("outgoing", "incoming"):
        for edge in _all_edges(graph, gone, direction):
            source = keep if edge.source_kref == gone else edge.source_kref
            target = keep if edge.target_kref == gone else edge.target_kref
            if source != target:
                graph.create_edge(source, target, edge.edge_type, dict(edge.metadata))
                moved += 1
    return moved


def _all_edges(graph: GraphStore, kref: str, direction: str) -> list[Any]:
    return every_item(lambda cursor: graph.get_edges(kref, direction=direction, cursor=cursor), MAX_LISTED)
