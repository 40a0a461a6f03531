"""LlamaModel on the tiny random-weight GGUF: the real llama.cpp loading, generation, grammar and limits."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import jsonschema
import pytest

from appliance.core.ports import (
    ModelBusy,
    ModelCancelled,
    ModelInputTooLong,
    ModelOutputError,
    ModelTimeout,
    ModelUnavailable,
)
from appliance.inference.grammar import FREE_ARRAY_ITEMS, FREE_STRING_CHARS, clean_strings, for_grammar, schema_grammar
from appliance.inference.llm import SMOKE_SCHEMA, LlamaModel
from tests.inference.conftest import Ticker

ASK = [{"role": "system", "content": "Answer in JSON."}, {"role": "user", "content": "Tell me about cats."}]

SCHEMAS = [
    SMOKE_SCHEMA,
    {"type": "object", "properties": {"queries": {"type": "array", "maxItems": 3, "items": {
        "type": "string", "maxLength": 30}}}, "required": ["queries"], "additionalProperties": False},
    {"type": "object", "properties": {
        "verdict": {"enum": ["keep", "deprecate", "merge"]},
        "percent": {"type": "integer", "minimum": 0, "maximum": 100},
        "count": {"type": "integer", "exclusiveMinimum": -1, "exclusiveMaximum": 10},
        "score": {"type": "number"},
        "stale": {"type": "boolean"},
        "reasons": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string", "maxLength": 12}}},
     "required": ["verdict", "percent", "count", "score", "stale", "reasons"], "additionalProperties": False},
]


def test_the_model_loads_only_on_its_first_call(tiny: LlamaModel) -> None:
    assert tiny.status().state == "unloaded" and tiny.status().available
    text = tiny.complete_text(ASK, max_tokens=8)
    status = tiny.status()
    assert isinstance(text, str)
    assert status.state == "loaded" and status.calls == 1 and status.load_seconds is not None


@pytest.mark.parametrize("schema", SCHEMAS, ids=["smoke", "bounded-array", "enum-ranges-bool"])
def test_structured_answers_are_valid_under_their_schema(tiny: LlamaModel, schema: dict) -> None:
    for _ in range(3):
        answer = tiny.complete_json(ASK, schema, max_tokens=400, temperature=0.8)
        jsonschema.validate(answer, schema)


def test_an_answer_cut_off_by_the_token_limit_is_an_output_error(tiny: LlamaModel) -> None:
    schema = {"type": "object", "properties": {"text": {"type": "string", "minLength": 200, "maxLength": 300}},
              "required": ["text"]}
    with pytest.raises(ModelOutputError, match="tokens"):
        tiny.complete_json(ASK, schema, max_tokens=10)


def test_a_prompt_longer_than_the_context_is_refused(tiny: LlamaModel) -> None:
    with pytest.raises(ModelInputTooLong):
        tiny.complete_text([{"role": "user", "content": "x" * 2000}], max_tokens=8)
    assert tiny.complete_text(ASK, max_tokens=4) is not None  # and the model still works


def test_one_call_runs_at_a_time(tiny: LlamaModel) -> None:
    order: list[int] = []

    def call(n: int) -> None:
        tiny.complete_text(ASK, max_tokens=12, progress=lambda *_: order.append(n))

    threads = [threading.Thread(target=call, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    blocks = [n for i, n in enumerate(order) if i == 0 or order[i - 1] != n]
    assert sorted(blocks) == [0, 1, 2, 3]  # each call's tokens in one uninterrupted run
    assert tiny.status().calls == 4


def _hold(model: LlamaModel) -> tuple[threading.Thread, threading.Event, threading.Event]:
    """Start a call that keeps the model's slot until ``release`` is set."""
    inside, release = threading.Event(), threading.Event()

    def progress(*_: int) -> None:
        inside.set()
        assert release.wait(30)

    thread = threading.Thread(target=model.complete_text, args=(ASK,), kwargs={"max_tokens": 3, "progress": progress})
    thread.start()
    assert inside.wait(30)
    return thread, inside, release


