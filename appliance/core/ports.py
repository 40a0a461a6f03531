"""The ports of the appliance's models: the chat model and the embedder the memory and search code call.

The interfaces and their errors live here, next to the pure core, so that the layers that use a model
(``memory``, ``search``, the surfaces) depend on these definitions only, never on the adapter package
``appliance.inference`` that implements them with llama.cpp, an OpenAI-compatible endpoint or ONNX. Only the
composition root (``appliance.app``) picks the implementations.

``ChatModel`` is what consolidation, edge discovery, query reformulation and Dream State call. Every
structured call names a JSON schema and returns a dict valid under it, or raises a ``ModelError``.
``NoModel`` stands in when there is no model at all: every call says why (``ModelUnavailable``).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol

from appliance.errors import KumihoError

if TYPE_CHECKING:  # only the embedder's signature names numpy: the core imports nothing but the standard library
    import numpy as np
    import numpy.typing as npt

Message = Mapping[str, str]  # {"role": "system" | "user" | "assistant", "content": "…"}
Progress = Callable[[int, int], None]  # (tokens generated so far, max_tokens)


class ModelError(KumihoError):
    """A model call did not produce a usable answer."""

    code = "model_error"


class ModelUnavailable(ModelError):
    """No model is configured, installed or loadable; the message says which and what to do."""

    code = "model_unavailable"


class ModelBusy(ModelError):
    """The one model slot stayed taken longer than the caller may wait."""

    code = "model_busy"


class ModelTimeout(ModelError):
    """The call's deadline passed (waiting, reading the prompt or generating); generation was stopped."""

    code = "model_timeout"


class ModelCancelled(ModelError):
    """The caller's cancel event was set; generation was stopped."""

    code = "model_cancelled"


class ModelOutputError(ModelError):
    """The model's answer is not valid under the schema (for example it ran out of tokens)."""

    code = "model_output_invalid"


class ModelInputTooLong(ModelError):
    """Prompt and answer do not fit the context window."""

    code = "model_input_too_long"


State = Literal["unavailable", "unloaded", "loading", "loaded"]


@dataclass(frozen=True)
class ModelStatus:
    available: bool  # a call may succeed (loaded, or loadable on first use)
    state: State
    model_id: str | None = None
    path: str | None = None
    reason: str | None = None  # why not available, in words an operator can act on
    load_seconds: float | None = None  # how long the last load took
    calls: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


class ChatModel(Protocol):
    model_id: str

    def complete_json(self, messages: Sequence[Message], schema: Mapping[str, Any], *, max_tokens: int = 512,
                      timeout: float | None = None, cancel: threading.Event | None = None,
                      temperature: float = 0.0, progress: Progress | None = None) -> dict[str, Any]:
        """An object valid under ``schema`` (a JSON schema with bounded strings and arrays)."""
        ...

    def complete_text(self, messages: Sequence[Message], *, max_tokens: int = 512, timeout: float | None = None,
                      cancel: threading.Event | None = None, temperature: float = 0.0,
                      progress: Progress | None = None) -> str:
        ...

    def status(self) -> ModelStatus: ...


class NoModel:
    """The appliance has no chat model; every call raises ``ModelUnavailable`` with the reason."""

    model_id = "none"

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def complete_json(self, messages: Sequence[Message], schema: Mapping[str, Any], *, max_tokens: int = 512,
                      timeout: float | None = None, cancel: threading.Event | None = None,
                      temperature: float = 0.0, progress: Progress | None = None) -> dict[str, Any]:
        raise ModelUnavailable(f"no local model: {self.reason}")

    def complete_text(self, messages: Sequence[Message], *, max_tokens: int = 512, timeout: float | None = None,
                      cancel: threading.Event | None = None, temperature: float = 0.0,
                      progress: Progress | None = None) -> str:
        raise ModelUnavailable(f"no local model: {self.reason}")

    def status(self) -> ModelStatus:
        return ModelStatus(False, "unavailable", reason=self.reason)


def model_status(model: ChatModel | None) -> ModelStatus:
    """What the appliance can say about its chat model, including when there is none at all."""
    if model is None:
        return ModelStatus(False, "unavailable", reason="no chat model is configured")
    return model.status()


def answer_budget(schema: Mapping[str, Any]) -> int:
    """Tokens enough for the longest answer the schema allows (a token is at least one character).

    Under the grammar a bounded schema cannot run on: strings stop at ``maxLength``, arrays at
    ``maxItems``. So this budget never cuts a valid answer short; the call's deadline bounds its time, and
    the model caps it at the room left in its context.
    """
    return int(_chars(schema) * 1.1) + 16


def _chars(schema: Any) -> int:
    if not isinstance(schema, Mapping):
        return 16
    if "enum" in schema:
        return max(len(json.dumps(v)) for v in schema["enum"])
    kind = schema.get("type")
    if kind == "string":
        return int(schema.get("maxLength", 256)) + 2
    if kind == "integer":
        return max(len(str(schema.get("maximum", 10**9))), len(str(schema.get("minimum", 0)))) + 1
    if kind == "number":
        return 24
    if kind == "boolean":
        return 5
    if kind == "array":
        return int(schema.get("maxItems", 16)) * (_chars(schema.get("items", {})) + 2) + 2
    if kind == "object":
        return sum(len(key) + 4 + _chars(value) for key, value in schema.get("properties", {}).items()) + 2
    return 16


class Embedder(Protocol):
    """A sentence encoder: one L2-normalised float32 row of ``dim`` values per text, so that a dot product is
    the cosine similarity. ``model_id`` names the model: an index built with another one is rebuilt."""

    model_id: str
    dim: int

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...
