"""The graph: projects, spaces, items, revisions, tags, artifacts, bundles, edges and metadata."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from appliance.core.names import MAX_PATTERN
from appliance.operations.definition import Input, Operation
from appliance.operations.fields import AuthToken, Kref, Name, SpacePath, StringMetadata, Tag

Description = Annotated[str, Field(max_length=4096)]
Pattern = Annotated[str, Field(max_length=MAX_PATTERN)]  # a search filter: a prefix or substring, or a glob
SnapshotId = Annotated[str, Field(max_length=36)]
SnapshotHash = Annotated[str, Field(max_length=64)]


class ListProjectsInput(Input):
    pass


class GetProjectInput(Input):
    name: Name


class CreateProjectInput(Input):
    name: Name
    description: Description = ""
    allow_public: bool = False


class DeleteProjectInput(Input):
    project_name: Name
    force: bool = False
    impact_snapshot_id: SnapshotId | None = None
    impact_snapshot_hash: SnapshotHash | None = None
    confirmed: bool = False


class GetSpacesInput(Input):
    project_name: Name
    recursive: bool = False


class GetSpaceInput(Input):
    space_path: SpacePath


class CreateSpaceInput(Input):
    project_name: Name
    space_name: Name
    parent_path: SpacePath | None = None


class DeleteSpaceInput(Input):
    space_path: SpacePath
    force: bool = False


class GetItemInput(Input):
    kref: Kref


class SearchItemsInput(Input):
    context_filter: Pattern = ""
    name_filter: Pattern = ""
    kind_filter: Name = ""
    include_metadata: bool = False
    auth_token: AuthToken = ""


class CreateItemInput(Input):
    space_path: SpacePath
    item_name: Name
    kind: Name
    metadata: StringMetadata | None = None


class DeleteItemInput(Input):
    item_kref: Kref
    force: bool = False


class SetMetadataInput(Input):
    kref: Kref
    metadata: StringMetadata


class ResolveKrefInput(Input):
    kref: Kref


class GetRevisionByTagInput(Input):
    item_kref: Kref
    tag: Tag = "published"


class DeprecateItemInput(Input):
    item_kref: Kref
    deprecated: bool = True


OPERATIONS = (
    Operation("kumiho_list_projects", "List projects",
              "List the projects (archived ones are left out).",
              ListProjectsInput, read_only=True, idempotent=True),
    Operation("kumiho_get_project", "Get a project",
              "Get a project by name (an archived one too: deprecated=true).",
              GetProjectInput, read_only=True, idempotent=True),
    Operation("kumiho_get_spaces", "List spaces",
              "List the spaces of a project: its top-level spaces, or every space with recursive=true.",
              GetSpacesInput, read_only=True, idempotent=True),
    Operation("kumiho_get_space", "Get a space",
              "Get a space by path (/project/space/sub).",
              GetSpaceInput, read_only=True, idempotent=True),
    Operation("kumiho_get_item", "Get an item",
              "Get an item by kref (kref://project/space/name.kind).",
              GetItemInput, read_only=True, idempotent=True),
    Operation("kumiho_search_items", "Search items",
              "Find items by context (a project/space path prefix or a glob such as project-* or "
              "*/characters/*), name (a substring or a glob such as hero*) and kind (exact). Deprecated items "
              "and archived projects are left out.",
              SearchItemsInput, read_only=True, idempotent=True),
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
    Operation("kumiho_create_project", "Create a project",
              "Create a project (optionally readable without an account: allow_public). Its name must be new.",
              CreateProjectInput),
    Operation("kumiho_create_space", "Create a space",
              "Create a space in a project, under its root or under parent_path; an existing space is returned "
              "as it is (created=false).",
              CreateSpaceInput),
    Operation("kumiho_create_item", "Create an item",
              "Create an item (name + kind) in a space, with optional string metadata; an existing item gets "
              "the metadata merged in (created=false).",
              CreateItemInput),
    Operation("kumiho_delete_project", "Delete a project",
              "Archive a project (hidden from listings and search, nothing removed). force=true deletes it for "
              "good in two calls: the first returns an impact snapshot (what would go, what stands in the way); "
              "call again with its impact_snapshot_id, impact_snapshot_hash and confirmed=true.",
              DeleteProjectInput, destructive=True, idempotent=True),
    Operation("kumiho_delete_space", "Delete a space",
              "Delete a space; one holding spaces or items needs force=true, which deletes them too.",
              DeleteSpaceInput, destructive=True, idempotent=True),
    Operation("kumiho_delete_item", "Delete an item",
              "Delete an item; one with revisions needs force=true, which deletes them too (to hide an item "
              "instead, deprecate it).",
              DeleteItemInput, destructive=True, idempotent=True),
    Operation("kumiho_set_metadata", "Set metadata",
              "Merge string metadata into an item (kref without ?r=) or a revision (kref with ?r=N).",
              SetMetadataInput, destructive=True, idempotent=True),
)
