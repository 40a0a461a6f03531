"""The OpenAI-compatible endpoint (``/v1``): ``GET /v1/models``, ``POST /v1/chat/completions`` and
``POST /v1/embeddings`` on the appliance's own models, so that a client written for OpenAI (the stock Kumiho
sidecar with ``KUMIHO_LLM_BASE_URL``) runs on this machine with nothing leaving it.

* Every model name is answered by the appliance's chat model (chat) or its embedding model (embeddings): a
  client's configured names (``gpt-4o``, ``gpt-4o-mini``) need no mapping. ``/v1/models`` lists the real ids.
* The chat model is the one instance the memory work uses: one call runs at a time, the others wait their
  turn (``inference.queue_timeout_seconds``, ``inference.max_waiting``); a full queue answers 429 with
  ``Retry-After``. A client that disconnects stops its generation at the next token.
* Errors are in OpenAI's shape (``{"error": {"message", "type", "param", "code"}}``), naming the field.
  The front door's refusals (Host, Origin, the token, the body bound) come before any route and stay
  problem documents, like everywhere else on the appliance.
* ``[inference] openai_api = false`` turns the routes off (404 saying so).
"""

from __future__ import annotations

import base64
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import numpy as np
from litestar import Controller, Request, Response, get, post
from litestar.connection import ASGIConnection
from litestar.datastructures import State
from litestar.exceptions import HTTPException, ValidationException
from litestar.handlers.base import BaseRouteHandler
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import OpenAPI, OpenAPIMediaType, OpenAPIResponse, Operation, Reference, Schema
from litestar.openapi.spec.enums import OpenAPIType
from litestar.params import JSONBody
from litestar.types import ExceptionHandlersMap

from appliance.admin_api.openai_calls import chat_call, check_grammar, local_model, run_chat
from appliance.admin_api.openai_shapes import (
    MAX_EMBEDDING_INPUTS,
    AnswerMessage,
    ChatCompletion,
    ChatCompletionRequest,
    Choice,
    Embedding,
    EmbeddingList,
    EmbeddingRequest,
    EmbeddingUsage,
    ErrorAnswer,
    ErrorDetail,
    ModelCard,
    ModelList,
    Usage,
)
from appliance.core.ports import (
    ModelBusy,
    ModelCancelled,
    ModelError,
    ModelInputTooLong,
    ModelOutputError,
    ModelTimeout,
    ModelUnavailable,
    NoModel,
)
from appliance.errors import KumihoError

log = logging.getLogger(__name__)

OWNER = "kumiho-ce"
BUSY_RETRY_SECONDS = 10  # a model call takes seconds to a minute on a small machine
OPENAI_ERROR = "OpenAIError"
INSTALL_HINT = ("the OpenAI-compatible chat route needs the appliance's chat model: run `kumiho-ce models install` "
                "and set [inference] chat_model = \"default\" (or \"gguf\" with model_path), then restart")
STARTED = int(time.time())  # a model card's `created`: when this appliance started serving it
T = TypeVar("T")
_SHAPE_TAG = re.compile(r"(constrained-)?str|.*\[.*\]")  # pydantic's name of a union member in an error's path


class OpenAIError(Exception):
    """An error answered in OpenAI's shape."""

    def __init__(self, status: int, message: str, *, kind: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None, headers: dict[str, str] | None = None, retry: bool = False) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.param, self.code = status, message, kind, param, code
        # the official clients retry 408/409/429/5xx unless told not to: a timeout or a missing model
        # would only come back the same way (and cost another model call)
        self.headers = {**(headers or {}), "x-should-retry": "true" if retry else "false"}


# -- errors in OpenAI's shape ----------------------------------------------------------------------------------


def _answer(exc: OpenAIError) -> Response[ErrorAnswer]:
    body = ErrorAnswer(error=ErrorDetail(message=exc.message, type=exc.kind, param=exc.param, code=exc.code))
    return Response(body, status_code=exc.status, headers=exc.headers)


def _from_model_error(exc: ModelError) -> OpenAIError:
    if isinstance(exc, ModelUnavailable):
        return OpenAIError(503, f"{exc.message}; {INSTALL_HINT}", kind="server_error", code="model_unavailable")
    if isinstance(exc, ModelBusy):
        return OpenAIError(429, exc.message, kind="rate_limit_error", code="model_busy", retry=True,
                           headers={"Retry-After": str(BUSY_RETRY_SECONDS)})
    if isinstance(exc, ModelTimeout):
        return OpenAIError(504, exc.message, kind="timeout_error", code="model_timeout")
    if isinstance(exc, ModelInputTooLong):
        return OpenAIError(400, exc.message, param="messages", code="context_length_exceeded")
    if isinstance(exc, ModelOutputError):  # its message names the rule broken, never the model's text
        return OpenAIError(500, exc.message, kind="server_error", code="model_output_invalid")
    if isinstance(exc, ModelCancelled):
        return OpenAIError(408, exc.message, code="cancelled")
    log.error("chat model failed: %s", exc.message)  # e.g. llama.cpp's own words: for the log, not the client
    return OpenAIError(500, "the model failed; see the appliance log", kind="server_error", code="model_error")


