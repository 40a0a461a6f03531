"""``EndpointModel`` against a real OpenAI-compatible server on loopback, and the D6 loopback rule.

The server is stdlib ``http.server`` in a thread: it answers ``/v1/chat/completions`` with prepared
answers and records every request, so each test sees exactly what went over the wire.
"""

from __future__ import annotations

import json
import re
import socket
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from appliance.core.ports import ModelCancelled, ModelError, ModelOutputError, ModelTimeout, ModelUnavailable
from appliance.errors import InvalidArgument
from appliance.inference.llm import SMOKE_SCHEMA
from appliance.inference.remote import EndpointModel, is_loopback_url

Make = Callable[..., EndpointModel]
ASK = [{"role": "user", "content": "hello"}]
KEY = "sk-test-0123456789abcdef"


@dataclass
class Answer:
    status: int = 200
    body: Any = None  # a dict is sent as JSON, a string as it is
    delay: float = 0.0


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class Server:
    base_url: str
    answers: deque[Answer] = field(default_factory=deque)
    requests: list[Seen] = field(default_factory=list)
    stopping: threading.Event = field(default_factory=threading.Event)

    def add(self, *answers: Answer) -> None:
        self.answers.extend(answers)


def completion(content: str, finish_reason: str = "stop", completion_tokens: int = 7) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                         "finish_reason": finish_reason}],
            "usage": {"prompt_tokens": 3, "completion_tokens": completion_tokens, "total_tokens": 10}}


def _handler(server: Server) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            server.requests.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()}, json.loads(raw)))
            answer = server.answers.popleft() if server.answers else Answer(500, "no prepared answer")
            if self.path != "/v1/chat/completions":
                answer = Answer(404, "not found")
            if answer.delay and server.stopping.wait(answer.delay):
                return
            data = answer.body if isinstance(answer.body, str) else json.dumps(answer.body)
            try:
                self.send_response(answer.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data.encode())))
                self.end_headers()
                self.wfile.write(data.encode())
            except OSError:
                pass  # the client gave up (the timeout test)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def server() -> Iterator[Server]:
    state = Server(base_url="")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.02},
                              name="fake-llama-server", daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.stopping.set()
        httpd.shutdown()
        httpd.server_close()
        thread.join()


@pytest.fixture
def make() -> Iterator[Make]:
    """Builds models and closes them after the test (an open client would leak sockets)."""
    made: list[EndpointModel] = []

    def build(*args: Any, **kwargs: Any) -> EndpointModel:
        made.append(EndpointModel(*args, **kwargs))
        return made[-1]

    yield build
    for model in made:
        model.close()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- answers -------------------------------------------------------------------------------------------


def test_a_json_answer_is_validated_and_the_request_carries_the_schema_and_the_key(server: Server, make: Make) -> None:
    server.add(Answer(body=completion('{"title": "Cats", "topics": ["pets"]}')))
    model = make(server.base_url + "/", "qwen", api_key=KEY)
    seen: list[tuple[int, int]] = []
    answer = model.complete_json(ASK, SMOKE_SCHEMA, max_tokens=64, temperature=0.5,
                                 progress=lambda n, m: seen.append((n, m)))
    assert answer == {"title": "Cats", "topics": ["pets"]}
    [request] = server.requests
    assert request.path == "/v1/chat/completions"  # the trailing slash of base_url is stripped
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.body["model"] == "qwen" and request.body["messages"] == ASK
    assert request.body["max_tokens"] == 64 and request.body["temperature"] == 0.5
    assert request.body["response_format"] == {
        "type": "json_schema", "json_schema": {"name": "answer", "schema": SMOKE_SCHEMA, "strict": True}}
    assert seen == [(7, 64)]  # the server's completion token count, once the answer is in
    status = model.status()
    assert status.available and status.state == "loaded" and status.calls == 1
    assert status.model_id == model.model_id == "endpoint:qwen@127.0.0.1"
    assert status.path == server.base_url


def test_a_text_answer_has_no_response_format_and_no_key_when_none_is_set(server: Server, make: Make) -> None:
    server.add(Answer(body=completion("Plain words.")))
    model = make(server.base_url, "m")
    assert model.complete_text(ASK, max_tokens=32) == "Plain words."
    [request] = server.requests
    assert "response_format" not in request.body and request.body["max_tokens"] == 32
    assert "authorization" not in request.headers


def test_json_in_a_code_fence_is_accepted(server: Server, make: Make) -> None:
    server.add(Answer(body=completion('```json\n{"title": "Dogs", "topics": ["pets", "walks"]}\n```')),
               Answer(body=completion('```\n{"title": "Owls", "topics": ["birds"]}```')))
    model = make(server.base_url, "m")
    assert model.complete_json(ASK, SMOKE_SCHEMA) == {"title": "Dogs", "topics": ["pets", "walks"]}
    assert model.complete_json(ASK, SMOKE_SCHEMA) == {"title": "Owls", "topics": ["birds"]}


def test_an_answer_that_breaks_the_schema_or_is_not_json_is_an_output_error(server: Server, make: Make) -> None:
    server.add(Answer(body=completion(json.dumps({"title": "x" * 81, "topics": ["a"]}))),
               Answer(body=completion("I think the title is Cats.")))
    model = make(server.base_url, "m")
    with pytest.raises(ModelOutputError, match="breaks the schema at title") as caught:
        model.complete_json(ASK, SMOKE_SCHEMA)
    assert "xxx" not in caught.value.message  # the rule broken, never the endpoint's text
    with pytest.raises(ModelOutputError, match="not JSON") as caught:
        model.complete_json(ASK, SMOKE_SCHEMA)
    assert "Cats" not in caught.value.message


