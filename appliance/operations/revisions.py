"""Revisions, tags, artifacts and bundles: the graph tools that read and change an item's history."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from appliance.operations.definition import Input, Operation
from appliance.operations.fields import Kref, Name, SpacePath, StringMetadata, Tag

# Kumiho's clients batch at most 100 item krefs per call (reference §1.5); revision krefs get the same bound.
BATCH_KREFS = 100
BatchKrefs = Annotated[list[Kref], Field(max_length=BATCH_KREFS)]
Location = Annotated[str, Field(max_length=4096)]  # a file path or URI (memory writes take the same bound)
Time = Annotated[str, Field(max_length=64)]  # YYYYMMDDHHMM or ISO-8601


class ItemRevisionsInput(Input):
    item_kref: Kref
    include_metadata: bool = False


class RevisionInput(Input):
    kref: Kref


class RevisionAsOfInput(Input):
    item_kref: Kref
    tag: Tag
    time: Time


class BatchRevisionsInput(Input):
    revision_krefs: BatchKrefs | None = None
    item_krefs: BatchKrefs | None = None
    tag: Tag = "latest"
    allow_partial: bool = True


class CreateRevisionInput(Input):
    item_kref: Kref
    metadata: StringMetadata | None = None


class DeleteRevisionInput(Input):
    revision_kref: Kref
    force: bool = False


class TagInput(Input):
    revision_kref: Kref
    tag: Tag


class ArtifactsInput(Input):
    revision_kref: Kref


class ArtifactInput(Input):
    artifact_kref: Kref


class LocationInput(Input):
    location: Location


class CreateArtifactInput(Input):
    revision_kref: Kref
    name: Name
    location: Location


class BundleInput(Input):
    bundle_kref: Kref


class CreateBundleInput(Input):
    space_path: SpacePath
    bundle_name: Name
    metadata: StringMetadata | None = None


class BundleMemberInput(Input):
    bundle_kref: Kref
    item_kref: Kref


OPERATIONS = (
    Operation("kumiho_get_item_revisions", "List an item's revisions",
              "List every revision of an item, newest first (metadata only with include_metadata=true).",
              ItemRevisionsInput, read_only=True, idempotent=True),
    Operation("kumiho_get_revision", "Get a revision",
              "Get a revision by kref: ?r=N names one, an item kref means its latest revision, ?t=<tag> the "
              "revision holding that tag.",
              RevisionInput, read_only=True, idempotent=True),
    Operation("kumiho_get_revision_as_of", "Get a revision as of a time",
              "Time travel: the revision of an item that held a tag at a moment (time as YYYYMMDDHHMM or "
              "ISO-8601), e.g. what was published on June 1st.",
              RevisionAsOfInput, read_only=True, idempotent=True),
    Operation("kumiho_batch_get_revisions", "Get several revisions at once",
              "Get many revisions in one call: by revision krefs, or by item krefs and a tag (default latest) "
              "resolved per item. Lists what was not found; allow_partial=false makes any miss an error.",
              BatchRevisionsInput, read_only=True, idempotent=True),
    Operation("kumiho_create_revision", "Create a revision",
              "Create the next revision of an item, with string metadata; it becomes latest.",
              CreateRevisionInput),
    Operation("kumiho_delete_revision", "Delete a revision",
              "Delete a revision with its artifacts and edges. A revision holding published, or one other "
              "revisions link to, is kept unless force=true.",
              DeleteRevisionInput, destructive=True, idempotent=True),
    Operation("kumiho_tag_revision", "Tag a revision",
              "Apply a tag to a revision. A tag names one revision per item: it moves from the revision that "
              "held it (published too).",
              TagInput, idempotent=True),
    Operation("kumiho_untag_revision", "Remove a revision tag",
              "Remove a tag from a revision (latest is automatic and cannot be removed).",
              TagInput, destructive=True, idempotent=True),
    Operation("kumiho_get_artifacts", "List a revision's artifacts",
              "List a revision's artifacts (named file paths or URIs).",
              ArtifactsInput, read_only=True, idempotent=True),
    Operation("kumiho_get_artifact", "Get an artifact",
              "Get one artifact: &a=<name> names it, without it the revision's default artifact.",
              ArtifactInput, read_only=True, idempotent=True),
    Operation("kumiho_get_artifacts_by_location", "Find artifacts by file location",
              "Find the artifacts that point to a file path or URI (reverse lookup).",
              LocationInput, read_only=True, idempotent=True),
    Operation("kumiho_create_artifact", "Create an artifact",
              "Attach a named file path or URI to a revision (the file itself is not read or copied).",
              CreateArtifactInput),
    Operation("kumiho_delete_artifact", "Delete an artifact",
              "Delete an artifact (named with &a=<name>); the file it points to is left alone.",
              ArtifactInput, destructive=True, idempotent=True),
    Operation("kumiho_get_bundle", "Get a bundle",
              "Get a bundle (an item of kind bundle that collects other items).",
              BundleInput, read_only=True, idempotent=True),
    Operation("kumiho_create_bundle", "Create a bundle",
              "Create a bundle in an existing space (the existing one is returned when it is there already).",
              CreateBundleInput),
    Operation("kumiho_add_bundle_member", "Add a bundle member",
              "Add an item to a bundle; each change makes a bundle revision that records it.",
              BundleMemberInput, idempotent=True),
    Operation("kumiho_remove_bundle_member", "Remove a bundle member",
              "Remove an item from a bundle; the bundle's history keeps the change.",
              BundleMemberInput, destructive=True, idempotent=True),
    Operation("kumiho_get_bundle_members", "List bundle members",
              "List a bundle's current members with when and in which bundle revision each was added.",
              BundleInput, read_only=True, idempotent=True),
)
