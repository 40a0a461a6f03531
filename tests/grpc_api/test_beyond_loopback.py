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
method = METHODS["GetProjects"]
answers = {}
with grpc.insecure_channel(target) as channel:
    call = channel.unary_unary("/kumiho.KumihoService/GetProjects", request_serializer=method.request.SerializeToString,
                               response_deserializer=method.response.FromString)
    for name, metadata in (("none", ()), ("wrong", (("authorization", "Bearer " + "x" * 43),)),
                           ("right", (("authorization", "Bearer " + token),))):
        try:
            answer = call(method.request(), timeout=30, metadata=metadata)
            answers[name] = ["OK", [p.name for p in answer.projects]]
        except grpc.RpcError as error:
            answers[name] = [error.code().name, error.details()]
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
            assert answers["none"][0] == "UNAUTHENTICATED" and answers["wrong"][0] == "UNAUTHENTICATED"
            assert token not in result.stdout  # no refusal repeats the secret
            assert answers["right"][0] == "OK"
            running.stop()

    run_in_private_network(body)
