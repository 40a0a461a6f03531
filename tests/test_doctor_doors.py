"""``kumiho-ce doctor`` with the appliance running: a real request through each door (HTTP, gRPC on the same
port, the working-memory Redis listener, the OpenAI-compatible /v1), each said plainly when it fails."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from appliance.config import load_settings
from appliance.doctor_doors import _check_grpc, _check_redis
from tests.appliance_process import cli_env, free_port, kumiho_ce, serve


def doctor(data_dir: Path, **env: str) -> dict[str, dict[str, str]]:
    result = kumiho_ce("doctor", "--json", env=cli_env(data_dir, **env))
    assert "Traceback" not in result.stderr, result.stderr
    return {c["name"]: c for c in json.loads(result.stdout)}


def test_doctor_goes_through_every_door_of_the_running_appliance(tmp_path: Path) -> None:
    redis = {"KUMIHO_CE_KUMIHO__REDIS_PORT": str(free_port())}
    with serve(tmp_path / "data", **redis) as app:
        checks = doctor(app.data_dir, **redis)
        port = app.base_url.rsplit(":", 1)[1]
    assert checks["http"]["status"] == "ok" and "deployment_mode self_hosted_ce" in checks["http"]["detail"]
    assert checks["grpc"] == {"name": "grpc", "status": "ok", "fix": None,
                              "detail": f"kumiho.KumihoService answers on 127.0.0.1:{port} (GetProjects: 1 project)"}
    assert checks["redis"] == {"name": "redis", "status": "ok", "fix": None, "detail": "working memory answers PING "
                               f"on 127.0.0.1:{redis['KUMIHO_CE_KUMIHO__REDIS_PORT']}"}
    assert checks["openai"]["detail"].startswith(f"http://127.0.0.1:{port}/v1/models")
    assert "answers 404" not in checks["openai"]["detail"]


def test_doctor_names_a_token_the_doors_refuse(tmp_path: Path) -> None:
    env = {"KUMIHO_CE_REQUIRE_TOKEN": "true", "KUMIHO_CE_KUMIHO__REDIS_PORT": str(free_port())}
    with serve(tmp_path / "data", **env) as app:
        right = doctor(app.data_dir, **env)  # doctor reads <data dir>/token, as the owner may
        wrong = doctor(app.data_dir, **env, KUMIHO_CE_API_TOKEN="w" * 40)
    assert right["grpc"]["status"] == "ok", right["grpc"]
    assert right["redis"]["status"] == "ok", right["redis"]
    assert wrong["http"]["status"] == "ok"  # the live probe needs no token
    assert wrong["grpc"]["status"] == "fail" and "refused doctor's token (UNAUTHENTICATED" in wrong["grpc"]["detail"]
    assert "run kumiho-ce doctor as the user who owns the data directory" in wrong["grpc"]["fix"]
    assert wrong["redis"]["status"] == "fail" and "refused doctor's token" in wrong["redis"]["detail"]
    assert "w" * 40 not in json.dumps(wrong)


def test_doctor_says_which_doors_are_switched_off_or_silent(tmp_path: Path) -> None:
    off = {"KUMIHO_CE_KUMIHO__REDIS_PORT": "0", "KUMIHO_CE_KUMIHO__GRPC": "false",
           "KUMIHO_CE_INFERENCE__OPENAI_API": "false"}
    silent = free_port()  # nothing listens there
    with serve(tmp_path / "data", **off) as app:
        checks = doctor(app.data_dir, **off)
        elsewhere = doctor(app.data_dir, KUMIHO_CE_KUMIHO__REDIS_PORT=str(silent))
    assert checks["grpc"]["status"] == "warn" and checks["grpc"]["detail"].startswith("off ([kumiho] grpc = false)")
    assert checks["redis"]["detail"].startswith("off ([kumiho] redis_port = 0)")
    assert checks["openai"]["detail"].startswith("off ([inference] openai_api = false)")
    assert elsewhere["redis"]["status"] == "warn"
    assert elsewhere["redis"]["detail"].startswith(f"nothing answers on 127.0.0.1:{silent}")


@contextmanager
def plain_http_server() -> Iterator[int]:
    """An HTTP/1.1-only server that claims to be a local CE: what an appliance without gRPC looks like."""
    class Live(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'{"status":"ok","deployment_mode":"self_hosted_ce"}'
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Live)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_a_port_that_speaks_only_http_fails_the_grpc_check(tmp_path: Path) -> None:
    settings = load_settings(None, data_dir=str(tmp_path / "data"))
    with plain_http_server() as port:
        check = _check_grpc(settings, "127.0.0.1", port, None)
    assert check.status == "fail"
    assert check.detail.startswith(f"127.0.0.1:{port} does not serve Kumiho's gRPC (")
    assert "Revka's Operator cannot use it" in check.detail


@contextmanager
def recording_listener(answer: bytes) -> Iterator[tuple[int, list[bytes]]]:
    """Another program on the Redis port: it answers every read with ``answer`` and records all it receives."""
    received: list[bytes] = []
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(10)

    def serve() -> None:
        with contextlib.suppress(OSError):
            conn, _ = server.accept()
            with conn:
                conn.settimeout(2)
                with contextlib.suppress(OSError):
                    while data := conn.recv(65536):
                        received.append(data)
                        conn.sendall(answer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1]), received
    finally:
        thread.join(10)
        server.close()


TOKEN = "doctor-token-never-leaves-0123456789abcdef"
OTHER_PROGRAMS = {
    "a Redis server with a password": b"-NOAUTH Authentication required.\r\n",
    "an open Redis server": b"*4\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$5\r\n7.2.4\r\n",
    "not Redis at all": b"HTTP/1.1 400 Bad Request\r\n\r\n",
}


@pytest.mark.parametrize("answer", OTHER_PROGRAMS.values(), ids=OTHER_PROGRAMS.keys())
def test_doctor_never_hands_the_token_to_another_program_on_the_redis_port(tmp_path: Path, answer: bytes) -> None:
    with recording_listener(answer) as (port, received):
        settings = load_settings(None, data_dir=str(tmp_path / "data"), kumiho={"redis_port": port})
        check = _check_redis(settings, TOKEN)
    assert received, "doctor asked who listens"
    assert TOKEN.encode() not in b"".join(received) and b"AUTH" not in b"".join(received)
    assert check.status == "warn" and "another program" in check.detail and TOKEN not in check.detail
