"""The model interface without llama.cpp: the scripted model that drives guardrail tests, and no model."""

from __future__ import annotations

import threading

import pytest

from appliance.core.ports import (
    ModelCancelled,
    ModelError,
    ModelOutputError,
    ModelTimeout,
    ModelUnavailable,
    NoModel,
    model_status,
)
from appliance.inference.chat import ScriptedCall, ScriptedModel
from appliance.inference.llm import SMOKE_SCHEMA

ASK = [{"role": "user", "content": "hello"}]


def test_a_scripted_model_answers_in_order_and_records_each_call() -> None:
    model = ScriptedModel([{"title": "Cats", "topics": ["pets"]}, "plain text"])
    assert model.complete_json(ASK, SMOKE_SCHEMA, max_tokens=64) == {"title": "Cats", "topics": ["pets"]}
    assert model.complete_text(ASK) == "plain text"
    assert [c.kind for c in model.calls] == ["json", "text"]
    assert model.calls[0].schema == SMOKE_SCHEMA and model.calls[0].max_tokens == 64
    assert model.remaining == 0 and model.status().calls == 2


def test_a_scripted_answer_that_breaks_the_schema_is_an_output_error_like_a_real_one() -> None:
    model = ScriptedModel([{"title": "x" * 81, "topics": ["a"]}, "not an object"])
    with pytest.raises(ModelOutputError, match="title"):
        model.complete_json(ASK, SMOKE_SCHEMA)
    with pytest.raises(ModelOutputError, match="not an object"):
        model.complete_json(ASK, SMOKE_SCHEMA)


def test_scripted_exceptions_are_raised_and_callables_see_the_call() -> None:
    def echo(call: ScriptedCall) -> str:
        return call.messages[-1]["content"].upper()

    model = ScriptedModel([ModelTimeout("too slow"), echo])
    with pytest.raises(ModelTimeout, match="too slow"):
        model.complete_text(ASK)
    assert model.complete_text(ASK) == "HELLO"


def test_running_out_of_answers_or_a_cancelled_call_fails_clearly() -> None:
    model = ScriptedModel()
    with pytest.raises(ModelError, match="no scripted answer left for call 1"):
        model.complete_text(ASK)
    cancel = threading.Event()
    cancel.set()
    model.add("unused")
    with pytest.raises(ModelCancelled):
        model.complete_text(ASK, cancel=cancel)


def test_a_bad_schema_is_refused_before_any_model_runs() -> None:
    model = ScriptedModel([{"a": 1}])
    with pytest.raises(ModelError, match="type \"object\""):
        model.complete_json(ASK, {"type": "array"})
    with pytest.raises(ModelError, match="invalid JSON schema"):
        model.complete_json(ASK, {"type": "object", "properties": {"a": {"type": "nonsense"}}})
    assert model.remaining == 1


def test_without_a_model_every_call_and_the_status_say_why() -> None:
    model = NoModel("disabled by the configuration")
    with pytest.raises(ModelUnavailable, match="disabled by the configuration"):
        model.complete_json(ASK, SMOKE_SCHEMA)
    with pytest.raises(ModelUnavailable, match="no local model"):
        model.complete_text(ASK)
    status = model_status(model)
    assert not status.available and status.state == "unavailable"
    assert status.to_dict() == {"available": False, "state": "unavailable", "reason": "disabled by the configuration",
                                "calls": 0}
    assert model_status(None).reason == "no chat model is configured"
