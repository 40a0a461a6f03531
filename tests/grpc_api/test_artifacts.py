"""Artifacts over Kumiho's gRPC service, against a real appliance: create semantics, reads by revision, name
and location, the default artifact and ResolveLocation, metadata updates and deletion."""

from __future__ import annotations

import grpc

from appliance.grpc_api.descriptor import message
from tests.appliance_process import Running
from tests.grpc_api.conftest import Stub, kref, msg, rpc_error
from tests.grpc_api.world import build


def _revision(appliance: Running, stub: Stub, project: str) -> str:
    [item] = build(appliance.base_url, project, items=(("s", "hero", "model"),))
    return str(stub.call("CreateRevision", msg("CreateRevisionRequest", item_kref=kref(item))).kref.uri)


def _artifact(stub: Stub, revision: str, name: str, location: str, **fields: object) -> object:
    request = message("CreateArtifactRequest")(revision_kref=kref(revision), name=name, location=location, **fields)
    return stub.call("CreateArtifact", request)


def test_create_and_read_artifacts(appliance: Running, stub: Stub, unique: str) -> None:
    revision = _revision(appliance, stub, unique)
    mesh = _artifact(stub, revision, "mesh.fbx", "/assets/hero.fbx", metadata={"format": "fbx"})
    assert mesh.kref.uri == f"{revision}&a=mesh.fbx" and mesh.revision_kref.uri == revision
    assert mesh.item_kref.uri == revision.split("?")[0] and mesh.name == "mesh.fbx" and mesh.metadata["format"] == "fbx"
    same = _artifact(stub, revision, "mesh.fbx", "/assets/hero.fbx")
    assert same.kref.uri == mesh.kref.uri  # already there, same location: returned as it is
    error = rpc_error(_artifact, stub, revision, "mesh.fbx", "/assets/hero.fbx", exists_error=True)
    assert error.code() == grpc.StatusCode.ALREADY_EXISTS and error.details().startswith("name:")
    error = rpc_error(_artifact, stub, revision, "mesh.fbx", "/elsewhere.fbx")
    assert error.code() == grpc.StatusCode.ALREADY_EXISTS and "/assets/hero.fbx" in error.details()
    _artifact(stub, revision, "notes.md", "s3://bucket/notes.md")
    listed = stub.call("GetArtifacts", msg("GetArtifactsRequest", revision_kref=kref(revision)))
    assert [a.name for a in listed.artifacts] == ["mesh.fbx", "notes.md"]
    by_item = stub.call("GetArtifacts", msg("GetArtifactsRequest", revision_kref=kref(revision.split("?")[0])))
    assert len(by_item.artifacts) == 2  # an item kref: its latest revision
    got = stub.call("GetArtifact", message("GetArtifactRequest")(revision_kref=kref(revision), name="notes.md"))
    assert got.location == "s3://bucket/notes.md"
    error = rpc_error(stub.call, "GetArtifact", message("GetArtifactRequest")(revision_kref=kref(revision),
                                                                name="missing.txt"))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    where = stub.call("GetArtifactsByLocation", msg("GetArtifactsByLocationRequest", location="/assets/hero.fbx"))
    assert [a.kref.uri for a in where.artifacts] == [mesh.kref.uri]


def test_bad_artifacts_are_refused_naming_the_field(appliance: Running, stub: Stub, unique: str) -> None:
    revision = _revision(appliance, stub, unique)
    error = rpc_error(_artifact, stub, revision, "a.txt", "")
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith("location:")
    error = rpc_error(_artifact, stub, revision, "a.txt", "x" * 5000)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith("location:")
    error = rpc_error(_artifact, stub, revision, "bad name/", "/a")
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith("name:")
    error = rpc_error(_artifact, stub, revision.replace("?r=1", "?r=8"), "a.txt", "/a")
    assert error.code() == grpc.StatusCode.NOT_FOUND
    error = rpc_error(stub.call, "DeleteArtifact", msg("DeleteArtifactRequest", kref=kref(revision)))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "&a=" in error.details()


def test_locations_inside_the_data_directory_are_kept_resolved(appliance: Running, stub: Stub,
                                                               unique: str) -> None:
    revision = _revision(appliance, stub, unique)
    root = appliance.data_dir.resolve()
    made = _artifact(stub, revision, "log.txt", f"file://{root}/artifacts//log.txt")
    assert made.location == f"file://{root}/artifacts/log.txt"
    found = stub.call("GetArtifactsByLocation", msg("GetArtifactsByLocationRequest",
                                                    location=f"file://{root}/artifacts/./log.txt"))
    assert [a.kref.uri for a in found.artifacts] == [made.kref.uri]
    error = rpc_error(_artifact, stub, revision, "escape.txt", f"{root}/artifacts/../../etc/passwd")
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and error.details().startswith("location:")


def test_default_artifact_resolve_location_update_and_delete(appliance: Running, stub: Stub, unique: str) -> None:
    revision = _revision(appliance, stub, unique)
    item = revision.split("?")[0]
    _artifact(stub, revision, "a.txt", "/data/a.txt")
    _artifact(stub, revision, "b.txt", "/data/b.txt")
    assert stub.call("SetDefaultArtifact", msg("SetDefaultArtifactRequest", revision_kref=kref(revision),
                                               artifact_name="b.txt")).success
    assert stub.call("GetRevision", msg("KrefRequest", kref=kref(item))).default_artifact == "b.txt"
    located = stub.call("ResolveLocation", msg("ResolveLocationRequest", kref=item))
    assert (located.location, located.artifact_name, located.resolved_kref.uri) == (
        "/data/b.txt", "b.txt", f"{revision}&a=b.txt")
    named = stub.call("ResolveLocation", msg("ResolveLocationRequest", kref=f"{revision}&a=a.txt"))
    assert named.location == "/data/a.txt"
    error = rpc_error(stub.call, "SetDefaultArtifact", msg("SetDefaultArtifactRequest", revision_kref=kref(revision),
                                                          artifact_name="zzz.txt"))
    assert error.code() == grpc.StatusCode.NOT_FOUND and error.details().startswith("artifact_name:")
    updated = stub.call("UpdateArtifactMetadata", msg("UpdateMetadataRequest", kref=kref(f"{revision}&a=a.txt"),
                                                      metadata={"size": "12"}))
    assert updated.metadata["size"] == "12"
    assert stub.call("DeleteArtifact", msg("DeleteArtifactRequest", kref=kref(f"{revision}&a=b.txt"))).success
    assert not stub.call("GetRevision", msg("KrefRequest", kref=kref(revision))).HasField("default_artifact")
    error = rpc_error(stub.call, "DeleteArtifact", msg("DeleteArtifactRequest", kref=kref(f"{revision}&a=b.txt")))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    fallback = stub.call("ResolveLocation", msg("ResolveLocationRequest", kref=item))
    assert fallback.artifact_name == "a.txt"  # no default: the first
    [other] = build(appliance.base_url, f"{unique}x", items=(("s", "bare", "model"),))
    stub.call("CreateRevision", msg("CreateRevisionRequest", item_kref=kref(other)))
    error = rpc_error(stub.call, "ResolveLocation", msg("ResolveLocationRequest", kref=other))
    assert error.code() == grpc.StatusCode.NOT_FOUND
