"""A graph with every record type of the export format, built through the store's own operations, and the
helpers the portability tests share."""

from __future__ import annotations

from pathlib import Path

from appliance.graph import GraphStore


def populate(graph: GraphStore, artifact_root: Path) -> dict[str, str]:
    """Projects, nested spaces, items with several revisions, tags moved over time, deprecated items and
    revisions, edges of several types, a bundle with a removed member, artifacts with and without a file,
    metadata and attributes. Returns a few krefs the tests look at."""
    graph.create_project("Alpha", "the first project", {"owner": "ops"})
    graph.create_project("Beta")
    graph.set_deprecated("kref://Beta")
    graph.create_space("/Alpha", "notes", {"colour": "blue"})
    graph.create_space("/Alpha/notes", "deep")
    graph.create_space("/Alpha/notes/deep", "deeper")
    graph.create_space("/Beta", "misc")
    plan = graph.create_item("/Alpha/notes", "plan", "note", {"title": "The plan"})
    revisions = [graph.create_revision(plan.kref, {"text": f"plan version {n}", "übung": "ja"}) for n in (1, 2, 3)]
    graph.tag_revision(revisions[0].kref, "published")
    graph.tag_revision(revisions[1].kref, "published")  # the tag moves: its first span closes
    graph.tag_revision(revisions[2].kref, "review")
    graph.untag_revision(revisions[2].kref, "review")
    graph.set_deprecated(revisions[0].kref)
    graph.set_attribute(plan.kref, "priority", "high")
    graph.set_attribute(revisions[1].kref, "checked", "yes")
    old = graph.create_item("/Alpha/notes/deep/deeper", "old", "fact", {"text": "an old fact"})
    old_rev = graph.create_revision(old.kref, {"text": "an old fact"})
    graph.set_deprecated(old.kref)
    misc = graph.create_item("/Beta/misc", "thing", "note")
    misc_rev = graph.create_revision(misc.kref, {"text": "beta thing"})
    graph.create_edge(revisions[2].kref, revisions[1].kref, "DERIVED_FROM", {"why": "edit"})
    graph.create_edge(revisions[2].kref, old_rev.kref, "DEPENDS_ON")
    graph.create_edge(old_rev.kref, misc_rev.kref, "REFERENCED")
    bundle = graph.create_bundle("/Alpha/notes", "reading")
    graph.add_bundle_member(bundle.kref, plan.kref)
    graph.add_bundle_member(bundle.kref, old.kref, {"note": "for context"})
    graph.remove_bundle_member(bundle.kref, old.kref)
    folder = artifact_root / "Alpha" / "notes"
    folder.mkdir(parents=True, exist_ok=True)
    doc = folder / "plan-3-abcd1234.md"
    doc.write_text("# The plan\n\nversion 3, in full.\n")
    graph.create_artifact(revisions[2].kref, "plan.md", str(doc), {"mime": "text/markdown"})
    graph.create_artifact(revisions[2].kref, "site", "https://example.invalid/plan")
    graph.set_default_artifact(revisions[2].kref, "plan.md")
    return {"plan": plan.kref, "revision": revisions[2].kref, "bundle": bundle.kref, "doc": str(doc)}
