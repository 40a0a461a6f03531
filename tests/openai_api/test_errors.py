"""Refusals of the OpenAI-compatible routes: in OpenAI's error shape, naming the field and the fix, never a
stack trace; every bound of the body; a missing chat model; the routes turned off."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from tests.inprocess import InProcess, serve_in_process
from tests.mcp_api.hostile import INTERNAL
from tests.openai_api.conftest import QUIET, client

USER = [{"role": "user", "content": "Hello"}]


def schema_format(schema: Any, strict: bool = True) -> dict[str, Any]:
    return {"type": "json_schema", "json_schema": {"name": "answer", "schema": schema, "strict": strict}}


def deep(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


REFUSED = [  # body changes → the param named, words of the message
    ({"response_format": {"type": "xml"}}, "response_format.type", "json_schema"),
    ({"response_format": {"type": "json_schema"}}, "response_format.json_schema", "json_schema"),
    ({"response_format": schema_format({"type": "array", "items": {"type": "string"}})},
     "response_format.json_schema.schema", "object"),
    ({"response_format": schema_format({"type": "object", "properties": {"a": {"type": "colour"}}})},
     "response_format.json_schema.schema", "invalid schema"),
    ({"response_format": schema_format({"type": "object", "properties": {"a": {"$ref": "https://example.com/s"}}})},
     "response_format.json_schema.schema", "$ref"),
    ({"response_format": schema_format(deep(20))}, "response_format.json_schema.schema", "levels"),
    ({"response_format": schema_format({"type": "object", "description": "x" * 70_000})},
     "response_format.json_schema.schema", "bytes"),
    ({"response_format": {"type": "text", "json_schema": {"name": "a", "schema": {"type": "object"}}}},
     "response_format.type", "json_schema"),
    ({"messages": USER * 257}, "messages", "256"),
    ({"messages": []}, "messages", "1"),
    ({"messages": [{"role": "user", "content": "x" * 262_145}]}, "messages.0.content", "262144"),
    ({"messages": [{"role": "user", "content": "x" * 200_000}] * 6}, "messages", "1048576"),
    ({"messages": [{"role": "tool", "content": "x", "tool_call_id": "1"}]}, "messages.0", "role"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}]},
     "messages.0.content", ""),
    ({"messages": [{"role": "user", "content": "x" * 6000}]}, "messages", "context"),
    ({"max_tokens": 0}, "max_tokens", "1"),
    ({"max_tokens": 131_073}, "max_tokens", "131072"),
    ({"max_tokens": 10, "max_completion_tokens": 20}, "max_completion_tokens", "one of them"),
    ({"temperature": 2.5}, "temperature", "2"),
    ({"top_p": 1.5}, "top_p", "1"),
    ({"n": 2}, "n", "1"),
    ({"stream": True}, "stream", "stream: false"),
    ({"stop": ["a", "b", "c", "d", "e"]}, "stop", "4"),
    ({"stop": "}", "response_format": {"type": "json_object"}}, "stop", "text answers"),
    ({"tools": [{"type": "function", "function": {"name": "f"}}]}, "tools", "unsupported parameter"),
    ({"logprobs": True}, "logprobs", "unsupported parameter"),
    ({"model": ""}, "model", "1"),
]


@pytest.mark.parametrize(("change", "param", "words"), REFUSED, ids=[f"{r[1]}-{i}" for i, r in enumerate(REFUSED)])
def test_bad_input_is_refused_in_openais_shape_naming_the_field(tiny_app: InProcess, change: dict[str, Any],
                                                                 param: str, words: str) -> None:
    body = {"model": "gpt-4o", "messages": USER, "max_tokens": 4, **change}
    answer = httpx.post(tiny_app.base_url + "/v1/chat/completions", json=body, timeout=60)
    assert answer.status_code == 400, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    error = answer.json()["error"]
    assert set(answer.json()) == {"error"} and set(error) == {"message", "type", "param", "code"}, error
    assert error["type"] == "invalid_request_error" and str(error["param"]).startswith(param), error
    assert words in error["message"], error
    assert not [word for word in INTERNAL if word in answer.text.casefold()], answer.text
    assert answer.headers["x-should-retry"] == "false"


def test_the_client_library_raises_its_own_errors_with_the_message(openai_client: OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        openai_client.chat.completions.create(model="m", messages=USER,  # type: ignore[arg-type]
                                              response_format={"type": "yaml"})
    assert refused.value.status_code == 400 and refused.value.param == "response_format.type"
    assert "json_schema" in refused.value.message


def test_a_malformed_body_is_refused_in_openais_shape(tiny_app: InProcess) -> None:
    answer = httpx.post(tiny_app.base_url + "/v1/chat/completions", content=b'{"model": "m", "messages": [',
                        headers={"content-type": "application/json"}, timeout=30)
    assert answer.status_code == 400 and "error" in answer.json(), answer.text


def test_a_strict_answer_that_breaks_what_the_grammar_cannot_enforce_is_an_error(openai_client: OpenAI) -> None:
    # the grammar does not enforce uniqueItems: the only answer it lets through, ["a", "a"], breaks the schema
    schema = {"type": "object", "required": ["x"], "additionalProperties": False, "properties": {"x": {
        "type": "array", "items": {"enum": ["a"]}, "minItems": 2, "maxItems": 2, "uniqueItems": True}}}
    with pytest.raises(openai.InternalServerError) as failed:
        openai_client.chat.completions.create(model="m", messages=USER, max_tokens=64,
                                              response_format=schema_format(schema))  # type: ignore[arg-type]
    body = failed.value.body
    assert isinstance(body, dict) and body["code"] == "model_output_invalid" and "schema" in body["message"], body
    assert failed.value.response.headers["x-should-retry"] == "false"
    loose = openai_client.chat.completions.create(model="m", messages=USER, max_tokens=64,
                                                  response_format=schema_format(schema, strict=False))  # type: ignore[arg-type]
    assert (loose.choices[0].message.content or "").startswith("{")  # not strict: the grammar's answer as it is


@pytest.fixture(scope="module")
def no_model(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with serve_in_process(tmp_path_factory.mktemp("openai-none") / "data", None, inference={"chat_model": "none"},
                          maintenance=QUIET) as running:
        yield running


def test_without_a_chat_model_chat_says_how_to_install_one(no_model: InProcess) -> None:
    with client(no_model) as openai_client:
        _without_a_chat_model(openai_client, no_model)


def _without_a_chat_model(openai_client: OpenAI, no_model: InProcess) -> None:
    with pytest.raises(openai.InternalServerError) as unavailable:
        openai_client.chat.completions.create(model="gpt-4o", messages=USER)  # type: ignore[arg-type]
    assert unavailable.value.status_code == 503
    body = unavailable.value.body
    assert isinstance(body, dict) and body["code"] == "model_unavailable", body
    assert "kumiho-ce models install" in body["message"] and 'chat_model = "none"' in body["message"], body
    assert unavailable.value.response.headers["x-should-retry"] == "false"
    # the embedding model is there all the same, and the list says which models there are
    assert [m.id for m in openai_client.models.list().data] == [no_model.services.search.embedder.model_id]
    assert len(openai_client.embeddings.create(model="m", input="still works").data) == 1


def test_the_routes_answer_404_when_turned_off(tmp_path: Path) -> None:
    with serve_in_process(tmp_path / "data", None, inference={"chat_model": "none", "openai_api": False},
                          maintenance=QUIET) as running, client(running) as openai_client:
        for call in (lambda: openai_client.models.list(),
                     lambda: openai_client.embeddings.create(model="m", input="x"),
                     lambda: openai_client.chat.completions.create(model="m", messages=USER)):  # type: ignore[arg-type]
            with pytest.raises(openai.NotFoundError) as off:
                call()
            body = off.value.body
            assert isinstance(body, dict) and body["code"] == "openai_api_off" and "openai_api = true" in body[
                "message"], body


def test_a_body_nested_too_deeply_is_refused_not_a_fault(tiny_app: InProcess) -> None:
    for body in ('{"model": "m", "messages": ' + "[" * 5000 + "]" * 5000 + "}",
                 '{"model": "m", "messages": [{"role": "user", "content": "x"}], "response_format": {"type": '
                 '"json_schema", "json_schema": {"name": "a", "schema": ' + '{"a":' * 900 + "{}" + "}" * 900 + "}}}"):
        answer = httpx.post(tiny_app.base_url + "/v1/chat/completions", content=body.encode(),
                            headers={"content-type": "application/json"}, timeout=60)
        assert answer.status_code == 400, answer.text
        assert "deep" in answer.json()["error"]["message"], answer.text
