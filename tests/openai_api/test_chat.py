"""POST /v1/chat/completions through the official ``openai`` client on the tiny GGUF: text answers, any JSON
object, JSON under a schema (grammar-constrained), stop strings, seeds, usage, and every model name."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from openai import OpenAI

from tests.inprocess import InProcess

ASK = [{"role": "system", "content": "You answer in JSON."}, {"role": "user", "content": "Tell me about cats."}]

# the sidecar's own schema builders (summarization.build_string_array_wrapper_schema), with bounds added, and
# schemas with enums, integer ranges, nested objects and a local $ref
SCHEMAS: dict[str, dict[str, Any]] = {
    "implications": {"type": "object", "additionalProperties": False, "required": ["implications"], "properties": {
        "implications": {"type": "array", "maxItems": 3, "items": {"type": "string", "maxLength": 40}}}},
    "nested": {"type": "object", "additionalProperties": False, "required": ["title", "knowledge"], "properties": {
        "title": {"type": "string", "maxLength": 30},
        "knowledge": {"type": "object", "additionalProperties": False, "required": ["facts"], "properties": {
            "facts": {"type": "array", "maxItems": 2, "items": {
                "type": "object", "additionalProperties": False, "required": ["claim", "certainty"],
                "properties": {"claim": {"type": "string", "maxLength": 20},
                               "certainty": {"enum": ["low", "medium", "high"]}}}}}}}},
    "ranges-and-ref": {"type": "object", "additionalProperties": False, "required": ["score", "done", "tag"],
                       "$defs": {"tag": {"type": "string", "maxLength": 8}}, "properties": {
                           "score": {"type": "integer", "minimum": 0, "maximum": 10},
                           "done": {"type": "boolean"},
                           "tag": {"$ref": "#/$defs/tag"}}},
}


def test_a_text_answer_comes_in_openais_shape_with_its_usage(openai_client: OpenAI, tiny_app: InProcess) -> None:
    answer = openai_client.chat.completions.create(model="gpt-4o", messages=ASK, max_tokens=12)
    choice = answer.choices[0]
    assert answer.object == "chat.completion" and answer.id.startswith("chatcmpl-") and len(answer.choices) == 1
    assert answer.model == tiny_app.services.model.model_id  # whatever name was asked for: the model that answered
    assert choice.message.role == "assistant" and isinstance(choice.message.content, str)
    assert choice.finish_reason in ("stop", "length")
    usage = answer.usage
    assert usage is not None and usage.prompt_tokens > 0 and 0 < usage.completion_tokens <= 12
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
    if choice.finish_reason == "length":
        assert usage.completion_tokens == 12


@pytest.mark.parametrize("name", SCHEMAS)
def test_json_schema_answers_parse_and_validate_against_the_schema(openai_client: OpenAI, name: str) -> None:
    schema = SCHEMAS[name]
    for seed in range(3):  # sampled, so three different answers; every one valid
        answer = openai_client.chat.completions.create(
            model="gpt-4o-mini", messages=ASK, max_tokens=400, temperature=0.9, seed=seed,
            response_format={"type": "json_schema", "json_schema": {"name": f"t_{name}", "schema": schema,
                                                                    "strict": True}})
        choice = answer.choices[0]
        assert choice.finish_reason == "stop", choice
        jsonschema.validate(json.loads(choice.message.content or ""), schema)


def test_json_object_answers_are_json_objects(openai_client: OpenAI) -> None:
    for seed in range(3):
        answer = openai_client.chat.completions.create(model="any-name", messages=ASK, max_tokens=200, seed=seed,
                                                       temperature=0.7, response_format={"type": "json_object"})
        choice = answer.choices[0]
        if choice.finish_reason == "stop":
            assert isinstance(json.loads(choice.message.content or ""), dict), choice.message.content
        else:  # an unbounded object may run to the token limit: then it says so, as OpenAI does
            assert choice.finish_reason == "length" and (choice.message.content or "").startswith("{")


def test_an_answer_cut_by_max_tokens_says_length(openai_client: OpenAI) -> None:
    schema = {"type": "object", "required": ["text"], "properties": {
        "text": {"type": "string", "minLength": 300, "maxLength": 400}}}
    answer = openai_client.chat.completions.create(
        model="m", messages=ASK, max_completion_tokens=10,
        response_format={"type": "json_schema", "json_schema": {"name": "long", "schema": schema, "strict": True}})
    choice = answer.choices[0]
    assert choice.finish_reason == "length" and answer.usage is not None and answer.usage.completion_tokens == 10
    assert (choice.message.content or "").startswith("{")


def test_greedy_answers_repeat_and_a_seed_repeats_a_sampled_answer(openai_client: OpenAI) -> None:
    def text(**options: Any) -> str:
        answer = openai_client.chat.completions.create(model="m", messages=ASK, max_tokens=16, **options)
        return answer.choices[0].message.content or ""

    assert text() == text()  # no temperature: greedy, the appliance's default
    assert text(temperature=1.0, seed=11) == text(temperature=1.0, seed=11)
    assert text(temperature=1.0, top_p=0.5, seed=3) == text(temperature=1.0, top_p=0.5, seed=3)


def test_stop_strings_end_the_text_before_them(openai_client: OpenAI) -> None:
    whole = openai_client.chat.completions.create(model="m", messages=ASK, max_tokens=24).choices[0].message.content
    assert whole and len(whole) > 8
    stop = whole[5:8]
    cut = openai_client.chat.completions.create(model="m", messages=ASK, max_tokens=24, stop=[stop, "\x00never"])
    assert cut.choices[0].message.content == whole[:whole.index(stop)]
    assert cut.choices[0].finish_reason == "stop"


def test_developer_and_assistant_messages_and_text_parts_are_taken(openai_client: OpenAI) -> None:
    answer = openai_client.chat.completions.create(model="m", max_tokens=4, messages=[
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Hello "}, {"type": "text", "text": "there"}]},
        {"role": "assistant", "content": "Hi."},
        {"role": "user", "content": "And now?"}])
    assert answer.usage is not None and answer.usage.prompt_tokens > 20


def test_the_sidecars_requests_are_answered(openai_client: OpenAI) -> None:
    """What kumiho_memory's OpenAICompatAdapter sends to a base URL that is not OpenAI's: a system message,
    max_tokens, and json_schema strict for schema modes (json_object for plain JSON, nothing for text)."""
    schema = SCHEMAS["implications"]
    answer = openai_client.chat.completions.create(
        model="gpt-4o-mini", max_tokens=512,
        messages=[{"role": "system", "content": "You are a memory extraction AI."},
                  {"role": "user", "content": "Conversation to summarize: ..."}],
        response_format={"type": "json_schema", "json_schema": {"name": "kumiho_implications_response",
                                                                "strict": True, "schema": schema}})
    jsonschema.validate(json.loads(answer.choices[0].message.content or ""), schema)
    topics = openai_client.chat.completions.create(model="gpt-4o-mini", max_tokens=60, messages=[
        {"role": "user", "content": "Extract 3-5 concise topic keywords from this text."}])
    assert isinstance(topics.choices[0].message.content, str)
