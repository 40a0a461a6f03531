"""The gRPC door itself: served on the HTTP port next to HTTP, every method registered, errors as status
codes without internal text, the token when the appliance requires one, and off when configured off."""

from __future__ import annotations

from pathlib import Path

import grpc
import httpx

from appliance.grpc_api.descriptor import METHODS
from appliance.grpc_api.rpcs import RPCS
from tests.appliance_process import Running, serve
from tests.grpc_api.conftest import Stub, msg, rpc_error


def test_one_port_serves_http_and_grpc(appliance: Running, stub: Stub) -> None:
    live = httpx.get(f"{appliance.base_url}/api/_live").json()
    assert live["deployment_mode"] == "self_hosted_ce"
    projects = stub.GetProjects(msg("GetProjectsRequest"), timeout=30)
    assert {p.name for p in projects.projects} >= {"CognitiveMemory"} or projects.projects == []


def test_a_method_not_served_answers_unimplemented_saying_so(stub: Stub) -> None:
    unserved = sorted(set(METHODS) - set(RPCS) - {"EventStream"})
    assert unserved, "every method is served: pick another test"
    name = unserved[0]
    error = rpc_error(getattr(stub, name), METHODS[name].request(), timeout=30)
    assert error.code() == grpc.StatusCode.UNIMPLEMENTED
    assert f"does not serve {name}" in (error.details() or "")


def test_many_connections_at_once_are_all_served(appliance: Running) -> None:
    target = appliance.base_url.removeprefix("http://")
    channels = [grpc.insecure_channel(target, options=[("grpc.use_local_subchannel_pool", 1)]) for _ in range(12)]
    try:
        answers = [Stub(c).GetProjects(msg("GetProjectsRequest"), timeout=30) for c in channels]
        assert len(answers) == 12
    finally:
        for c in channels:
            c.close()


def test_token_required_beyond_loopback_or_when_configured(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with serve(data_dir, KUMIHO_CE_REQUIRE_TOKEN="true") as running:
        token = (data_dir / "token").read_text().strip()
        target = running.base_url.removeprefix("http://")
        with grpc.insecure_channel(target) as chan:
            without = rpc_error(Stub(chan).GetProjects, msg("GetProjectsRequest"), timeout=30)
            assert without.code() == grpc.StatusCode.UNAUTHENTICATED
            assert "authorization: Bearer" in (without.details() or "")
            assert token not in (without.details() or "")
            wrong = rpc_error(Stub(chan).GetProjects, msg("GetProjectsRequest"), timeout=30,
                              metadata=(("authorization", "Bearer " + "x" * 43),))
            assert wrong.code() == grpc.StatusCode.UNAUTHENTICATED
            malformed = rpc_error(Stub(chan).GetProjects, msg("GetProjectsRequest"), timeout=30,
                                  metadata=(("authorization", token),))  # no "Bearer "
            assert malformed.code() == grpc.StatusCode.UNAUTHENTICATED
            answer = Stub(chan).GetProjects(msg("GetProjectsRequest"), timeout=30,
                                            metadata=(("authorization", f"Bearer {token}"),))
            assert answer is not None
        running.stop()


def test_grpc_turned_off_tells_every_call_so_and_http_still_works(tmp_path: Path) -> None:
    with serve(tmp_path / "data", KUMIHO_CE_KUMIHO__GRPC="false") as running:
        assert httpx.get(f"{running.base_url}/api/_live").status_code == 200
        with grpc.insecure_channel(running.base_url.removeprefix("http://")) as chan:
            error = rpc_error(Stub(chan).GetProjects, msg("GetProjectsRequest"), timeout=10)
            assert error.code() == grpc.StatusCode.UNIMPLEMENTED
            assert "[kumiho] grpc setting" in (error.details() or "")
        running.stop()


def test_a_call_answers_its_request_id_in_the_initial_metadata(stub: Stub) -> None:
    _, kept = stub.GetProjects.with_call(msg("GetProjectsRequest"), timeout=30,
                                         metadata=(("x-request-id", "grpc-0005"),))
    assert ("x-request-id", "grpc-0005") in kept.initial_metadata()
    _, made = stub.GetProjects.with_call(msg("GetProjectsRequest"), timeout=30,
                                         metadata=(("x-request-id", "not safe to log"),))
    chosen = dict(made.initial_metadata())["x-request-id"]
    assert chosen != "not safe to log" and len(chosen) == 32 and int(chosen, 16) >= 0