def test_truncated_json_at_the_token_limit_says_it_ran_out_of_tokens(server: Server, make: Make) -> None:
    server.add(Answer(body=completion('{"title": "Cats", "top', finish_reason="length")))
    model = make(server.base_url, "m")
    with pytest.raises(ModelOutputError, match="used all 16 tokens"):
        model.complete_json(ASK, SMOKE_SCHEMA, max_tokens=16)


# -- failures ------------------------------------------------------------------------------------------


def test_a_server_error_is_a_model_error_with_the_status_and_none_of_the_body(server: Server, make: Make) -> None:
    server.add(Answer(500, "boom " + "x" * 500 + " tail"),
               Answer(400, json.dumps({"error": {"message": f"bad key {KEY} in request"}})),
               Answer(200, "relayed words, not JSON"))
    model = make(server.base_url, "m", api_key=KEY)
    with pytest.raises(ModelError, match="HTTP 500") as caught:
        model.complete_text(ASK)
    assert "boom" not in caught.value.message and not isinstance(caught.value, ModelUnavailable)
    with pytest.raises(ModelError, match="HTTP 400") as caught:  # the server's words are never passed on
        model.complete_text(ASK)
    assert KEY not in caught.value.message and "bad key" not in caught.value.message
    with pytest.raises(ModelError, match="not JSON") as caught:
        model.complete_text(ASK)
    assert "relayed" not in caught.value.message


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_is_unavailable_and_the_message_does_not_hold_the_key(server: Server, make: Make,
                                                                             status: int) -> None:
    server.add(Answer(status, json.dumps({"error": f"Incorrect API key provided: {KEY}"})))
    model = make(server.base_url, "m", api_key=KEY)
    with pytest.raises(ModelUnavailable, match="refused the API key") as caught:
        model.complete_json(ASK, SMOKE_SCHEMA)
    assert KEY not in str(caught.value) and KEY not in json.dumps(caught.value.to_dict())
    assert f"HTTP {status}" in caught.value.message


def test_a_closed_port_is_unavailable_and_names_the_url_without_its_secrets(make: Make) -> None:
    port = closed_port()
    model = make(f"http://user:hunter2@127.0.0.1:{port}/v1?key=k-secret", "m", api_key=KEY)
    with pytest.raises(ModelUnavailable, match=re.escape(f"http://127.0.0.1:{port}/v1")) as caught:
        model.complete_text(ASK)
    for secret in ("hunter2", "k-secret", KEY):
        assert secret not in caught.value.message


def test_a_slow_server_times_out_with_the_calls_own_timeout(server: Server, make: Make) -> None:
    server.add(Answer(body=completion("late"), delay=5.0))
    model = make(server.base_url, "m", request_timeout=60.0)
    with pytest.raises(ModelTimeout, match="deadline"):
        model.complete_text(ASK, timeout=0.3)
    assert len(server.requests) == 1


def test_a_cancelled_call_sends_nothing(server: Server, make: Make) -> None:
    server.add(Answer(body=completion("unused")))
    model = make(server.base_url, "m")
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(ModelCancelled):
        model.complete_json(ASK, SMOKE_SCHEMA, cancel=cancel)
    with pytest.raises(ModelCancelled):
        model.complete_text(ASK, cancel=cancel)
    assert server.requests == [] and model.status().calls == 0


def test_a_bad_schema_is_refused_before_any_request(server: Server, make: Make) -> None:
    model = make(server.base_url, "m")
    with pytest.raises(ModelError, match="type \"object\""):
        model.complete_json(ASK, {"type": "array"})
    assert server.requests == []


# -- D6: loopback only unless the operator allows remote endpoints -------------------------------------


class _Recording(httpx.BaseTransport):
    """A transport that refuses every request and remembers it (proves that none was made)."""

    def __init__(self) -> None:
        self.requests: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        raise httpx.ConnectError("no network in this test", request=request)


def test_a_remote_endpoint_is_refused_unless_allowed(make: Make) -> None:
    with pytest.raises(InvalidArgument, match=re.escape("set inference.allow_remote_endpoints = true")) as caught:
        EndpointModel("http://10.1.2.3:8080/v1", "m")
    assert caught.value.field == "base_url"
    transport = _Recording()
    model = make("http://10.1.2.3:8080/v1", "m", allow_remote=True, transport=transport)
    assert model.model_id == "endpoint:m@10.1.2.3" and model.status().available
    assert transport.requests == []  # constructing and asking the status do not touch the network


@pytest.mark.parametrize("url", ["http://localhost:1/v1", "http://127.0.0.5/v1", "http://[::1]:9/v1",
                                 "https://LOCALHOST/v1", "http://[::ffff:127.0.0.1]:8080/v1"])
def test_loopback_urls_are_allowed(url: str, make: Make) -> None:
    assert is_loopback_url(url)
    assert make(url, "m").status().available


@pytest.mark.parametrize("url", ["http://example.com/v1", "http://10.1.2.3:8080/v1", "http://[2001:db8::1]/v1",
                                 "http://127.0.0.1@example.com/v1", "http://localhost.example.com/v1",
                                 "http://127.1/v1", "http:///v1", "not a url"])
def test_names_and_other_addresses_are_remote(url: str) -> None:
    assert not is_loopback_url(url)  # no DNS: a name other than localhost is remote
    with pytest.raises(InvalidArgument) as caught:
        EndpointModel(url, "m")
    assert caught.value.field == "base_url"


@pytest.mark.parametrize("url", ["ftp://127.0.0.1", "file:///tmp/socket", "127.0.0.1:8080/v1"])
def test_only_http_and_https_are_accepted(url: str) -> None:
    with pytest.raises(InvalidArgument, match="http:// or https://") as caught:
        EndpointModel(url, "m", allow_remote=True)
    assert caught.value.field == "base_url"
