"""Projects over Kumiho's gRPC: create (and its refusal when the name is taken), update, archive and restore,
and the two-call hard deletion, addressed by the project's id as the SDK does (or by its name)."""

from __future__ import annotations

from collections.abc import Iterator

import grpc
import httpx
import pytest

from appliance.grpc_api.descriptor import message
from tests.appliance_process import Running, serve
from tests.grpc_api.conftest import Stub, msg, rpc_error


@pytest.fixture(scope="module")
def appliance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """The conftest's appliance, with the audit trail on."""
    with serve(tmp_path_factory.mktemp("grpc-projects") / "data", KUMIHO_CE_MEMORY__AUDIT_ENABLED="true") as running:
        yield running
        running.stop()


def _names(stub: Stub, include_deprecated: bool = False) -> set[str]:
    answer = stub.GetProjects(msg("GetProjectsRequest", include_deprecated=include_deprecated), timeout=30)
    return {p.name for p in answer.projects}


def test_create_answers_the_project_and_refuses_a_taken_name(stub: Stub, unique: str) -> None:
    made = stub.CreateProject(message("CreateProjectRequest")(name=unique, description="films",
                                  metadata={"owner": "ana"}), timeout=30)
    assert (made.name, made.description, dict(made.metadata)) == (unique, "films", {"owner": "ana"})
    assert len(made.project_id) == 36 and made.created_at.endswith("+00:00")
    assert unique in _names(stub)
    again = rpc_error(stub.CreateProject, message("CreateProjectRequest")(name=unique), timeout=30)
    assert again.code() == grpc.StatusCode.ALREADY_EXISTS
    assert "already exists" in (again.details() or "")


def test_bad_names_are_invalid_arguments_naming_the_field(stub: Stub) -> None:
    error = rpc_error(stub.CreateProject, message("CreateProjectRequest")(name="no spaces allowed"), timeout=30)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "name" in (error.details() or "")


def test_update_archive_and_restore_by_id(stub: Stub, unique: str) -> None:
    made = stub.CreateProject(message("CreateProjectRequest")(name=unique), timeout=30)
    updated = stub.UpdateProject(msg("UpdateProjectRequest", project_id=made.project_id, description="new",
                                     metadata={"k": "v"}), timeout=30)
    assert (updated.description, dict(updated.metadata), updated.deprecated) == ("new", {"k": "v"}, False)
    archived = stub.DeleteProject(msg("DeleteProjectRequest", project_id=made.project_id), timeout=30)
    assert archived.success
    assert unique not in _names(stub) and unique in _names(stub, include_deprecated=True)
    restored = stub.UpdateProject(msg("UpdateProjectRequest", project_id=made.project_id, deprecated=False),
                                  timeout=30)
    assert not restored.deprecated and restored.description == "new"  # unset fields are kept
    assert unique in _names(stub)


def test_hard_deletion_takes_the_snapshot_then_the_confirmation(stub: Stub, unique: str) -> None:
    made = stub.CreateProject(message("CreateProjectRequest")(name=unique), timeout=30)
    stub.CreateSpace(msg("CreateSpaceRequest", parent_path=f"/{unique}", space_name="s"), timeout=30)
    impact = stub.AnalyzeProjectDeletion(msg("ProjectDeletionImpactRequest", project_id=made.project_id),
                                         timeout=30)
    assert impact.project_name == unique and impact.project_id == made.project_id
    assert f"kref://{unique}/s" in impact.descendants and not impact.blockers
    unconfirmed = rpc_error(stub.HardDeleteProject, msg(
        "HardDeleteProjectRequest", project_id=made.project_id, impact_snapshot_id=impact.impact_snapshot_id,
        impact_snapshot_hash=impact.impact_snapshot_hash), timeout=30)
    assert unconfirmed.code() == grpc.StatusCode.INVALID_ARGUMENT and "confirmed" in (unconfirmed.details() or "")
    wrong = rpc_error(stub.HardDeleteProject, msg(
        "HardDeleteProjectRequest", project_id=made.project_id, impact_snapshot_id=impact.impact_snapshot_id,
        impact_snapshot_hash="0" * 64, confirmed=True), timeout=30)
    assert wrong.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert unique in _names(stub)
    gone = stub.HardDeleteProject(msg(
        "HardDeleteProjectRequest", project_id=made.project_id, impact_snapshot_id=impact.impact_snapshot_id,
        impact_snapshot_hash=impact.impact_snapshot_hash, confirmed=True), timeout=30)
    assert gone.success
    assert unique not in _names(stub, include_deprecated=True)
    missing = rpc_error(stub.GetSpace, msg("GetSpaceRequest", path_or_kref=f"/{unique}/s"), timeout=30)
    assert missing.code() == grpc.StatusCode.NOT_FOUND


def test_forced_delete_removes_the_project_by_name(stub: Stub, unique: str) -> None:
    stub.CreateProject(message("CreateProjectRequest")(name=unique), timeout=30)
    assert stub.DeleteProject(msg("DeleteProjectRequest", project_id=unique, force=True), timeout=30).success
    assert unique not in _names(stub, include_deprecated=True)
    unknown = rpc_error(stub.DeleteProject, msg("DeleteProjectRequest", project_id=unique), timeout=30)
    assert unknown.code() == grpc.StatusCode.NOT_FOUND


def test_tenant_usage_counts_nodes_without_a_limit(stub: Stub, unique: str) -> None:
    before = stub.GetTenantUsage(msg("GetTenantUsageRequest"), timeout=30)
    stub.CreateProject(message("CreateProjectRequest")(name=unique), timeout=30)  # a project and its root space
    after = stub.GetTenantUsage(msg("GetTenantUsageRequest"), timeout=30)
    assert after.node_count == before.node_count + 2
    assert after.node_limit == 0 and after.tenant_id == "local"


def test_writes_are_audited_as_the_grpc_door_and_its_method(appliance: Running, stub: Stub, unique: str) -> None:
    stub.CreateProject(message("CreateProjectRequest")(name=unique), timeout=30)
    trail = httpx.get(f"{appliance.base_url}/api/v1/audit", params={"door": "grpc", "limit": 1000}, timeout=30)
    mine = [e for e in trail.json()["entries"]
            if {"routing_key": "project.created", "kref": f"kref://{unique}"} in e["changes"]]
    assert [(e["door"], e["operation"]) for e in mine] == [("grpc", "CreateProject")]
