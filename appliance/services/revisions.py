"""Revisions, tags, artifacts and bundles: the reference's graph tools over an item's history.

``published`` is a moving pointer (tagging another revision moves it), not a freeze: a published revision
takes new tags and its item new revisions; ``latest`` follows the newest revision by itself. An artifact's
location is a path or URI the caller gives and the appliance never reads; one that points into the data
directory must stay inside it once resolved.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from appliance.core import kref as krefs
from appliance.core import names
from appliance.core.model import Artifact, Item, Revision, every_item
from appliance.errors import AlreadyExists, InvalidArgument, KumihoError, NotFound
from appliance.fsutil import inside
from appliance.graph import GraphStore
from appliance.memory.client import Client
from appliance.memory.views import artifact_view, item_view, revision_view
from appliance.operations.revisions import (
    ArtifactInput,
    ArtifactsInput,
    BatchRevisionsInput,
    BundleInput,
    BundleMemberInput,
    CreateArtifactInput,
    CreateBundleInput,
    CreateRevisionInput,
    DeleteRevisionInput,
    ItemRevisionsInput,
    LocationInput,
    RevisionAsOfInput,
    RevisionInput,
    TagInput,
)

if TYPE_CHECKING:
    from appliance.services import Handler

_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_FILE_URI = "file://"
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_PAGE = 1000  # revisions read per store call while listing all of an item's revisions


@contextmanager
def _named(field: str) -> Iterator[None]:
    """The store names a kref it cannot follow ``kref``; the tool's argument has its own name."""
    try:
        yield
    except KumihoError as exc:
        if exc.field in (None, "kref"):
            exc.field = field
        raise


