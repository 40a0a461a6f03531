"""Artifacts: named pointers from a revision to a file or URI (Kumiho never stores file contents)."""

from __future__ import annotations

from typing import Any

from appliance.core import kref as krefs
from appliance.core import names
from appliance.core.model import Artifact
from appliance.errors import InvalidArgument, NotFound
from appliance.graph._support import (
    LOCAL_USER,
    StoreBase,
    artifact_from,
    artifact_id,
    dumps,
    existing,
    item_id,
    loads,
    revision_id,
    to_kref,
)
from appliance.graph.engine import Tx
from appliance.graph.resolve import locate_revision


class ArtifactStore(StoreBase):
    def create_artifact(
        self, revision_kref: str, name: str, location: str, metadata: dict[str, str] | None = None,
        exists_error: bool = False,
    ) -> Artifact:
        parsed = krefs.parse(revision_kref, "revision_kref")
        names.artifact_name(name)
        if not isinstance(location, str) or not location.strip():
            raise InvalidArgument("location: give the file path or URI the artifact points to", field="location")
        meta = names.metadata(metadata)

        def job(tx: Tx) -> Artifact:
            revision = locate_revision(tx, parsed, self.default_project)
            node_id = artifact_id(revision, name)
            found = existing(tx, "MATCH (a:Artifact {id: $id}) RETURN a", {"id": node_id}, exists_error,
                             f"artifact {to_kref(node_id)}", "name", artifact_from)
            if found:
                return found
            now = self._now()
            row = tx.returned_row(
                "MATCH (r:Revision {id: $rev}) CREATE (r)-[:HAS_ARTIFACT]->(a:Artifact {id: $id, "
                "revision: $rev, name: $n, location: $loc, created_at: $now, modified_at: $now, author: $u, "
                "username: $u, metadata: $m, deprecated: false}) RETURN a",
                {"rev": revision, "id": node_id, "n": name, "loc": location, "now": now, "u": LOCAL_USER,
                 "m": dumps(meta)},
            )
            self._event(tx, "artifact.created", to_kref(node_id))
            return artifact_from(row[0])

        return self._engine.write(job)

    def get_artifact(self, kref: str) -> Artifact:
        """``&a=name`` → that artifact; a revision or item kref → its default artifact (else the first)."""
        parsed = krefs.parse(kref)
        return artifact_from(self._engine.read(lambda tx: self._artifact_node(tx, parsed)))

    def _artifact_node(self, tx: Tx, parsed: krefs.Kref) -> dict[str, Any]:
        revision = locate_revision(tx, parsed, self.default_project)
        name = parsed.artifact or tx.scalar("MATCH (r:Revision {id: $id}) RETURN r.default_artifact",
                                            {"id": revision})
        if name:
            row = tx.one("MATCH (a:Artifact {id: $id}) RETURN a", {"id": artifact_id(revision, name)})
        else:
            row = tx.one("MATCH (:Revision {id: $id})-[:HAS_ARTIFACT]->(a) RETURN a "
                         "ORDER BY a.created_at, a.name LIMIT 1", {"id": revision})
        if row is None:
            what = f"artifact {name!r}" if name else "any artifact"
            raise NotFound(f"revision {to_kref(revision)} has no {what}", field="kref")
        node: dict[str, Any] = row[0]  # a node comes back as a dict of its properties
        return node

    def list_artifacts(self, revision_kref: str, include_deprecated: bool = True) -> list[Artifact]:
        parsed = krefs.parse(revision_kref, "revision_kref")

        def job(tx: Tx) -> list[Artifact]:
            revision = locate_revision(tx, parsed, self.default_project)
            rows = tx.rows("MATCH (:Revision {id: $id})-[:HAS_ARTIFACT]->(a) WHERE $incl OR NOT a.deprecated "
                           "RETURN a ORDER BY a.name", {"id": revision, "incl": include_deprecated})
            return [artifact_from(r[0]) for r in rows]

        return self._engine.read(job)

    def artifacts_of(self, revision_krefs: list[str]) -> dict[str, list[Artifact]]:
        """Revision kref → its artifacts (deprecated ones left out), by name, in one read. Revisions that
        do not exist, or have no artifact, are left out."""
        ids = sorted({revision_id(item_id(p), p.revision) for p in (krefs.parse(k, "revision_krefs")
                                                                     for k in revision_krefs) if p.revision})
        if not ids:
            return {}
        rows = self._engine.read(lambda tx: tx.rows(
            "MATCH (r:Revision)-[:HAS_ARTIFACT]->(a:Artifact) WHERE r.id IN $ids AND NOT a.deprecated "
            "RETURN r.id, a ORDER BY r.id, a.name", {"ids": ids}))
        found: dict[str, list[Artifact]] = {}
        for revision, node in rows:
            found.setdefault(to_kref(revision), []).append(artifact_from(node))
        return found

    def artifacts_by_location(self, location: str) -> list[Artifact]:
        rows = self._engine.read(lambda tx: tx.rows(
            "MATCH (a:Artifact) WHERE a.location = $loc RETURN a ORDER BY a.id", {"loc": location}))
        return [artifact_from(r[0]) for r in rows]

    def artifact_locations(self) -> set[str]:
        """Every location an artifact points to (deprecated ones too): what the start-up sweep keeps."""
        rows = self._engine.read(lambda tx: tx.rows("MATCH (a:Artifact) RETURN DISTINCT a.location"))
        return {str(r[0]) for r in rows if r[0]}

    def set_default_artifact(self, revision_kref: str, name: str) -> None:
        parsed = krefs.parse(revision_kref, "revision_kref")
        names.artifact_name(name)

        def job(tx: Tx) -> None:
            revision = locate_revision(tx, parsed, self.default_project)
            if tx.one("MATCH (a:Artifact {id: $id}) RETURN a.id", {"id": artifact_id(revision, name)}) is None:
                raise NotFound(f"revision {to_kref(revision)} has no artifact {name!r}", field="name")
            tx.run("MATCH (r:Revision {id: $id}) SET r.default_artifact = $n", {"id": revision, "n": name})
            self._event(tx, "revision.default_artifact", to_kref(revision), {"name": name})

        self._engine.write(job)

    def update_artifact_metadata(self, kref: str, metadata: dict[str, str]) -> Artifact:
        parsed = krefs.parse(kref)
        meta = names.metadata(metadata)

        def job(tx: Tx) -> Artifact:
            node = self._artifact_node(tx, parsed)
            row = tx.returned_row("MATCH (a:Artifact {id: $id}) SET a.metadata = $m, a.modified_at = $now RETURN a",
                                  {"id": node["id"], "m": dumps({**loads(node["metadata"]), **meta}),
                                   "now": self._now()})
            self._event(tx, "artifact.updated", to_kref(node["id"]), {"metadata": meta})
            return artifact_from(row[0])

        return self._engine.write(job)

    def delete_artifact(self, kref: str) -> bool:
        parsed = krefs.parse(kref)
        if parsed.artifact is None:
            raise InvalidArgument("kref: name the artifact to delete with &a=<name>", field="kref")

        def job(tx: Tx) -> bool:
            node = self._artifact_node(tx, parsed)
            tx.run("MATCH (a:Artifact {id: $id}) DETACH DELETE a", {"id": node["id"]})
            tx.run("MATCH (r:Revision {id: $rev}) WHERE r.default_artifact = $n SET r.default_artifact = ''",
                   {"rev": node["revision"], "n": node["name"]})
            self._event(tx, "artifact.deleted", to_kref(node["id"]))
            return True

        return self._engine.write(job)
