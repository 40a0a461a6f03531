"""What a gRPC client sees when a handler fails: the appliance's message and a status code the SDK does not
retry for a domain error, and for a failure nobody foresaw UNKNOWN with a fixed text — never the exception's
own text, a path or a stack trace. Drives the real server (grpcio on a Unix socket) with a table of handlers
that fail on purpose, over a real channel."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from appliance.app import Services, open_services
from appliance.config import load_settings
from appliance.errors import AlreadyExists, InvalidArgument, PermissionDenied
from appliance.grpc_api.errors import UNEXPECTED
from appliance.grpc_api.server import GrpcServer, RpcCall
from tests.grpc_api.conftest import Stub, msg, rpc_error

SECRET_PATH = "/home/someone/.kumiho/secret-internal-path.db"


def _boom(call: RpcCall, request: Any) -> Any:
    raise RuntimeError(f"database file {SECRET_PATH} is corrupt at page 7")


def _invalid(call: RpcCall, request: Any) -> Any:
    raise InvalidArgument("name: at most 255 characters", field="name")


def _exists(call: RpcCall, request: Any) -> Any:
    raise AlreadyExists("project Demo already exists")


def _read_only(call: RpcCall, request: Any) -> Any:
    raise PermissionDenied("namespace team is read-only")


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    data_dir = tmp_path_factory.mktemp("failures") / "data"
    with open_services(load_settings(data_dir=data_dir, search={"embedder": "hashing"},
                                     inference={"chat_model": "none"})) as opened:
        yield opened


@pytest.fixture(scope="module")
def stub(services: Services, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stub]:
    table = {"GetProjects": _boom, "CreateProject": _exists, "GetSpace": _invalid, "CreateSpace": _read_only}
    server = GrpcServer(services, table)
    path = server.start(tmp_path_factory.mktemp("sock") / "grpc.sock")
    try:
        with grpc.insecure_channel(f"unix:{path}") as channel:
            yield Stub(channel)
    finally:
        server.stop()
    assert not Path(path).exists()


def test_an_unforeseen_failure_is_unknown_with_a_fixed_text(stub: Stub) -> None:
    error = rpc_error(stub.GetProjects, msg("GetProjectsRequest"), timeout=10)
    assert error.code() == grpc.StatusCode.UNKNOWN  # not INTERNAL: the SDK would retry it three times
    assert error.details() == UNEXPECTED
    assert SECRET_PATH not in str(error) and "RuntimeError" not in str(error) and "Traceback" not in str(error)


@pytest.mark.parametrize(("method", "request_name", "code", "text"), [
    ("CreateProject", "CreateProjectRequest", grpc.StatusCode.ALREADY_EXISTS, "project Demo already exists"),
    ("GetSpace", "GetSpaceRequest", grpc.StatusCode.INVALID_ARGUMENT, "name: at most 255 characters"),
    ("CreateSpace", "CreateSpaceRequest", grpc.StatusCode.PERMISSION_DENIED, "namespace team is read-only"),
])
def test_domain_errors_keep_their_message_and_map_to_their_code(stub: Stub, method: str, request_name: str,
                                                                 code: grpc.StatusCode, text: str) -> None:
    error = rpc_error(getattr(stub, method), msg(request_name), timeout=10)
    assert (error.code(), error.details()) == (code, text)


def test_a_table_naming_no_method_of_the_service_is_refused(services: Services) -> None:
    with pytest.raises(ValueError, match="GetProject"):
        GrpcServer(services, {"GetProject": _boom})  # the service has GetProjects, not GetProject


def test_a_socket_path_too_long_for_unix_sockets_gets_a_private_directory(services: Services,
                                                                          tmp_path: Path) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    deep.mkdir(parents=True)
    server = GrpcServer(services, {"CreateProject": _exists})
    path = Path(server.start(deep / "grpc.sock"))
    try:
        assert path.parent != deep and oct(path.parent.stat().st_mode & 0o777) == "0o700"
        with grpc.insecure_channel(f"unix:{path}") as channel:
            error = rpc_error(Stub(channel).CreateProject, msg("CreateProjectRequest"), timeout=10)
            assert error.code() == grpc.StatusCode.ALREADY_EXISTS
    finally:
        server.stop()
    assert not path.parent.exists()