@pytest.mark.parametrize(("limits", "match"), [
    ({"queue_timeout": 0.05}, "busy"),  # waited too long for the slot
    ({"max_waiting": 0}, "wait"),  # too many callers already wait: refused at once
])
def test_a_busy_model_refuses_callers_it_cannot_serve(tiny_gguf: Path, limits: dict[str, float], match: str) -> None:
    model = LlamaModel(tiny_gguf, model_id="tiny", context_tokens=512, threads=1, **limits)
    thread, _, release = _hold(model)
    try:
        with pytest.raises(ModelBusy, match=match):
            model.complete_text(ASK, max_tokens=3)
    finally:
        release.set()
        thread.join(30)
        model.close()


def test_a_deadline_that_passes_while_waiting_is_a_timeout(tiny: LlamaModel) -> None:
    thread, _, release = _hold(tiny)
    try:
        with pytest.raises(ModelTimeout, match="waited"):
            tiny.complete_text(ASK, max_tokens=3, timeout=0.05)
    finally:
        release.set()
        thread.join(30)


def test_generation_stops_when_the_deadline_passes(tiny_gguf: Path, ticker: Ticker) -> None:
    model = LlamaModel(tiny_gguf, model_id="tiny", context_tokens=512, threads=1, clock=ticker)
    seen: list[int] = []

    def progress(n: int, _: int) -> None:
        seen.append(n)
        if n == 3:
            ticker.advance(61)

    with pytest.raises(ModelTimeout, match="deadline"):
        model.complete_text(ASK, max_tokens=200, timeout=60, progress=progress)
    assert seen == [1, 2, 3]
    assert model.complete_text(ASK, max_tokens=4) is not None  # the next call runs normally
    model.close()


def test_a_cancelled_call_stops_and_the_model_goes_on(tiny: LlamaModel) -> None:
    cancel = threading.Event()
    seen: list[int] = []

    def progress(n: int, _: int) -> None:
        seen.append(n)
        if n == 2:
            cancel.set()

    with pytest.raises(ModelCancelled):
        tiny.complete_json(ASK, SMOKE_SCHEMA, max_tokens=200, cancel=cancel, progress=progress)
    assert seen == [1, 2]
    with pytest.raises(ModelCancelled):  # already cancelled: it does not even start
        tiny.complete_text(ASK, cancel=cancel)
    jsonschema.validate(tiny.complete_json(ASK, SMOKE_SCHEMA, max_tokens=300), SMOKE_SCHEMA)


def test_an_idle_model_is_unloaded_and_loads_again(tiny_gguf: Path, ticker: Ticker) -> None:
    model = LlamaModel(tiny_gguf, model_id="tiny", context_tokens=512, threads=1, idle_unload_seconds=3600,
                       clock=ticker)
    model.complete_text(ASK, max_tokens=2)
    assert not model.unload_if_idle() and model.status().state == "loaded"
    ticker.advance(3600)
    assert model.unload_if_idle() and model.status().state == "unloaded"
    model.complete_text(ASK, max_tokens=2)
    assert model.status().state == "loaded" and model.status().calls == 2
    model.close()


def test_the_idle_timer_unloads_by_itself(tiny_gguf: Path) -> None:
    model = LlamaModel(tiny_gguf, model_id="tiny", context_tokens=512, threads=1, idle_unload_seconds=0.01)
    model.complete_text(ASK, max_tokens=2)
    unloaded = threading.Event()
    for _ in range(200):  # bounded: 2 s at most
        if model.status().state == "unloaded":
            unloaded.set()
            break
        unloaded.wait(0.01)
    assert unloaded.is_set()
    model.close()


def test_a_missing_or_tampered_file_makes_the_call_unavailable(tmp_path: Path, tiny_gguf: Path) -> None:
    missing = LlamaModel(tmp_path / "absent.gguf", model_id="absent")
    with pytest.raises(ModelUnavailable, match="does not exist"):
        missing.complete_text(ASK)
    assert not missing.status().available and "does not exist" in (missing.status().reason or "")
    tampered = LlamaModel(tiny_gguf, model_id="tiny", sha256="0" * 64)
    with pytest.raises(ModelUnavailable, match="sha256"):
        tampered.complete_json(ASK, SMOKE_SCHEMA)


