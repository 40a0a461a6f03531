"""An OpenAI chat request as one call of the appliance's chat model, and what that call answered.

The route (``openai_compat``) parses and bounds the body; this module turns it into a ``ChatCall`` (refusing
what the model cannot do, naming the field), runs it on the appliance's own model — the one instance the
memory work uses, through its one-call-at-a-time slot — and says how the answer ended.

* The local llama.cpp model (``LlamaModel.complete``) reports the raw text, why it ended and exact token
  counts; it generates JSON answers under a grammar made from the schema. The response cache of the memory
  work (``[memory] response_cache_*``) is not used here: an OpenAI client expects a generation per call.
* Any other chat model (an OpenAI-compatible endpoint the appliance itself uses, a scripted test model)
  answers through the ``ChatModel`` interface: its JSON is validated against the schema, and only the answer
  tokens it reports through progress are counted.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from appliance.admin_api.openai_shapes import (
    MAX_SCHEMA_BYTES,
    MAX_SCHEMA_DEPTH,
    MAX_TOTAL_CHARS,
    ChatCompletionRequest,
    ChatMessage,
)
from appliance.core.ports import ChatModel, Message, ModelError
from appliance.errors import InvalidArgument
from appliance.inference.chat import check_schema, parse_json_answer
from appliance.inference.llm import Completion, LlamaModel

SCHEMA_FIELD = "response_format.json_schema.schema"
ANY_OBJECT: dict[str, Any] = {"type": "object"}  # json_object: any JSON object


@dataclass(frozen=True)
class ChatCall:
    messages: list[Message]
    schema: dict[str, Any] | None  # None: a text answer
    strict: bool  # a JSON answer that breaks the schema is an error (not only what the grammar enforces)
    max_tokens: int | None  # None: as many as the context leaves room for
    temperature: float
    top_p: float | None
    seed: int | None
    stop: list[str]


def chat_call(request: ChatCompletionRequest) -> ChatCall:
    """The model call ``request`` asks for; ``InvalidArgument`` naming the field for what cannot be done."""
    if request.stream:
        raise InvalidArgument("streaming is not offered: send stream: false (or leave it out) and read the whole "
                              "answer", field="stream")
    if request.max_tokens is not None and request.max_completion_tokens is not None \
            and request.max_tokens != request.max_completion_tokens:
        raise InvalidArgument("max_tokens and max_completion_tokens differ; send one of them",
                              field="max_completion_tokens")
    stop = [request.stop] if isinstance(request.stop, str) else list(request.stop or [])
    schema, strict = _answer_format(request)
    if stop and schema is not None:
        raise InvalidArgument("stop strings apply to text answers only; leave stop out with a JSON "
                              "response_format", field="stop")
    return ChatCall(messages=_messages(request.messages), schema=schema, strict=strict,
                    max_tokens=request.max_completion_tokens or request.max_tokens,
                    temperature=request.temperature or 0.0, top_p=request.top_p, seed=request.seed, stop=stop)


def _messages(messages: list[ChatMessage]) -> list[Message]:
    out: list[Message] = []
    total = 0
    for message in messages:
        text = message.content if isinstance(message.content, str) else "".join(p.text for p in message.content)
        total += len(text)
        if total > MAX_TOTAL_CHARS:
            raise InvalidArgument(f"the messages hold more than {MAX_TOTAL_CHARS} characters together; send less",
                                  field="messages")
        out.append({"role": "system" if message.role == "developer" else message.role, "content": text})
    return out


def _answer_format(request: ChatCompletionRequest) -> tuple[dict[str, Any] | None, bool]:
    wanted = request.response_format
    if wanted is None or wanted.type == "text":
        if wanted is not None and wanted.json_schema is not None:
            raise InvalidArgument("json_schema is given but type is text; set type to json_schema",
                                  field="response_format.type")
        return None, False
    if wanted.type == "json_object":
        return ANY_OBJECT, False
    if wanted.json_schema is None:
        raise InvalidArgument("type json_schema needs json_schema: {name, schema, strict}",
                              field="response_format.json_schema")
    schema = wanted.json_schema.json_schema
    check_answer_schema(schema)
    return schema, bool(wanted.json_schema.strict)


def check_answer_schema(schema: Mapping[str, Any]) -> None:
    """Refuse a schema that is too large or deep, refers outside itself, or is no JSON schema of an object."""
    if len(json.dumps(schema, separators=(",", ":"))) > MAX_SCHEMA_BYTES:
        raise InvalidArgument(f"the schema is larger than {MAX_SCHEMA_BYTES} bytes as JSON", field=SCHEMA_FIELD)
    if _depth(schema) > MAX_SCHEMA_DEPTH:
        raise InvalidArgument(f"the schema nests deeper than {MAX_SCHEMA_DEPTH} levels", field=SCHEMA_FIELD)
    for ref in _refs(schema):
        if not ref.startswith("#"):  # the grammar converter would fetch a URL: nothing leaves the machine
            raise InvalidArgument("$ref may only point within the schema (#/$defs/…)", field=SCHEMA_FIELD)
    try:
        check_schema(schema)
    except ModelError as exc:
        raise InvalidArgument(f"invalid schema: {exc.message}", field=SCHEMA_FIELD) from None


def check_grammar(model: ChatModel, schema: Mapping[str, Any]) -> None:
    """The local model generates under a grammar made from the schema: a schema it cannot convert is the
    caller's to fix (an unknown ``format``, a regular expression it does not take)."""
    if isinstance(model, LlamaModel):
        from appliance.inference.grammar import schema_grammar

        try:
            schema_grammar(schema)
        except ModelError as exc:
            raise InvalidArgument(f"invalid schema for a grammar: {exc.message}", field=SCHEMA_FIELD) from None


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def _refs(value: Any) -> list[str]:
    if isinstance(value, dict):
        found = [str(v) for k, v in value.items() if k in ("$ref", "$dynamicRef")]
        return found + [ref for v in value.values() for ref in _refs(v)]
    if isinstance(value, list):
        return [ref for v in value for ref in _refs(v)]
    return []


