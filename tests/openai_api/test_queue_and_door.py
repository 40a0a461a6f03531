"""The endpoint shares the appliance's one model instance and its queue: a full queue answers 429 with
Retry-After (in OpenAI's shape), a client that leaves while it waits gives its turn up; the front door's token
rule holds for /v1 as for every route (the sidecar's dummy key is accepted on loopback, the appliance's token
is needed where a token is required)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import openai
import pytest

from appliance.admin_api.openai_calls import local_model
from appliance.inference.llm import LlamaModel
from tests.inprocess import InProcess, serve_in_process
from tests.openai_api.conftest import client, tiny_settings

ASK = [{"role": "user", "content": "Tell me about cats."}]
TOKEN = "t0ken-for-the-openai-tests-" + "x" * 20


@pytest.fixture(scope="module")
def one_waiting(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    root = tmp_path_factory.mktemp("openai-queue")
    with serve_in_process(root / "data", None, **tiny_settings(root, max_waiting=1)) as running:
        yield running


def _until(condition: object, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.01)


def _send_and_keep_open(base_url: str, body: dict[str, object]) -> socket.socket:
    host, port = base_url.removeprefix("http://").split(":")
    payload = json.dumps(body).encode()
    sock = socket.create_connection((host, int(port)), timeout=30)
    sock.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: %s:%s\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n%s" % (host.encode(), port.encode(), len(payload), payload))
    return sock


def test_a_full_queue_answers_429_and_a_client_that_leaves_gives_its_turn_up(one_waiting: InProcess) -> None:
    model = local_model(one_waiting.services.model)
    assert isinstance(model, LlamaModel)  # the very instance the memory work uses: no second model
    holding, release = threading.Event(), threading.Event()

    def hold(_n: int, _total: int) -> None:  # the memory work's call, paused after its first token
        holding.set()
        release.wait(60)

    memory_work = threading.Thread(target=model.complete_text, args=(ASK,), kwargs={"max_tokens": 2, "progress": hold})
    memory_work.start()
    try:
        assert holding.wait(60)
        calls_before = model.status().calls
        waiting = _send_and_keep_open(one_waiting.base_url, {"model": "gpt-4o", "messages": ASK, "max_tokens": 4})
        _until(lambda: model._waiting == 1, "the first request queueing")
        with client(one_waiting) as openai_client, pytest.raises(openai.RateLimitError) as busy:
            openai_client.chat.completions.create(model="gpt-4o", messages=ASK, max_tokens=4)  # type: ignore[arg-type]
        assert busy.value.status_code == 429 and busy.value.response.headers["retry-after"] == "10"
        assert busy.value.response.headers["x-should-retry"] == "true"
        body = busy.value.body
        assert isinstance(body, dict) and body["code"] == "model_busy" and body["type"] == "rate_limit_error", body
        waiting.close()  # the first client leaves while it waits
        _until(lambda: model._waiting == 0, "the abandoned request leaving the queue")
    finally:
        release.set()
        memory_work.join(60)
    assert model.status().calls == calls_before  # the abandoned request never ran
    with client(one_waiting) as openai_client:  # and the queue serves the next one
        answer = openai_client.chat.completions.create(model="gpt-4o", messages=ASK, max_tokens=4)  # type: ignore[arg-type]
    assert answer.choices[0].message.content is not None and model.status().calls == calls_before + 1


def test_any_key_is_accepted_on_loopback_without_require_token(one_waiting: InProcess) -> None:
    for key in ("sk-local-dummy", "not a token at all"):
        with client(one_waiting, api_key=key) as openai_client:
            assert openai_client.models.list().data


def test_where_a_token_is_required_the_key_must_be_the_appliances_token(tmp_path: Path) -> None:
    with serve_in_process(tmp_path / "data", None, inference={"chat_model": "none"}, require_token=True,
                          api_token=TOKEN) as running:
        with client(running, api_key=TOKEN) as openai_client:
            assert len(openai_client.embeddings.create(model="m", input="x").data) == 1
        with client(running, api_key="sk-local-dummy") as openai_client, \
                pytest.raises(openai.AuthenticationError) as refused:
            openai_client.models.list()
        assert refused.value.status_code == 401 and "token" in str(refused.value.body)
