"""The JSON shapes of the OpenAI-compatible endpoint (``/v1``): the request bodies with every bound, and the
answers as OpenAI's clients read them (``openai`` for Python decodes these).

A body field the appliance does not take is refused by name (``extra="forbid"``) rather than ignored, so a
client never believes a setting applied that did not (tools, logprobs, penalties, ``n`` above 1)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_MESSAGES = 256
MAX_MESSAGE_CHARS = 262_144  # one message's text (4 MiB is the default body bound: http.max_body_bytes)
MAX_TOTAL_CHARS = 1_048_576  # all messages' text together; the context window is checked after tokenising
MAX_PARTS = 64  # text parts of one message's content
MAX_MODEL_NAME = 256
MAX_TOKENS = 131_072  # the largest context inference.context_tokens allows; the room left in it caps an answer
MAX_STOP = 4
MAX_STOP_CHARS = 256
MAX_SCHEMA_BYTES = 65_536  # the JSON schema of response_format, serialised
MAX_SCHEMA_DEPTH = 32  # nesting of objects and arrays in that schema document
MAX_SCHEMA_NAME = 64
MAX_EMBEDDING_INPUTS = 256
MAX_EMBEDDING_CHARS = 32_768
SEED_RANGE = 2**63


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TextPart(_Body):
    type: Literal["text"]
    text: str = Field(max_length=MAX_MESSAGE_CHARS)


class ChatMessage(BaseModel):
    """One message. ``developer`` is taken as ``system``; tool messages and images are not taken."""

    model_config = ConfigDict(extra="forbid")

    role: Literal["system", "developer", "user", "assistant"]
    content: Annotated[str, Field(max_length=MAX_MESSAGE_CHARS)] | Annotated[
        list[TextPart], Field(min_length=1, max_length=MAX_PARTS)] = Field(
        description=f"the text (at most {MAX_MESSAGE_CHARS} characters), or up to {MAX_PARTS} text parts")
    name: str | None = Field(None, max_length=64, description="accepted and not used")


class JsonSchemaFormat(_Body):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    name: str = Field(min_length=1, max_length=MAX_SCHEMA_NAME, pattern=r"^[A-Za-z0-9_-]+$")
    description: str | None = Field(None, max_length=4096)
    json_schema: dict[str, Any] = Field(
        alias="schema",
        description=f"a JSON schema of type object (at most {MAX_SCHEMA_BYTES} bytes as JSON, {MAX_SCHEMA_DEPTH} "
                    "levels deep; $ref only within the schema); the answer is generated under a grammar made "
                    "from it. Bound strings and arrays (maxLength, maxItems): a small model may otherwise run "
                    "to the token limit")
    strict: bool | None = Field(None, description="true: an answer the grammar let through that still breaks the "
                                                  "schema (a numeric bound, uniqueItems) is an error instead")


class ResponseFormat(_Body):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = Field(None, description="type = json_schema: the schema")


class ChatCompletionRequest(_Body):
    model: str = Field(min_length=1, max_length=MAX_MODEL_NAME,
                       description="any name: every name is answered by the appliance's chat model")
    messages: list[ChatMessage] = Field(min_length=1, max_length=MAX_MESSAGES)
    max_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS, description="answer tokens at most; the room left "
                                   "in the model's context (inference.context_tokens) caps it")
    max_completion_tokens: int | None = Field(None, ge=1, le=MAX_TOKENS, description="the same as max_tokens")
    temperature: float | None = Field(None, ge=0.0, le=2.0, description="absent: 0 (greedy, repeatable)")
    top_p: float | None = Field(None, ge=0.0, le=1.0, description="absent: 0.95 (applies when temperature > 0)")
    seed: int | None = Field(None, ge=-SEED_RANGE, lt=SEED_RANGE, description="sampling seed (when temperature > "
                             "0); absent: the appliance's fixed seed")
    stop: Annotated[str, Field(min_length=1, max_length=MAX_STOP_CHARS)] | Annotated[list[
        Annotated[str, Field(min_length=1, max_length=MAX_STOP_CHARS)]], Field(max_length=MAX_STOP)] | None = Field(
        None, description=f"up to {MAX_STOP} strings of 1..{MAX_STOP_CHARS} characters; the text answer ends before "
                          "the first (text answers only)")
    response_format: ResponseFormat | None = None
    stream: bool | None = Field(None, description="false or absent; streaming is not offered")
    n: int | None = Field(None, ge=1, le=1, description="1 or absent: one choice per request")
    user: str | None = Field(None, max_length=256, description="accepted and not used")
    reasoning_effort: str | None = Field(None, max_length=32, description="accepted and not used")


class EmbeddingRequest(_Body):
    model: str = Field(min_length=1, max_length=MAX_MODEL_NAME,
                       description="any name: every name is answered by the appliance's embedding model")
    input: Annotated[str, Field(min_length=1, max_length=MAX_EMBEDDING_CHARS)] | list[
        Annotated[str, Field(min_length=1, max_length=MAX_EMBEDDING_CHARS)]] = Field(
        description=f"a text or up to {MAX_EMBEDDING_INPUTS} texts, each 1..{MAX_EMBEDDING_CHARS} characters "
                    "(the model reads the first 256 tokens of each)")
    encoding_format: Literal["float", "base64"] = Field("float", description="base64: little-endian float32")
    dimensions: int | None = Field(None, ge=1, le=65_536, description="only the model's own dimension")
    user: str | None = Field(None, max_length=256, description="accepted and not used")


# -- answers -------------------------------------------------------------------------------------------------


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = Field(description="kumiho-ce: a model on this machine")


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class AnswerMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str
    refusal: None = None


class Choice(BaseModel):
    index: int
    message: AnswerMessage
    finish_reason: Literal["stop", "length"] = Field(description="length: cut off by max_tokens or the context")
    logprobs: None = None


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str = Field(description="the model that answered (the appliance's chat model)")
    choices: list[Choice]
    usage: Usage
    system_fingerprint: str | None = None


class Embedding(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str = Field(description="the vector, or base64 of its little-endian float32 values")


class EmbeddingUsage(BaseModel):
    prompt_tokens: int
    total_tokens: int


class EmbeddingList(BaseModel):
    object: Literal["list"] = "list"
    data: list[Embedding]
    model: str
    usage: EmbeddingUsage


class ErrorDetail(BaseModel):
    message: str = Field(description="what is wrong and how to fix it")
    type: str = Field(description="invalid_request_error | rate_limit_error | server_error | timeout_error | "
                                  "not_found_error")
    param: str | None = Field(description="the body field at fault, when one is")
    code: str | None = Field(description="a stable, machine-readable code")


class ErrorAnswer(BaseModel):
    """An error, in OpenAI's shape."""

    error: ErrorDetail