def openai_error(request: Request[Any, Any, Any], exc: Exception) -> Response[ErrorAnswer]:
    if isinstance(exc, OpenAIError):
        return _answer(exc)
    if isinstance(exc, ModelError):
        return _answer(_from_model_error(exc))
    if isinstance(exc, KumihoError) and exc.code in ("invalid_argument", "invalid_kref"):
        return _answer(OpenAIError(400, exc.message, param=exc.field, code="invalid_value"))
    if isinstance(exc, ValidationException):
        return _answer(_validation(exc))
    if isinstance(exc, RecursionError):  # the JSON decoder's own limit (about 1,000 levels): the body's fault
        return _answer(OpenAIError(400, "the request body nests too deeply; send a flatter JSON body"))
    if isinstance(exc, HTTPException) and exc.status_code < 500:
        return _answer(OpenAIError(exc.status_code, str(exc.detail), headers=exc.headers))
    log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return _answer(OpenAIError(500, "internal error; see the appliance log", kind="server_error", code="internal"))


def _validation(exc: ValidationException) -> OpenAIError:
    errors = [e for e in exc.extra if isinstance(e, dict) and e.get("key")] if isinstance(exc.extra, list) else []
    if not errors:
        return OpenAIError(400, "the request body is not valid JSON of the documented shape (see /api/schema)")
    # a field of several shapes (a text or a list of texts) fails once per shape: the error about the value
    # beats the one about the shape it did not take
    first = next((e for e in errors if not str(e.get("message", "")).startswith("Input should be a valid")),
                 errors[0])
    param = ".".join(part for part in str(first["key"]).split(".") if not _SHAPE_TAG.fullmatch(part))
    message = str(first.get("message") or "is not valid").rstrip(".")
    if message.startswith("Extra inputs are not permitted"):
        message = "unsupported parameter; the appliance does not take it: leave it out (see docs/openai-api.md)"
    return OpenAIError(400, f"{param}: {message}", param=param, code="invalid_value")



# every class the app maps itself (appliance/admin_api/errors.py): Litestar picks the most specific class
_HANDLERS: ExceptionHandlersMap = {cls: openai_error for cls in (KumihoError, ValidationException, HTTPException,
                                                                 RecursionError, Exception)}


