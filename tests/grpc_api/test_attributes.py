"""Attributes over Kumiho's gRPC, addressed as the SDK addresses them: a space by its path in ``kref.uri``
(Space.set_attribute), anything else by kref; credentials in values are redacted before they are stored."""

from __future__ import annotations

import grpc

from appliance.grpc_api.descriptor import message
from tests.grpc_api.conftest import Stub, kref, msg, rpc_error


def _get(stub: Stub, uri: str, key: str) -> tuple[str, bool]:
    answer = stub.GetAttribute(msg("GetAttributeRequest", kref=kref(uri), key=key), timeout=30)
    return answer.value, answer.exists


def test_attributes_of_a_space_by_path_and_by_kref(stub: Stub, unique: str) -> None:
    stub.CreateProject(message("CreateProjectRequest")(name=unique), timeout=30)
    stub.CreateSpace(msg("CreateSpaceRequest", parent_path=f"/{unique}", space_name="team"), timeout=30)
    path = f"/{unique}/team"
    assert stub.SetAttribute(msg("SetAttributeRequest", kref=kref(path), key="memory_aliases", value="crew,squad"),
                             timeout=30).success
    assert _get(stub, path, "memory_aliases") == ("crew,squad", True)
    assert _get(stub, f"kref://{unique}/team", "memory_aliases") == ("crew,squad", True)
    space = stub.GetSpace(msg("GetSpaceRequest", path_or_kref=path), timeout=30)
    assert space.metadata["memory_aliases"] == "crew,squad"
    assert _get(stub, path, "absent") == ("", False)
    assert stub.DeleteAttribute(msg("DeleteAttributeRequest", kref=kref(path), key="memory_aliases"),
                                timeout=30).success
    assert _get(stub, path, "memory_aliases") == ("", False)


def test_attributes_of_an_item_and_a_project_by_kref(stub: Stub, unique: str) -> None:
    stub.CreateProject(message("CreateProjectRequest")(name=unique), timeout=30)
    item = stub.CreateItem(msg("CreateItemRequest", parent_path=f"/{unique}", item_name="cursor", kind="note"),
                           timeout=30)
    stub.SetAttribute(msg("SetAttributeRequest", kref=item.kref, key="last_run_at", value="2026-01-01T00:00:00+00:00"),
                      timeout=30)
    assert _get(stub, item.kref.uri, "last_run_at") == ("2026-01-01T00:00:00+00:00", True)
    stub.SetAttribute(msg("SetAttributeRequest", kref=kref(f"kref://{unique}"), key="owner", value="ana"), timeout=30)
    assert _get(stub, f"kref://{unique}", "owner") == ("ana", True)


def test_a_credential_in_a_value_is_redacted(stub: Stub, unique: str) -> None:
    stub.CreateProject(message("CreateProjectRequest")(name=unique), timeout=30)
    secret = "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6"
    stub.SetAttribute(msg("SetAttributeRequest", kref=kref(f"/{unique}"), key="note", value=f"key {secret}"),
                      timeout=30)
    value, _ = _get(stub, f"/{unique}", "note")
    assert secret not in value and "[secret]" in value


def test_a_value_under_a_credential_key_is_redacted_and_a_credential_key_refused(stub: Stub, unique: str) -> None:
    stub.CreateProject(message("CreateProjectRequest")(name=unique), timeout=30)
    stub.CreateSpace(msg("CreateSpaceRequest", parent_path=f"/{unique}", space_name="team"), timeout=30)
    for where in (f"/{unique}", f"/{unique}/team"):  # a project by kref path, a space by its path
        for key, value in (("password", "hunter2-plain"), ("api_key", "sk-live-abc"), ("DB_PASSWORD", "pw")):
            stub.SetAttribute(msg("SetAttributeRequest", kref=kref(where), key=key, value=value), timeout=30)
            assert _get(stub, where, key) == ("[secret]", True), (where, key)
    space = stub.GetSpace(msg("GetSpaceRequest", path_or_kref=f"/{unique}/team"), timeout=30)
    assert space.metadata["password"] == "[secret]"
    secret = "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789"
    refused = rpc_error(stub.SetAttribute, msg("SetAttributeRequest", kref=kref(f"/{unique}"), key=secret, value="v"),
                        timeout=30)
    assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (refused.details() or "").startswith("key:") and secret not in (refused.details() or "")
    assert _get(stub, f"/{unique}", secret) == ("", False)


def test_missing_entities_and_keys_are_refused(stub: Stub, unique: str) -> None:
    missing = rpc_error(stub.GetAttribute, msg("GetAttributeRequest", kref=kref(f"/{unique}-none/x"), key="k"),
                        timeout=30)
    assert missing.code() == grpc.StatusCode.NOT_FOUND
    no_key = rpc_error(stub.SetAttribute, msg("SetAttributeRequest", kref=kref("/CognitiveMemory"), value="v"),
                       timeout=30)
    assert no_key.code() == grpc.StatusCode.INVALID_ARGUMENT and "key" in (no_key.details() or "")
    no_kref = rpc_error(stub.GetAttribute, msg("GetAttributeRequest", key="k"), timeout=30)
    assert no_kref.code() == grpc.StatusCode.INVALID_ARGUMENT and "kref" in (no_kref.details() or "")
