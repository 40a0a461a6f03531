"""Entity JSON shapes of the reference tools (reference §3.1). Pure."""

from __future__ import annotations

from typing import Any

from appliance.core.model import Artifact, Edge, Item, Project, Revision, Space


def item_view(item: Item, include_metadata: bool = True) -> dict[str, Any]:
    view = {"kref": item.kref, "name": item.name, "item_name": item.item_name, "kind": item.kind,
            "space": item.space_path.lstrip("/"), "created_at": item.created_at, "author": item.author,
            "username": item.username, "deprecated": item.deprecated}
    if include_metadata:
        view["metadata"] = dict(item.metadata)
    return view


def revision_view(revision: Revision, include_metadata: bool = True) -> dict[str, Any]:
    meta = dict(revision.metadata)
    if "type" not in meta and "memory_type" in meta:
        meta["type"] = meta["memory_type"]
    view = {"kref": revision.kref, "item_kref": revision.item_kref, "number": revision.number,
            "latest": revision.latest, "published": revision.published, "tags": list(revision.tags),
            "created_at": revision.created_at, "author": revision.author, "username": revision.username,
            "deprecated": revision.deprecated, "default_artifact": revision.default_artifact}
    if include_metadata:
        view["metadata"] = meta
    return view


def artifact_view(artifact: Artifact) -> dict[str, Any]:
    return {"kref": artifact.kref, "name": artifact.name, "location": artifact.location,
            "revision_kref": artifact.revision_kref, "created_at": artifact.created_at,
            "metadata": dict(artifact.metadata)}


def edge_view(edge: Edge) -> dict[str, Any]:
    return {"source_kref": edge.source_kref, "target_kref": edge.target_kref, "edge_type": edge.edge_type,
            "metadata": dict(edge.metadata), "created_at": edge.created_at}


def project_view(project: Project) -> dict[str, Any]:
    return {"project_id": project.project_id, "name": project.name, "description": project.description,
            "created_at": project.created_at, "updated_at": project.updated_at, "deprecated": project.deprecated,
            "allow_public": project.allow_public}


def space_view(space: Space) -> dict[str, Any]:
    return {"path": space.path, "name": space.name, "type": space.type, "created_at": space.created_at,
            "author": space.author, "username": space.username, "metadata": dict(space.metadata)}