def _enabled(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
    if not connection.app.state.services.settings.inference.openai_api:
        raise OpenAIError(404, "the OpenAI-compatible API is turned off on this appliance; set [inference] "
                               "openai_api = true and restart", code="openai_api_off")


_ERRORS = {status: ResponseSpec(data_container=ErrorAnswer, description=meaning) for status, meaning in {
    400: "Bad input: `param` names the field and the message the fix",
    404: "The OpenAI-compatible API is turned off ([inference] openai_api = false)",
    429: "The model is busy (one call runs at a time and the queue is full); retry after Retry-After seconds",
    503: "No chat model: the message says how to install one",
    504: "The call passed its deadline (inference.request_timeout_seconds) and was stopped",
}.items()}


class OpenAIController(Controller):
    path = "/v1"
    opt = {"door": "openai"}  # noqa: RUF012  # Litestar declares opt an instance attribute  # who is calling
    tags = ("openai",)
    guards = (_enabled,)
    exception_handlers = _HANDLERS

    @get("/models", summary="The models on this appliance (OpenAI's list shape); any name is accepted as an alias",
         sync_to_thread=False, responses={404: _ERRORS[404]})
    def models(self, state: State) -> ModelList:
        services = state.services
        cards = []
        if not isinstance(local_model(services.model), NoModel):
            cards.append(ModelCard(id=services.model.model_id, created=STARTED, owned_by=OWNER))
        cards.append(ModelCard(id=services.search.embedder.model_id, created=STARTED, owned_by=OWNER))
        return ModelList(data=cards)

    @post("/chat/completions", summary="A chat answer from the appliance's chat model: text, any JSON object, or "
          "JSON under a schema (grammar-constrained)", status_code=200,
          responses={status: _ERRORS[status] for status in (400, 404, 429, 503, 504)})
    async def chat_completions(self, request: Request[Any, Any, Any], state: State,
                               data: JSONBody[ChatCompletionRequest]) -> ChatCompletion:
        services = state.services
        call = chat_call(data)
        model = local_model(services.model)
        if isinstance(model, NoModel):
            raise ModelUnavailable(f"no local chat model: {model.reason}")
        if call.schema is not None:
            check_grammar(model, call.schema)
        context = services.settings.inference.context_tokens
        done = await _until_disconnected(request, lambda cancel: run_chat(model, call, context, cancel))
        return ChatCompletion(
            id=f"chatcmpl-{uuid.uuid4().hex}", created=int(time.time()), model=model.model_id,
            choices=[Choice(index=0, message=AnswerMessage(content=done.text),
                            finish_reason="length" if done.finish == "length" else "stop")],
            usage=Usage(prompt_tokens=done.prompt_tokens, completion_tokens=done.completion_tokens,
                        total_tokens=done.prompt_tokens + done.completion_tokens))

    @post("/embeddings", summary="Embeddings from the appliance's embedding model (OpenAI's shape)", status_code=200,
          sync_to_thread=True, responses={status: _ERRORS[status] for status in (400, 404)})
    def embeddings(self, state: State, data: JSONBody[EmbeddingRequest]) -> EmbeddingList:
        embedder = state.services.search.embedder
        texts = [data.input] if isinstance(data.input, str) else data.input
        if not texts:
            raise OpenAIError(400, "input is empty; send a text or a list of texts", param="input")
        if len(texts) > MAX_EMBEDDING_INPUTS:
            raise OpenAIError(400, f"at most {MAX_EMBEDDING_INPUTS} texts per request; send the rest in another",
                              param="input")
        if data.dimensions is not None and data.dimensions != embedder.dim:
            raise OpenAIError(400, f"{embedder.model_id} has {embedder.dim} dimensions; leave dimensions out or "
                                   f"send {embedder.dim}", param="dimensions")
        vectors = np.asarray(embedder.embed(texts), dtype="<f4")
        data_out = [Embedding(index=i, embedding=base64.b64encode(row.tobytes()).decode("ascii")
                              if data.encoding_format == "base64" else row.tolist())
                    for i, row in enumerate(vectors)]
        # the embedder does not count tokens; OpenAI's shape needs the field
        return EmbeddingList(data=data_out, model=embedder.model_id, usage=EmbeddingUsage(prompt_tokens=0,
                                                                                           total_tokens=0))


async def _until_disconnected(request: Request[Any, Any, Any], work: Callable[[threading.Event], T]) -> T:
    """``work(cancel)`` on a worker thread; ``cancel`` is set when the client disconnects first, so the model
    stops at its next token instead of generating for no one."""
    cancel = threading.Event()
    result: list[T] = []

    async def watch() -> None:
        while True:
            message = await request.receive()
            if message["type"] == "http.disconnect":
                cancel.set()
                return

    failed: list[Exception] = []
    async with anyio.create_task_group() as group:
        group.start_soon(watch)
        try:
            result.append(await anyio.to_thread.run_sync(work, cancel))
        except Exception as exc:  # raised below, outside the group: not wrapped in an exception group
            failed.append(exc)
        finally:
            group.cancel_scope.cancel()
    if failed:
        raise failed[0]
    return result[0]




# -- the schema: route errors in OpenAI's shape beside the door's problems ------------------------------------

ROUTE_STATUSES = ("400", "404", "408", "429", "500", "503", "504")


def error_schema() -> Schema:
    detail = Schema(type=OpenAPIType.OBJECT, required=["message", "type", "param", "code"], properties={
        "message": Schema(type=OpenAPIType.STRING, description="what is wrong and how to fix it"),
        "type": Schema(type=OpenAPIType.STRING, description="invalid_request_error | rate_limit_error | "
                       "server_error | timeout_error"),
        "param": Schema(one_of=[Schema(type=OpenAPIType.STRING), Schema(type=OpenAPIType.NULL)],
                        description="the body field at fault, when one is"),
        "code": Schema(one_of=[Schema(type=OpenAPIType.STRING), Schema(type=OpenAPIType.NULL)],
                       description="a stable, machine-readable code")})
    return Schema(type=OpenAPIType.OBJECT, title=OPENAI_ERROR, required=["error"], properties={"error": detail},
                  description="An error of the OpenAI-compatible routes, in OpenAI's shape.")


def document_openai_errors(openapi: OpenAPI) -> OpenAPI:
    """The ``/v1`` routes answer their own errors in OpenAI's shape (``application/json``); the door's refusals
    before them stay problem documents. Runs after ``document_problems``, which wrote only the problems."""
    components = openapi.components
    if components is None:
        return openapi
    components.schemas = {**(components.schemas or {}), OPENAI_ERROR: error_schema()}
    shape = OpenAPIMediaType(schema=Reference(ref=f"#/components/schemas/{OPENAI_ERROR}"))
    for path, item in (openapi.paths or {}).items():
        if not path.startswith("/v1/"):
            continue
        for method in ("get", "post"):
            operation = getattr(item, method, None)
            if not isinstance(operation, Operation):
                continue
            for status, answer in (operation.responses or {}).items():
                if status in ROUTE_STATUSES and isinstance(answer, OpenAPIResponse):
                    answer.content = {"application/json": shape, **(answer.content or {})}
    return openapi
