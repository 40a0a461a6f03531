"""What every ``ChatModel`` implementation shares (schema checks, JSON answers), and ``ScriptedModel``.

The interface itself, its errors and ``NoModel`` are ports: ``appliance.core.ports``. Implementations:

* ``LlamaModel`` (``appliance.inference.llm``): a local GGUF on llama.cpp;
* ``EndpointModel`` (``appliance.inference.remote``): an OpenAI-compatible server;
* ``ScriptedModel`` (here): returns prepared outputs in order, so tests can drive every branch
  (guardrails, garbage, timeouts) with exact answers.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import jsonschema

from appliance.core.ports import Message, ModelCancelled, ModelError, ModelOutputError, ModelStatus, Progress
from appliance.inference.grammar import clean_strings


def check_schema(schema: Mapping[str, Any]) -> None:
    """Refuse a schema that is not a JSON schema object; the grammar and the validator both need one."""
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.SchemaError as exc:
        raise ModelError(f"invalid JSON schema for a model call: {exc.message}") from None
    if schema.get("type") != "object":
        raise ModelError("a structured model call needs a schema of type \"object\"")


def validate_output(value: Any, schema: Mapping[str, Any], model_id: str) -> dict[str, Any]:
    try:
        jsonschema.validate(value, schema, cls=jsonschema.Draft202012Validator)
    except jsonschema.ValidationError as exc:
        # the rule broken, not the value: a model's (or an endpoint's) text is never passed on
        raise ModelOutputError(f"{model_id} answered JSON that breaks the schema at "
                               f"{'/'.join(map(str, exc.absolute_path)) or 'the top'} ({exc.validator})") from None
    return value  # type: ignore[no-any-return]  # valid under an object schema: a dict


def parse_json_answer(text: str, finish: str | None, schema: Mapping[str, Any], model_id: str,
                      max_tokens: int) -> dict[str, Any]:
    """A model's JSON answer, checked against ``schema``; an answer cut off by the token limit says so."""
    try:
        value = clean_strings(json.loads(text, strict=False))
    except ValueError:
        if finish == "length":
            raise ModelOutputError(f"{model_id} used all {max_tokens} tokens before its JSON answer was "
                                   "complete: bound the schema (maxLength, maxItems) or allow more tokens") from None
        raise ModelOutputError(f"{model_id} answered text that is not JSON ({len(text)} characters)") from None
    return validate_output(value, schema, model_id)


@dataclass(frozen=True)
class ScriptedCall:
    kind: Literal["json", "text"]
    messages: list[dict[str, str]]
    schema: dict[str, Any] | None
    max_tokens: int


Scripted = dict[str, Any] | str | BaseException | Callable[[ScriptedCall], Any]


class ScriptedModel:
    """A real ``ChatModel`` whose answers are prepared: each call takes the next one in order.

    An answer is a dict (for ``complete_json``; validated against the call's schema like a real model's
    output), a string (for ``complete_text``), an exception instance (raised: a timeout, a busy model,
    garbage), or a callable that receives the ``ScriptedCall`` and returns one of these. Every call is
    recorded in ``calls``. Running out of answers is a ``ModelError`` that names the call.
    """

    def __init__(self, outputs: Iterable[Scripted] = (), *, model_id: str = "scripted") -> None:
        self.model_id = model_id
        self._outputs: deque[Scripted] = deque(outputs)
        self._lock = threading.Lock()
        self.calls: list[ScriptedCall] = []

    def add(self, *outputs: Scripted) -> None:
        with self._lock:
            self._outputs.extend(outputs)

    @property
    def remaining(self) -> int:
        return len(self._outputs)

    def complete_json(self, messages: Sequence[Message], schema: Mapping[str, Any], *, max_tokens: int = 512,
                      timeout: float | None = None, cancel: threading.Event | None = None,
                      temperature: float = 0.0, progress: Progress | None = None) -> dict[str, Any]:
        check_schema(schema)
        answer = self._next(ScriptedCall("json", [dict(m) for m in messages], dict(schema), max_tokens), cancel)
        if not isinstance(answer, dict):
            raise ModelOutputError(f"{self.model_id}: the scripted answer to a JSON call is "
                                   f"{type(answer).__name__}, not an object")
        return validate_output(answer, schema, self.model_id)

    def complete_text(self, messages: Sequence[Message], *, max_tokens: int = 512, timeout: float | None = None,
                      cancel: threading.Event | None = None, temperature: float = 0.0,
                      progress: Progress | None = None) -> str:
        answer = self._next(ScriptedCall("text", [dict(m) for m in messages], None, max_tokens), cancel)
        if not isinstance(answer, str):
            raise ModelOutputError(f"{self.model_id}: the scripted answer to a text call is "
                                   f"{type(answer).__name__}, not a string")
        return answer

    def status(self) -> ModelStatus:
        return ModelStatus(True, "loaded", model_id=self.model_id, calls=len(self.calls))

    def _next(self, call: ScriptedCall, cancel: threading.Event | None) -> Any:
        with self._lock:
            self.calls.append(call)
            if cancel is not None and cancel.is_set():
                raise ModelCancelled("the model call was cancelled")
            if not self._outputs:
                raise ModelError(f"{self.model_id}: no scripted answer left for call {len(self.calls)} "
                                 f"({call.kind})")
            answer = self._outputs.popleft()
        if callable(answer) and not isinstance(answer, BaseException):
            answer = answer(call)
        if isinstance(answer, BaseException):
            raise answer
        return answer