def local_model(model: ChatModel) -> ChatModel:
    """The appliance's chat model without what wraps it: the response cache (``CachedModel.model``) and the
    metrics' counting (``ObservedModel.model``)."""
    while (inner := getattr(model, "model", None)) is not None and hasattr(inner, "complete_text"):
        model = inner
    return model


def run_chat(model: ChatModel, call: ChatCall, default_max_tokens: int, cancel: threading.Event) -> Completion:
    """Run ``call`` on ``model``; the answer's text is final (stop strings applied, strict JSON checked)."""
    max_tokens = call.max_tokens or default_max_tokens
    if isinstance(model, LlamaModel):
        done = model.complete(call.messages, schema=call.schema, max_tokens=max_tokens, cancel=cancel,
                              temperature=call.temperature, seed=None if call.seed is None else call.seed % 2**32,
                              **({"top_p": call.top_p} if call.top_p is not None else {}))
    else:
        done = _through_interface(model, call, max_tokens, cancel)
    if call.schema is None:
        return _stopped(done, call.stop)
    if call.strict and done.finish == "stop":
        # raises ModelOutputError when the answer breaks the schema (what the grammar cannot enforce)
        parse_json_answer(done.text, done.finish, call.schema, model.model_id, max_tokens)
    return done


def _through_interface(model: ChatModel, call: ChatCall, max_tokens: int, cancel: threading.Event) -> Completion:
    counted = [0]

    def progress(n: int, _total: int) -> None:
        counted[0] = n

    if call.schema is None:
        text = model.complete_text(call.messages, max_tokens=max_tokens, cancel=cancel,
                                   temperature=call.temperature, progress=progress)
    else:
        answer = model.complete_json(call.messages, call.schema, max_tokens=max_tokens, cancel=cancel,
                                     temperature=call.temperature, progress=progress)
        text = json.dumps(answer, ensure_ascii=False)
    return Completion(text, "stop", 0, counted[0])


def _stopped(done: Completion, stop: list[str]) -> Completion:
    """The text up to the first stop string (generation ran on past it: the model port has no stop words)."""
    cuts = [done.text.find(s) for s in stop if s in done.text]
    if not cuts:
        return done
    return Completion(done.text[:min(cuts)], "stop", done.prompt_tokens, done.completion_tokens)