class RevisionService:
    def __init__(self, graph: GraphStore, data_root: Path) -> None:
        self.graph, self.data_root = graph, data_root

    def handlers(self) -> dict[str, Handler]:
        return {
            "kumiho_get_item_revisions": self.get_item_revisions, "kumiho_get_revision": self.get_revision,
            "kumiho_get_revision_as_of": self.get_revision_as_of,
            "kumiho_batch_get_revisions": self.batch_get_revisions,
            "kumiho_create_revision": self.create_revision, "kumiho_delete_revision": self.delete_revision,
            "kumiho_tag_revision": self.tag_revision, "kumiho_untag_revision": self.untag_revision,
            "kumiho_get_artifacts": self.get_artifacts, "kumiho_get_artifact": self.get_artifact,
            "kumiho_get_artifacts_by_location": self.get_artifacts_by_location,
            "kumiho_create_artifact": self.create_artifact, "kumiho_delete_artifact": self.delete_artifact,
            "kumiho_get_bundle": self.get_bundle, "kumiho_create_bundle": self.create_bundle,
            "kumiho_add_bundle_member": self.add_bundle_member,
            "kumiho_remove_bundle_member": self.remove_bundle_member,
            "kumiho_get_bundle_members": self.get_bundle_members,
        }

    # -- revisions ----------------------------------------------------------------------------------------
    def get_item_revisions(self, args: ItemRevisionsInput, client: Client) -> dict[str, Any]:
        item = self._item(args.item_kref, "item_kref")
        # every revision: agents read one answer
        revisions = every_item(lambda cursor: self.graph.list_revisions(item.kref, page_size=_PAGE, cursor=cursor))
        return {"item_kref": item.kref, "revisions": [revision_view(r, args.include_metadata) for r in revisions],
                "count": len(revisions)}

    def get_revision(self, args: RevisionInput, client: Client) -> dict[str, Any]:
        krefs.parse(args.kref, "kref")
        return revision_view(self.graph.get_revision(args.kref))

    def get_revision_as_of(self, args: RevisionAsOfInput, client: Client) -> dict[str, Any]:
        item = self._item(args.item_kref, "item_kref")
        with _named("time"):  # the item exists: what is missing is a holder of the tag at that time
            return revision_view(self.graph.revision_by_tag(item.kref, args.tag, args.time))

    def batch_get_revisions(self, args: BatchRevisionsInput, client: Client) -> dict[str, Any]:
        wanted, items = list(args.revision_krefs or []), list(args.item_krefs or [])
        if not wanted and not items:
            raise InvalidArgument("revision_krefs: give revision_krefs, or item_krefs with a tag (or both)",
                                  field="revision_krefs")
        found, missing = self.graph.batch_revisions(wanted, items, args.tag)
        if missing and not args.allow_partial:
            field = missing[0][0]
            shown = ", ".join(k for _, k in missing[:5]) + (" …" if len(missing) > 5 else "")
            raise NotFound(f"{field}: {len(missing)} of the {len(wanted) + len(items)} requested revisions do "
                           f"not exist ({shown}); pass allow_partial=true to get the others", field=field)
        return {"revisions": [revision_view(r) for r in found], "not_found": [k for _, k in missing],
                "found_count": len(found), "requested_count": len(wanted) + len(items)}

    def create_revision(self, args: CreateRevisionInput, client: Client) -> dict[str, Any]:
        parsed = krefs.parse(args.item_kref, "item_kref")
        if parsed.revision is not None or parsed.tag is not None or parsed.time is not None:
            raise InvalidArgument("item_kref: name the item without ?r= or ?t= (the new revision gets the next "
                                  "number)", field="item_kref")
        names.metadata(args.metadata)  # before anything is written: errors name metadata.<key>

        def job() -> Revision:
            item = self._item(args.item_kref, "item_kref")
            if item.kind == names.RESERVED_KIND:
                raise InvalidArgument(f"item_kref: {item.kref} is a bundle, whose revisions record member "
                                      "changes; use kumiho_add_bundle_member", field="item_kref")
            return self.graph.create_revision(item.kref, dict(args.metadata or {}))

        return {"created": True, "revision": revision_view(self.graph.atomic(job))}

    def delete_revision(self, args: DeleteRevisionInput, client: Client) -> dict[str, Any]:
        if krefs.parse(args.revision_kref, "revision_kref").revision is None:
            raise InvalidArgument("revision_kref: name the revision to delete with ?r=<number>",
                                  field="revision_kref")
        with _named("revision_kref"):
            gone = self.graph.delete_revision(args.revision_kref, force=args.force)
        return {"deleted": True, "revision_kref": gone.kref, "force": args.force}

    # -- tags -----------------------------------------------------------------------------------------------
    def tag_revision(self, args: TagInput, client: Client) -> dict[str, Any]:
        krefs.parse(args.revision_kref, "revision_kref")
        names.user_tag(args.tag)
        with _named("revision_kref"):
            revision = self.graph.tag_revision(args.revision_kref, args.tag)
        return {"tagged": True, "revision_kref": revision.kref, "tag": args.tag}

    def untag_revision(self, args: TagInput, client: Client) -> dict[str, Any]:
        """``untagged`` is false when the revision did not hold the tag (nothing changed)."""
        krefs.parse(args.revision_kref, "revision_kref")
        names.user_tag(args.tag)

        def job() -> tuple[Revision, bool]:
            revision = self.graph.get_revision(args.revision_kref)  # before: ?t=<tag> resolves no more after
            return revision, self.graph.untag_revision(revision.kref, args.tag)

        with _named("revision_kref"):
            revision, untagged = self.graph.atomic(job)
        return {"untagged": untagged, "revision_kref": revision.kref, "tag": args.tag}

    # -- artifacts ----------------------------------------------------------------------------------------
    def get_artifacts(self, args: ArtifactsInput, client: Client) -> dict[str, Any]:
        krefs.parse(args.revision_kref, "revision_kref")
        with _named("revision_kref"):
            revision = self.graph.get_revision(args.revision_kref)
            artifacts = self.graph.list_artifacts(revision.kref)
        return {"revision_kref": revision.kref, "artifacts": [artifact_view(a) for a in artifacts],
                "count": len(artifacts)}

    def get_artifact(self, args: ArtifactInput, client: Client) -> dict[str, Any]:
        krefs.parse(args.artifact_kref, "artifact_kref")
        with _named("artifact_kref"):
            return artifact_view(self.graph.get_artifact(args.artifact_kref))

    def get_artifacts_by_location(self, args: LocationInput, client: Client) -> dict[str, Any]:
        location = self._location(args.location)
        artifacts = self.graph.artifacts_by_location(location)
        return {"location": location, "artifacts": [artifact_view(a) for a in artifacts], "count": len(artifacts)}

    def create_artifact(self, args: CreateArtifactInput, client: Client) -> dict[str, Any]:
        """An artifact of that name already pointing to the same location is returned (``created: false``);
        pointing elsewhere, it is an ``already_exists`` error rather than a silent keep of the old one."""
        krefs.parse(args.revision_kref, "revision_kref")
        names.artifact_name(args.name, "name")
        location = self._location(args.location)

        def job() -> tuple[Artifact, bool]:
            revision = self.graph.get_revision(args.revision_kref)
            try:
                found = self.graph.get_artifact(f"{revision.kref}&a={args.name}")
            except NotFound:
                return self.graph.create_artifact(revision.kref, args.name, location), True
            if found.location != location:
                raise AlreadyExists(f"name: {found.kref} exists and points to {found.location!r}; delete it "
                                    "first or choose another name", field="name")
            return found, False

        with _named("revision_kref"):
            artifact, created = self.graph.atomic(job)
        return {"created": created, "artifact": artifact_view(artifact)}

    def delete_artifact(self, args: ArtifactInput, client: Client) -> dict[str, Any]:
        if krefs.parse(args.artifact_kref, "artifact_kref").artifact is None:
            raise InvalidArgument("artifact_kref: name the artifact to delete with ?r=<number>&a=<name>",
                                  field="artifact_kref")

        def job() -> Artifact:
            artifact = self.graph.get_artifact(args.artifact_kref)
            self.graph.delete_artifact(artifact.kref)
            return artifact

        with _named("artifact_kref"):
            artifact = self.graph.atomic(job)
        return {"deleted": True, "artifact_kref": artifact.kref}

    def _location(self, location: str) -> str:
        return artifact_location(self.data_root, location)

    # -- bundles ------------------------------------------------------------------------------------------
    def get_bundle(self, args: BundleInput, client: Client) -> dict[str, Any]:
        return item_view(self._bundle(args.bundle_kref))

    def create_bundle(self, args: CreateBundleInput, client: Client) -> dict[str, Any]:
        """The bundle already there is returned as it is (``created: false``)."""
        segments = krefs.parse_space_path(args.space_path, "space_path")
        names.item_name(args.bundle_name, "bundle_name")
        names.metadata(args.metadata)
        kref = f"{krefs.SCHEME}{'/'.join(segments)}/{args.bundle_name}.{names.RESERVED_KIND}"

        def job() -> tuple[Item, bool]:
            try:
                return self.graph.get_bundle(kref), False
            except NotFound:
                return self.graph.create_bundle(args.space_path, args.bundle_name, dict(args.metadata or {})), True

        bundle, created = self.graph.atomic(job)
        return {"created": created, "bundle": item_view(bundle)}

    def add_bundle_member(self, args: BundleMemberInput, client: Client) -> dict[str, Any]:
        bundle, member = self._bundle(args.bundle_kref), self._item(args.item_kref, "item_kref")
        with _named("item_kref"):  # already a member: already_exists naming the item
            self.graph.add_bundle_member(bundle.kref, member.kref)
        return {"added": True, "bundle_kref": bundle.kref, "item_kref": member.kref}

    def remove_bundle_member(self, args: BundleMemberInput, client: Client) -> dict[str, Any]:
        bundle, member = self._bundle(args.bundle_kref), self._item(args.item_kref, "item_kref")
        with _named("item_kref"):
            self.graph.remove_bundle_member(bundle.kref, member.kref)
        return {"removed": True, "bundle_kref": bundle.kref, "item_kref": member.kref}

    def get_bundle_members(self, args: BundleInput, client: Client) -> dict[str, Any]:
        bundle = self._bundle(args.bundle_kref)
        members, number = self.graph.bundle_members(bundle.kref)
        return {"bundle_kref": bundle.kref, "revision_number": number, "count": len(members), "members": [
            {"item_kref": m.item_kref, "added_at": m.added_at, "added_by": m.added_by,
             "added_by_username": m.added_by_username, "added_in_revision": m.added_in_revision}
            for m in members]}

    # -- lookups that name the tool's argument in their errors --------------------------------------------
    def _item(self, kref: str, field: str) -> Item:
        krefs.parse(kref, field)
        with _named(field):
            return self.graph.get_item(kref)

    def _bundle(self, kref: str) -> Item:
        krefs.parse(kref, "bundle_kref")
        with _named("bundle_kref"):
            return self.graph.get_bundle(kref)


def artifact_location(data_root: Path, location: str) -> str:
    """The location as given, unless it points into the data directory: then it must stay inside once
    ``..`` and symbolic links are resolved, and is kept resolved (so a lookup finds it in any spelling)."""
    if not location.strip() or _CONTROL.search(location):
        raise InvalidArgument("location: give the file path or URI the artifact points to (no control "
                              "characters)", field="location")
    is_file_uri = location.startswith(_FILE_URI)
    if _URI.match(location) and not is_file_uri:
        return location  # a URI: not a file of this machine
    path = Path(location[len(_FILE_URI):] if is_file_uri else location)
    if not path.is_absolute():
        return location  # relative to the caller, not to this process: kept as given
    root = data_root.resolve()
    base = next((b for b in (data_root, root) if path.is_relative_to(b)), None)
    if base is None and not path.resolve().is_relative_to(root):
        return location  # outside the data directory
    try:
        resolved = inside(root, *path.relative_to(base).parts, field="location") if base else path.resolve()
    except InvalidArgument:
        raise InvalidArgument(f"location: {location[:200]!r} points into the data directory but leads out of "
                              "it ('..' or a symbolic link); give the file's real path", field="location") from None
    return (_FILE_URI if is_file_uri else "") + str(resolved)