def test_a_file_that_is_not_a_model_is_unavailable(tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF" + b"\0" * 100)
    with pytest.raises(ModelUnavailable, match="cannot load"):
        LlamaModel(junk).complete_text(ASK)


def test_the_model_can_be_loaded_ahead_and_unloaded_on_demand(tiny: LlamaModel) -> None:
    tiny.load()
    assert tiny.status().state == "loaded" and tiny.status().calls == 0
    assert tiny.unload() and tiny.status().state == "unloaded"
    assert not tiny.unload()


def test_the_lazy_grammar_picks_what_llama_cpp_python_picks_under_the_full_grammar(tiny: LlamaModel) -> None:
    from llama_cpp import LlamaGrammar

    answer = tiny.complete_json(ASK, SCHEMAS[1], max_tokens=300)
    llm = tiny._llm
    formatted = tiny._formatter(messages=ASK)
    prompt = llm.tokenize(formatted.prompt.encode(), add_bos=not formatted.added_special, special=True)
    reference = llm.create_completion(prompt, max_tokens=300, temperature=0, grammar=LlamaGrammar.from_string(
        tiny._grammar(SCHEMAS[1]), verbose=False))
    assert json.loads(reference["choices"][0]["text"], strict=False) == answer


def test_small_integer_ranges_become_enums_for_the_grammar() -> None:
    schema = {"type": "object", "properties": {
        "a": {"type": "integer", "minimum": 0, "maximum": 3},
        "b": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 4},
        "c": {"type": "integer", "minimum": 0},
        "d": {"type": "array", "items": {"type": "integer", "minimum": -2, "maximum": 1.5}},
        "e": {"type": "integer", "minimum": 0, "maximum": 10_000}}}
    assert for_grammar(schema)["properties"] == {
        "a": {"enum": [0, 1, 2, 3]}, "b": {"enum": [1, 2, 3]}, "c": {"type": "integer", "minimum": 0},
        "d": {"type": "array", "items": {"enum": [-2, -1, 0, 1]}},
        "e": {"type": "integer", "minimum": 0, "maximum": 10_000}}


def test_lone_surrogates_in_answers_are_replaced() -> None:
    assert clean_strings({"a": ["x\ud800y", "\ud83d\ude00"]}) == {"a": ["x\ufffdy", "\U0001f600"]}


def test_grammar_strings_exclude_control_characters() -> None:
    assert r'char ::= [^"\\\x7F\x00-\x1F] |' in schema_grammar(SMOKE_SCHEMA)  # llama.cpp's rule, not the port's


# The shape of Kumiho's stock sidecar's summary schema (strict, nothing bounded): strings, arrays of strings and
# arrays of objects of strings, as it sends them to the OpenAI-compatible endpoint.
_UNBOUNDED = {"type": "object", "additionalProperties": False, "required": ["title", "summary", "facts", "events"],
              "properties": {"title": {"type": "string"}, "summary": {"type": "string"},
                             "facts": {"type": "array", "items": {"type": "string"}},
                             "events": {"type": "array", "items": {
                                 "type": "object", "additionalProperties": False, "required": ["what", "who"],
                                 "properties": {"what": {"type": "string"},
                                                "who": {"type": "array", "items": {"type": "string"}}}}}}}


def test_a_schema_that_bounds_nothing_gets_bounds_from_the_grammar(tiny: LlamaModel) -> None:
    """Free strings and arrays are bounded as repetitions llama.cpp accepts (the converter's maxLength form,
    one nested rule per character, is refused at these sizes), and answers still follow the schema."""
    grammar = schema_grammar(_UNBOUNDED)
    assert f"char{{0,{FREE_STRING_CHARS}}}" in grammar and "char*" not in grammar
    assert f"{{0,{FREE_ARRAY_ITEMS - 1}}})? \"]\"" in grammar and ")*)?" not in grammar
    for seed in range(3):
        done = tiny.complete(ASK, schema=_UNBOUNDED, max_tokens=300, temperature=0.9, seed=seed)
        assert done.completion_tokens > 0  # the grammar was accepted and generation ran
        if done.finish == "stop":
            jsonschema.validate(json.loads(done.text), _UNBOUNDED)
