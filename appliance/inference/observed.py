"""The chat model and the embedder, counted and timed for the metrics (``appliance.server.metrics``).

The wrappers change nothing else: they pass every call through and every other attribute too (``close``,
``n_ctx``…). The chat model is wrapped inside the response cache, so an answer from the cache is not a model call;
``local_model`` (the OpenAI-compatible API) unwraps it to reach the llama.cpp model itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
from prometheus_client import Counter, Histogram

from appliance.core.ports import ChatModel, Embedder, Message, ModelStatus, NoModel, Progress

# a chat completion takes seconds to minutes on a CPU; an embedding milliseconds to a second
CHAT_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
EMBED_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
ModelKind = Literal["chat", "embedding"]


class ModelMetrics:
    """Model calls by kind and outcome, their latency, and the texts embedded. Not registered anywhere: each app
    registers them in its own registry (``Metrics``), so that several appliances in one process do not collide."""

    def __init__(self) -> None:
        self.calls = Counter("kumiho_model_calls", "Calls to the chat model and the embedder, by outcome "
                             "(ok, or error: failed, timed out, cancelled or refused)", ["kind", "outcome"],
                             registry=None)
        self.seconds = {
            "chat": Histogram("kumiho_model_chat_duration_seconds", "How long chat model calls took (answers "
                              "from the response cache are not calls)", buckets=CHAT_BUCKETS, registry=None),
            "embedding": Histogram("kumiho_model_embedding_duration_seconds", "How long embedder calls took",
                                   buckets=EMBED_BUCKETS, registry=None)}
        self.embedded = Counter("kumiho_model_embedded_texts", "Texts the embedder embedded", registry=None)
        for kind in ("chat", "embedding"):  # every series from the start: a rate() needs the zero
            for outcome in ("ok", "error"):
                self.calls.labels(kind, outcome)

    def collectors(self) -> list[Any]:
        return [self.calls, *self.seconds.values(), self.embedded]

    @contextmanager
    def timed(self, kind: ModelKind) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        except BaseException:
            self.calls.labels(kind, "error").inc()
            raise
        finally:
            self.seconds[kind].observe(time.perf_counter() - started)
        self.calls.labels(kind, "ok").inc()


class ObservedModel:
    """A ``ChatModel`` whose calls ``ModelMetrics`` counts and times."""

    def __init__(self, model: ChatModel, metrics: ModelMetrics) -> None:
        self.model = model
        self.model_id = model.model_id
        self._metrics = metrics

    def complete_json(self, messages: Sequence[Message], schema: Mapping[str, Any], *, max_tokens: int = 512,
                      timeout: float | None = None, cancel: threading.Event | None = None,
                      temperature: float = 0.0, progress: Progress | None = None) -> dict[str, Any]:
        with self._metrics.timed("chat"):
            return self.model.complete_json(messages, schema, max_tokens=max_tokens, timeout=timeout, cancel=cancel,
                                            temperature=temperature, progress=progress)

    def complete_text(self, messages: Sequence[Message], *, max_tokens: int = 512, timeout: float | None = None,
                      cancel: threading.Event | None = None, temperature: float = 0.0,
                      progress: Progress | None = None) -> str:
        with self._metrics.timed("chat"):
            return self.model.complete_text(messages, max_tokens=max_tokens, timeout=timeout, cancel=cancel,
                                            temperature=temperature, progress=progress)

    def status(self) -> ModelStatus:
        return self.model.status()

    def __getattr__(self, name: str) -> Any:  # close(), and what a caller asks of the model itself
        if name == "model":  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.model, name)


class ObservedEmbedder:
    """An ``Embedder`` whose calls ``ModelMetrics`` counts and times."""

    def __init__(self, embedder: Embedder, metrics: ModelMetrics) -> None:
        self.embedder = embedder
        self.model_id, self.dim = embedder.model_id, embedder.dim
        self._metrics = metrics

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        with self._metrics.timed("embedding"):
            rows = self.embedder.embed(texts)
        self._metrics.embedded.inc(len(texts))
        return rows

    def __getattr__(self, name: str) -> Any:
        if name == "embedder":
            raise AttributeError(name)
        return getattr(self.embedder, name)


def observed_model(model: ChatModel, metrics: ModelMetrics) -> ChatModel:
    """``model`` counted and timed; a ``NoModel`` as it is (it is never called: every call raises at once, and
    the appliance recognises it by its type)."""
    return model if isinstance(model, NoModel) else ObservedModel(model, metrics)
