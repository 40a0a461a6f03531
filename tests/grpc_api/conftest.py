"""A real ``kumiho-ce serve`` and a gRPC channel to its one port, with the appliance's own message classes.

``stub.<Method>(request)`` calls ``/kumiho.KumihoService/<Method>`` over the real transport; ``msg(name,
**fields)`` builds a request. One appliance of the default configuration is shared by every module of the package
that does not make its own (an appliance start is seconds, a test's calls milliseconds): each test uses its own
project names (``unique``) so that they do not depend on one another. A module that needs another configuration,
or stops its appliance, overrides the module-scoped ``appliance`` fixture."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.message import Message

from appliance.grpc_api.descriptor import METHODS, SERVICE_NAME, message
from tests.appliance_process import Running, serve


class Stub:
    """Every method of Kumiho's service as a callable on one channel (what the SDK's generated stub does)."""

    def __init__(self, channel: grpc.Channel, metadata: tuple[tuple[str, str], ...] = ()) -> None:
        self._metadata = metadata
        for name, method in METHODS.items():
            make = channel.unary_stream if method.server_streaming else channel.unary_unary
            setattr(self, name, make(f"/{SERVICE_NAME}/{name}", request_serializer=method.request.SerializeToString,
                                     response_deserializer=method.response.FromString))

    def call(self, name: str, request: Message, timeout: float = 30) -> Any:
        return getattr(self, name)(request, timeout=timeout, metadata=self._metadata)


def msg(name: str, **fields: Any) -> Message:
    return message(name)(**fields)


def kref(uri: str) -> Message:
    return message("Kref")(uri=uri)


def rpc_error(fn: Any, *args: Any, **kwargs: Any) -> grpc.RpcError:
    """The error a call fails with (the test fails when it succeeds)."""
    with pytest.raises(grpc.RpcError) as caught:
        fn(*args, **kwargs)
    return caught.value


_counter = itertools.count()


@pytest.fixture
def unique() -> str:
    """A project name no other test of the session uses; all of one width, so that none is a prefix of another
    (a search filtered by ``P1`` would otherwise match ``P10``'s items)."""
    return f"P{next(_counter):05d}"


@pytest.fixture(scope="package")
def shared_appliance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    data_dir: Path = tmp_path_factory.mktemp("grpc") / "data"
    with serve(data_dir) as running:
        yield running
        running.stop()


@pytest.fixture(scope="module")
def appliance(shared_appliance: Running) -> Running:
    """The package's default-configuration appliance; modules needing their own override this fixture."""
    return shared_appliance


@pytest.fixture(scope="module")
def channel(appliance: Running) -> Iterator[grpc.Channel]:
    target = appliance.base_url.removeprefix("http://")
    with grpc.insecure_channel(target) as chan:
        grpc.channel_ready_future(chan).result(timeout=30)
        yield chan


@pytest.fixture(scope="module")
def stub(channel: grpc.Channel) -> Stub:
    return Stub(channel)
