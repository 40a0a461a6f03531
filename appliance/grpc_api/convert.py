"""The appliance's entities as Kumiho's messages, and Kumiho's paging as the graph store's. Pure.

The graph model (``appliance.core.model``) mirrors Kumiho's messages field for field, so each conversion is
a copy."""

from __future__ import annotations

from typing import Any

from google.protobuf.message import Message

from appliance.core.model import Artifact, BundleMember, Edge, Item, Page, Project, Revision, Space
from appliance.errors import InvalidArgument
from appliance.grpc_api.descriptor import message

DEFAULT_PAGE_SIZE = 100  # the SDK's own default
MAX_PAGE_SIZE = 1000  # the SDK's documented range is 1–1000


def kref(uri: str | None) -> Message:
    return message("Kref")(uri=uri or "")


def uri(value: Any, field: str, *, required: bool = True) -> str:
    """The kref a request carries (a ``Kref`` message or a plain string), or INVALID_ARGUMENT naming the
    field when it is required and empty."""
    text = value if isinstance(value, str) else getattr(value, "uri", "")
    if required and not text:
        raise InvalidArgument(f"{field}: give a kref (kref://project/space/item.kind)", field=field)
    return str(text)


def status(message_text: str = "", success: bool = True) -> Message:
    return message("StatusResponse")(success=success, message=message_text)


def project_response(project: Project) -> Message:
    return message("ProjectResponse")(
        project_id=project.project_id, name=project.name, description=project.description,
        created_at=project.created_at, updated_at=project.updated_at, deprecated=project.deprecated,
        allow_public=project.allow_public, metadata=dict(project.metadata))


def space_response(space: Space) -> Message:
    return message("SpaceResponse")(
        path=space.path, name=space.name, type=space.type, created_at=space.created_at,
        modified_at=space.modified_at, author=space.author, username=space.username, metadata=dict(space.metadata))


def item_response(item: Item) -> Message:
    return message("ItemResponse")(
        kref=kref(item.kref), name=item.name, item_name=item.item_name, kind=item.kind,
        created_at=item.created_at, modified_at=item.modified_at, author=item.author, username=item.username,
        metadata=dict(item.metadata), deprecated=item.deprecated)


def revision_response(revision: Revision) -> Message:
    response = message("RevisionResponse")(
        kref=kref(revision.kref), item_kref=kref(revision.item_kref), number=revision.number,
        tags=list(revision.tags), metadata=dict(revision.metadata), created_at=revision.created_at,
        modified_at=revision.modified_at, author=revision.author, deprecated=revision.deprecated,
        published=revision.published, latest=revision.latest, username=revision.username,
        name=revision.item_kref.rsplit("/", 1)[-1])
    if revision.default_artifact:
        response.default_artifact = revision.default_artifact
    return response


def artifact_response(artifact: Artifact) -> Message:
    return message("ArtifactResponse")(
        kref=kref(artifact.kref), location=artifact.location, revision_kref=kref(artifact.revision_kref),
        item_kref=kref(artifact.item_kref), created_at=artifact.created_at, modified_at=artifact.modified_at,
        author=artifact.author, metadata=dict(artifact.metadata), deprecated=artifact.deprecated,
        username=artifact.username, name=artifact.name)


def edge(value: Edge) -> Message:
    return message("Edge")(
        source_kref=kref(value.source_kref), target_kref=kref(value.target_kref), edge_type=value.edge_type,
        metadata=dict(value.metadata), created_at=value.created_at, author=value.author, username=value.username)


def bundle_member(member: BundleMember) -> Message:
    return message("BundleMember")(
        item_kref=kref(member.item_kref), added_at=member.added_at, added_by=member.added_by,
        added_by_username=member.added_by_username, added_in_revision=member.added_in_revision)


def page_request(request: Message, field: str = "pagination") -> tuple[int, str | None]:
    """(page size, cursor) of a request's optional ``PaginationRequest``: the default page when absent, a
    page size of 0 meaning the default too (proto3 cannot tell it from unset); beyond the range refused."""
    if not request.HasField(field):
        return DEFAULT_PAGE_SIZE, None
    paging = getattr(request, field)
    size = paging.page_size or DEFAULT_PAGE_SIZE
    if not 1 <= size <= MAX_PAGE_SIZE:
        raise InvalidArgument(f"{field}.page_size: between 1 and {MAX_PAGE_SIZE}", field=f"{field}.page_size")
    return size, paging.cursor or None


def pagination(page: Page[Any]) -> Message:
    return message("PaginationResponse")(next_cursor=page.next_cursor or "", has_more=page.has_more,
                                         total_count=page.total_count)
