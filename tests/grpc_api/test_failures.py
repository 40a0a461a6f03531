"""What a gRPC client sees when a handler fails: the appliance's message and a status code the SDK does not
retry for a domain error, and for a failure nobody foresaw UNKNOWN with a fixed text — never the exception's
own text, a path or a stack trace. Drives the real server (grpcio on a Unix socket) with a table of handlers
that fail on purpose, over a real channel. Also its bounds: the calls admitted at once, and a stop that waits
for the handlers still running."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest

from appliance.app import Services, open_services
from appliance.config import load_settings
from appliance.errors import AlreadyExists, InvalidArgument, PermissionDenied, StorageError
from appliance.grpc_api.errors import UNEXPECTED
from appliance.grpc_api.server import GrpcServer, RpcCall
from tests.grpc_api.conftest import Stub, msg, rpc_error

SECRET_PATH = "/home/someone/.kumiho/secret-internal-path.db"
TOKEN = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"  # a credential's shape (GitHub's)


def _boom(call: RpcCall, request: Any) -> Any:
    raise RuntimeError(f"database file {SECRET_PATH} is corrupt at page 7")


def _invalid(call: RpcCall, request: Any) -> Any:
    raise InvalidArgument("name: at most 255 characters", field="name")


def _exists(call: RpcCall, request: Any) -> Any:
    raise AlreadyExists("project Demo already exists")


def _read_only(call: RpcCall, request: Any) -> Any:
    raise PermissionDenied("namespace team is read-only")


def _storage(call: RpcCall, request: Any) -> Any:  # the graph store's words quote the database's own
    raise StorageError(f"the write failed and was rolled back: Runtime exception: internal detail {SECRET_PATH}")


def _quoting_a_credential(call: RpcCall, request: Any) -> Any:
    raise InvalidArgument(f"name: {TOKEN!r} is not a valid name", field="name")


@pytest.fixture(scope="module")
def services(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Services]:
    data_dir = tmp_path_factory.mktemp("failures") / "data"
    with open_services(load_settings(data_dir=data_dir, search={"embedder": "hashing"},
                                     inference={"chat_model": "none"})) as opened:
        yield opened


@pytest.fixture(scope="module")
def stub(services: Services, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stub]:
    table = {"GetProjects": _boom, "CreateProject": _exists, "GetSpace": _invalid, "CreateSpace": _read_only,
             "CreateRevision": _storage, "CreateItem": _quoting_a_credential}
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


def test_a_storage_failure_is_unknown_with_the_fixed_text_and_logged_with_its_details(
        stub: Stub, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="appliance.grpc_api.server"):
        error = rpc_error(stub.CreateRevision, msg("CreateRevisionRequest"), timeout=10)
    assert error.code() == grpc.StatusCode.UNKNOWN
    assert error.details() == UNEXPECTED  # before: the database's words, the path included
    assert SECRET_PATH not in str(error) and "rolled back" not in str(error)
    logged = [r for r in caplog.records if "CreateRevision" in r.getMessage()]
    assert logged and SECRET_PATH in logged[0].getMessage() and logged[0].exc_info is not None


def test_a_credential_quoted_by_a_message_is_redacted(stub: Stub) -> None:
    error = rpc_error(stub.CreateItem, msg("CreateItemRequest"), timeout=10)
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert TOKEN not in str(error) and error.details() == "name: '[secret]' is not a valid name"


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


class _Blocking:
    """A GetProjects handler that waits for ``release``; ``entered`` counts the calls that reached it."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self.entered = 0
        self.finished: list[bool] = []  # per call: whether it finished while ``stopped`` was still unset
        self.stopped = threading.Event()

    def __call__(self, call: RpcCall, request: Any) -> Any:
        with self._lock:
            self.entered += 1
            self._arrived.notify_all()
        assert self.release.wait(60)
        self.finished.append(not self.stopped.is_set())
        return msg("GetProjectsResponse")

    def wait_entered(self, count: int) -> None:
        with self._lock:
            assert self._arrived.wait_for(lambda: self.entered >= count, timeout=30)


def test_calls_beyond_the_bound_are_refused_resource_exhausted(services: Services, tmp_path: Path) -> None:
    """Admitted calls are bounded (running or queued for a worker): one more is told RESOURCE_EXHAUSTED, which
    the SDK retries with backoff, instead of waiting in an endless queue behind a busy client."""
    handler = _Blocking()
    server = GrpcServer(services, {"GetProjects": handler}, max_calls=2)
    path = server.start(tmp_path / "grpc.sock")
    try:
        with grpc.insecure_channel(f"unix:{path}") as channel:
            stub = Stub(channel)
            held = [stub.GetProjects.future(msg("GetProjectsRequest"), timeout=60) for _ in range(2)]
            handler.wait_entered(2)
            error = rpc_error(stub.GetProjects, msg("GetProjectsRequest"), timeout=10)
            assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            handler.release.set()
            assert all(f.result(timeout=30) == msg("GetProjectsResponse") for f in held)  # the bound frees up
            assert stub.GetProjects(msg("GetProjectsRequest"), timeout=10) == msg("GetProjectsResponse")
    finally:
        handler.release.set()
        server.stop()


def test_stop_waits_for_a_running_handler_before_it_returns(services: Services, tmp_path: Path) -> None:
    """grpcio's stop does not wait for its handler threads: the stores closed next must not close under one."""
    handler = _Blocking()
    server = GrpcServer(services, {"GetProjects": handler})
    path = server.start(tmp_path / "grpc.sock")

    def stop() -> None:
        server.stop(grace=0.1)
        handler.stopped.set()

    with grpc.insecure_channel(f"unix:{path}") as channel:
        call = Stub(channel).GetProjects.future(msg("GetProjectsRequest"), timeout=60)
        handler.wait_entered(1)
        stopper = threading.Thread(target=stop)
        stopper.start()
        stopper.join(timeout=2)  # past the grace: before, stop had returned by now with the handler still running
        handler.release.set()
        stopper.join(timeout=60)
        assert not stopper.is_alive()
        assert handler.finished == [True]  # the handler finished before stop returned
        assert call.exception(timeout=10) is not None  # the client was cancelled after the grace
