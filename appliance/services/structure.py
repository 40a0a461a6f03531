"""The structure of the graph: projects, spaces and items (list, get, create, delete), item search, metadata,
deprecation and kref resolution, in the reference tools' result shapes.

Creating a space or an item that exists returns it (``created: false``; an item gets the given metadata
merged in), as Kumiho's server does for the requests its clients send; creating a project that exists is
refused, since its description and visibility would otherwise be silently dropped. Deleting a project
archives it unless ``force``; a forced deletion is the two-call impact snapshot of appliance/core/deletion.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from appliance.core import kref as krefs
from appliance.core.deletion import DeletionImpact, confirmed_snapshot
from appliance.core.model import Space
from appliance.errors import AlreadyExists, InvalidArgument, KumihoError
from appliance.graph import GraphStore
from appliance.memory import views
from appliance.memory.client import Client
from appliance.operations import graph as ops

if TYPE_CHECKING:
    from appliance.services import Handler

# Listings without paging parameters in the reference schema answer at most this many entries (and say so).
MAX_LISTED = 1000


class StructureService:
    def __init__(self, graph: GraphStore) -> None:
        self.graph = graph

    def handlers(self) -> dict[str, Handler]:
        return {
            "kumiho_list_projects": self.list_projects, "kumiho_get_project": self.get_project,
            "kumiho_create_project": self.create_project, "kumiho_delete_project": self.delete_project,
            "kumiho_get_spaces": self.get_spaces, "kumiho_get_space": self.get_space,
            "kumiho_create_space": self.create_space, "kumiho_delete_space": self.delete_space,
            "kumiho_get_item": self.get_item, "kumiho_search_items": self.search_items,
            "kumiho_create_item": self.create_item, "kumiho_delete_item": self.delete_item,
            "kumiho_set_metadata": self.set_metadata, "kumiho_deprecate_item": self.deprecate_item,
            "kumiho_resolve_kref": self.resolve_kref, "kumiho_get_revision_by_tag": self.get_revision_by_tag,
        }

    # -- projects ---------------------------------------------------------------------------------------
    def list_projects(self, args: ops.ListProjectsInput, client: Client) -> dict[str, Any]:
        projects = [views.project_view(p) for p in self.graph.list_projects()]
        return {"projects": projects, "count": len(projects)}

    def get_project(self, args: ops.GetProjectInput, client: Client) -> dict[str, Any]:
        with _fields(project="name"):
            return views.project_view(self.graph.get_project(args.name))

    def create_project(self, args: ops.CreateProjectInput, client: Client) -> dict[str, Any]:
        try:
            project = self.graph.create_project(args.name, args.description, allow_public=args.allow_public,
                                                exists_error=True)
        except AlreadyExists:
            archived = self.graph.get_project(args.name).deprecated
            raise AlreadyExists(f"name: project {args.name!r} already exists"
                                + (" (archived)" if archived else "") + "; choose another name", field="name") from None
        return {"created": True, "project": views.project_view(project)}

    def delete_project(self, args: ops.DeleteProjectInput, client: Client) -> dict[str, Any]:
        name = args.project_name
        snapshot = confirmed_snapshot(args.force, args.confirmed, args.impact_snapshot_id, args.impact_snapshot_hash)
        with _fields(project="project_name"):
            if not args.force:
                self.graph.delete_project(name)
                return {"deleted": True, "archived": True, "project_name": name, "force": False}
            if snapshot is None:
                return _confirmation(self.graph.deletion_impact(name))
            gone = self.graph.hard_delete_project(name, *snapshot)
        return {"deleted": True, "project_name": name, "force": True, "impact_snapshot_id": gone.snapshot_id,
                "removed": gone.counts}

    # -- spaces -----------------------------------------------------------------------------------------
    def get_spaces(self, args: ops.GetSpacesInput, client: Client) -> dict[str, Any]:
        with _fields(project="project_name"):
            self.graph.get_project(args.project_name)
        spaces: list[Space] = []
        cursor, total = None, 0
        while len(spaces) < MAX_LISTED:
            page = self.graph.list_spaces("/" + args.project_name, recursive=args.recursive,
                                          page_size=MAX_LISTED - len(spaces), cursor=cursor)
            spaces += page.items
            total, cursor = page.total_count, page.next_cursor
            if cursor is None:
                break
        return {"project": args.project_name, "spaces": [views.space_view(s) for s in spaces],
                "count": len(spaces), **_truncation(len(spaces), total)}

    def get_space(self, args: ops.GetSpaceInput, client: Client) -> dict[str, Any]:
        return views.space_view(self.graph.get_space(args.space_path))

    def create_space(self, args: ops.CreateSpaceInput, client: Client) -> dict[str, Any]:
        with _fields(project="project_name"):
            self.graph.get_project(args.project_name)
        parent = "/" + args.project_name
        if args.parent_path is not None:
            segments = krefs.parse_space_path(args.parent_path, "parent_path")
            if segments[0] != args.project_name:
                raise InvalidArgument(f"parent_path: give a space of project {args.project_name!r}, such as "
                                      f"/{args.project_name}/{segments[-1]}, or leave it out for the project's "
                                      "top level", field="parent_path")
            parent = krefs.space_path(segments)
        with _fields(space_path="parent_path"):
            try:
                space, created = self.graph.create_space(parent, args.space_name, exists_error=True), True
            except AlreadyExists:
                space, created = self.graph.get_space(f"{parent}/{args.space_name}"), False
        return {"created": created, "space": views.space_view(space)}

    def delete_space(self, args: ops.DeleteSpaceInput, client: Client) -> dict[str, Any]:
        deleted = self.graph.delete_space(args.space_path, force=args.force)
        return {"deleted": deleted, "space_path": args.space_path, "force": args.force}

    # -- items ------------------------------------------------------------------------------------------
    def get_item(self, args: ops.GetItemInput, client: Client) -> dict[str, Any]:
        return views.item_view(self.graph.get_item(args.kref))

    def search_items(self, args: ops.SearchItemsInput, client: Client) -> dict[str, Any]:
        # auth_token: Kumiho's clients send their account token; a local appliance has no accounts
        page = self.graph.search_items(context_filter=args.context_filter, name_filter=args.name_filter,
                                       kind_filter=args.kind_filter, page_size=MAX_LISTED)
        items = [views.item_view(i, args.include_metadata) for i in page.items]
        return {"items": items, "count": len(items),
                "filters": {"context": args.context_filter, "name": args.name_filter, "kind": args.kind_filter},
                **_truncation(len(items), page.total_count)}

    def create_item(self, args: ops.CreateItemInput, client: Client) -> dict[str, Any]:
        try:
            item = self.graph.create_item(args.space_path, args.item_name, args.kind, args.metadata,
                                          exists_error=True)
            return {"created": True, "item": views.item_view(item)}
        except AlreadyExists:
            kref = str(krefs.item_kref(*_project_and_spaces(args.space_path), args.item_name, args.kind))
        item = self.graph.update_item_metadata(kref, args.metadata) if args.metadata else self.graph.get_item(kref)
        return {"created": False, "item": views.item_view(item)}

    def delete_item(self, args: ops.DeleteItemInput, client: Client) -> dict[str, Any]:
        with _fields(kref="item_kref"):
            deleted = self.graph.delete_item(args.item_kref, force=args.force)
        return {"deleted": deleted, "item_kref": args.item_kref, "force": args.force}

    def set_metadata(self, args: ops.SetMetadataInput, client: Client) -> dict[str, Any]:
        parsed = krefs.parse(args.kref)
        if parsed.artifact:
            raise InvalidArgument("kref: name an item (no ?r=) or a revision (?r=N), not an artifact",
                                  field="kref")
        if parsed.revision is not None or parsed.tag or parsed.time:
            revision = self.graph.update_revision_metadata(args.kref, args.metadata)
            return {"updated": True, "kref": revision.kref, "metadata": dict(revision.metadata)}
        item = self.graph.update_item_metadata(args.kref, args.metadata)
        return {"updated": True, "kref": item.kref, "metadata": dict(item.metadata)}

    def deprecate_item(self, args: ops.DeprecateItemInput, client: Client) -> dict[str, Any]:
        parsed = krefs.parse(args.item_kref, "item_kref")
        if not parsed.is_item or parsed.revision is not None:
            raise InvalidArgument("item_kref: name an item (kref://project/space/name.kind)", field="item_kref")
        with _fields(kref="item_kref"):
            found = self.graph.set_deprecated(args.item_kref, args.deprecated)
        return {"updated": True, "item_kref": found.kref, "deprecated": args.deprecated}

    # -- krefs and tags ---------------------------------------------------------------------------------
    def resolve_kref(self, args: ops.ResolveKrefInput, client: Client) -> dict[str, Any]:
        found = self.graph.resolve(args.kref)
        location = None
        if found.artifact is not None:
            location = found.artifact.location
        elif found.revision is not None and found.revision.default_artifact:
            default = f"{found.revision.kref}&a={found.revision.default_artifact}"
            location = self.graph.get_artifact(default).location
        return {"kref": found.kref, "target": found.target, "location": location, "resolved": location is not None}

    def get_revision_by_tag(self, args: ops.GetRevisionByTagInput, client: Client) -> dict[str, Any]:
        with _fields(kref="item_kref"):
            return views.revision_view(self.graph.revision_by_tag(args.item_kref, args.tag))


def _confirmation(impact: DeletionImpact) -> dict[str, Any]:
    """The first answer of a forced project deletion: what would go, what stands in the way, and how to
    confirm."""
    blocked = (f" First remove the {impact.blocker_count} reference(s) from other projects listed in "
               "blockers (delete_edge, remove_bundle_member).") if impact.blocker_count else ""
    return {"deleted": False, "requires_confirmation": True, "project_name": impact.project_name, "force": True,
            "impact_snapshot_id": impact.snapshot_id, "impact_snapshot_hash": impact.snapshot_hash,
            "blockers": impact.blockers, "blocker_count": impact.blocker_count,
            "descendants": impact.descendants, "descendant_count": impact.descendant_count,
            "counts": impact.counts,
            "message": "Nothing was deleted. To delete this project and everything in it for good, call again "
                       "with force=true, these impact_snapshot_id and impact_snapshot_hash, and confirmed=true; "
                       "the deletion is refused if the project changes in between." + blocked}


def _truncation(listed: int, total: int) -> dict[str, Any]:
    return {"total": total, "truncated": True} if listed < total else {}


def _project_and_spaces(space_path: str) -> tuple[str, tuple[str, ...]]:
    segments = krefs.parse_space_path(space_path)
    return segments[0], segments[1:]


@contextmanager
def _fields(**renamed: str) -> Iterator[None]:
    """Errors from the store name its parameters (``project``, ``kref``…); the caller sent the tool's own
    (``project_name``, ``item_kref``…): name those."""
    try:
        yield
    except KumihoError as exc:
        if exc.field in renamed:
            exc.field = renamed[exc.field]
        raise
