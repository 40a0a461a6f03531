"""The graph: projects, spaces, items, revisions, tags, artifacts, bundles, edges and metadata."""

from __future__ import annotations

from appliance.operations.definition import Input, Operation
from appliance.operations.fields import Kref, Tag


class ResolveKrefInput(Input):
    kref: Kref


class GetRevisionByTagInput(Input):
    item_kref: Kref
    tag: Tag = "published"


class DeprecateItemInput(Input):
    item_kref: Kref
    deprecated: bool = True


OPERATIONS = (
    Operation("kumiho_resolve_kref", "Resolve a kref",
              "Resolve a kref to its file location (the named or default artifact).",
              ResolveKrefInput, read_only=True, idempotent=True),
    Operation("kumiho_get_revision_by_tag", "Get a revision by tag",
              "Get the revision of an item that holds a tag (default: published).",
              GetRevisionByTagInput, read_only=True, idempotent=True),
    Operation("kumiho_deprecate_item", "Forget a memory",
              "Forget a memory (deprecate an item: hidden from search, restorable) or restore it with "
              "deprecated=false.",
              DeprecateItemInput, destructive=True, idempotent=True),
)
