"""Bound beyond loopback, a gRPC call needs the appliance's bearer token like every HTTP request does. Runs in
a private network namespace (tests/netns.py); the gRPC client is a separate process there, so that no grpcio
state crosses the fork."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.appliance_process import ROOT, free_port, serve
from tests.netns import PRIVATE_ADDRESS, run_in_private_network

CLIENT = """
import json, sys, grpc
from appliance.grpc_api.descriptor import METHODS
target, token = sys.argv[1], sys.argv[2]
METADATA = (("none", ()), ("wrong", (("authorization", "Bearer " + "x" * 43),)),
            ("right", (("authorization", "Bearer " + token),)))
answers = {}
with grpc.insecure_channel(target) as channel:
    for name in ("GetProjects", "EventStream", "MoveItem"):  # unary; streaming; not served
        method = METHODS[name]
        make = channel.unary_stream if method.server_streaming else channel.unary_unary
        call = make("/kumiho.KumihoService/" + name, request_serializer=method.request.SerializeToString,
                    response_deserializer=method.response.FromString)
        for who, metadata in METADATA:
            try:
                answer = call(method.request(), timeout=5 if method.server_streaming else 30, metadata=metadata)
                if method.server_streaming:
                    answer = next(answer)  # no event comes: the stream is open until the deadline
                answers[name + " " + who] = ["OK", [p.name for p in answer.projects]]
            except grpc.RpcError as error:
                answers[name + " " + who] = [error.code().name, error.details()]
print(json.dumps(answers))
"""


def test_beyond_loopback_every_call_needs_the_token(tmp_path: Path) -> None:
    def body() -> None:
        data_dir = tmp_path / "data"
        port = free_port()
        with serve(data_dir, host=PRIVATE_ADDRESS, port=port) as running:
            token = (data_dir / "token").read_text().strip()
            result = subprocess.run([sys.executable, "-c", CLIENT, f"{PRIVATE_ADDRESS}:{port}", token], cwd=ROOT,
                                    capture_output=True, text=True, timeout=120)
            assert result.returncode == 0, result.stderr
            answers = json.loads(result.stdout)
            for method in ("GetProjects", "EventStream", "MoveItem"):  # the token is checked before all else
                assert answers[f"{method} none"][0] == "UNAUTHENTICATED", answers
                assert answers[f"{method} wrong"][0] == "UNAUTHENTICATED", answers
            assert token not in result.stdout  # no refusal repeats the secret
            assert answers["GetProjects right"][0] == "OK"
            assert answers["EventStream right"][0] == "DEADLINE_EXCEEDED"  # open, waiting for an event
            assert answers["MoveItem right"][0] == "UNIMPLEMENTED"
            running.stop()

    run_in_private_network(body)
