"""``LlamaModel``: a local GGUF chat model on llama.cpp (llama-cpp-python) behind the ``ChatModel`` interface.

* **Lazy**: nothing is read until the first call, so the appliance starts and answers at once; the file's
  sha256 is checked once per process, at that first load.
* **Capacity one**: one call runs at a time (llama.cpp already uses every core). Others wait their turn
  for at most ``queue_timeout`` seconds (``ModelBusy`` after that, or at once when ``max_waiting`` callers
  already wait).
* **Deadlines and cancellation**: a call's ``timeout`` covers waiting, reading the prompt and generating.
  Generation is a stream that is closed when the deadline passes or the cancel event is set; reading a long
  prompt is cut short by llama.cpp's abort callback. ``ModelTimeout`` / ``ModelCancelled`` follow.
* **Structured output**: every ``complete_json`` runs under a grammar made from the JSON schema
  (``grammar.py``), checked lazily on each sampled token (``sampling.py``), and the answer is validated
  against the schema before it is returned. Small models need bounded schemas (``maxLength``,
  ``maxItems``): unbounded ones can loop to the token limit.
* **Idle unload** (optional): after ``idle_unload_seconds`` without calls the model is freed; the next call
  loads it again.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from appliance.core.ports import (
    Message,
    ModelBusy,
    ModelCancelled,
    ModelError,
    ModelInputTooLong,
    ModelStatus,
    ModelTimeout,
    ModelUnavailable,
    Progress,
    State,
)
from appliance.errors import KumihoError
from appliance.inference import sampling
from appliance.inference.chat import check_schema, parse_json_answer
from appliance.inference.grammar import schema_grammar
from appliance.inference.models import verified

log = logging.getLogger(__name__)

# The schema of the `json_smoke` prompt: small and bounded (the real-model test and the benchmark use it).
SMOKE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "minLength": 1, "maxLength": 80},
        "topics": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 40},
                   "minItems": 1, "maxItems": 3},
    },
    "required": ["title", "topics"],
    "additionalProperties": False,
}


@dataclass(frozen=True)
class Completion:
    """One generation as an OpenAI-compatible answer reports it: the text (not parsed), why it ended (``stop``:
    the model ended it; ``length``: ``max_tokens`` or the room left in the context) and the token counts."""

    text: str
    finish: str
    prompt_tokens: int
    completion_tokens: int
    cached_prompt_tokens: int = 0  # of ``prompt_tokens``, those the KV cache already held (not read again)
    decoding_steps: int = 0  # model passes after the prompt (a pass checks a drafted run of tokens at once)
    seconds: float = 0.0  # the call's time with the model (not the wait for it)


class _Stopped(Exception):
    def __init__(self, why: str) -> None:
        self.why = why


class LlamaModel:
    def __init__(self, path: Path, *, model_id: str | None = None, sha256: str | None = None,
                 size: int | None = None, context_tokens: int = 4096, threads: int = 0, batch_threads: int = 0,
                 idle_unload_seconds: float = 0.0, queue_timeout: float = 30.0, max_waiting: int = 16,
                 request_timeout: float = 120.0, seed: int = 0, draft_tokens: int = sampling.DRAFT_TOKENS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.path = Path(path)
        self.model_id = model_id or self.path.name
        self._sha256, self._size = sha256, size
        self.context_tokens = context_tokens
        self._seed = seed
        self.draft_tokens = draft_tokens  # 0: one token per model pass (benchmarks compare)
        self.threads = threads
        self.batch_threads = batch_threads
        self.idle_unload_seconds = idle_unload_seconds
        self.queue_timeout = queue_timeout
        self.max_waiting = max_waiting
        self.request_timeout = request_timeout
        self._clock = clock
        self._slot = threading.Lock()  # the capacity limit of one
        self._meta = threading.Lock()  # guards the counters and the idle timer
        self._waiting = 0
        self._llm: Any = None
        self._abort_fn: Any = None  # the ctypes callback must outlive the context that calls it
        self._formatter: Any = None
        self._stop_reason: str | None = None
        self._state: State = "unloaded"
        self._verified = False
        self._load_seconds: float | None = None
        self._load_error: str | None = None
        self._calls = 0
        self._last_used = clock()
        self._idle_timer: threading.Timer | None = None
        self._grammars: OrderedDict[str, str] = OrderedDict()
        self._last = threading.local()  # per calling thread: concurrent calls never see each other's costs

    @property
    def last_completion(self) -> Completion | None:
        """The costs of the last call made from this thread (benchmarks report them: a caller such as
        consolidation gets only the parsed answer)."""
        completion: Completion | None = getattr(self._last, "completion", None)
        return completion

    # -- the ChatModel interface -------------------------------------------------------------------------

    def complete_json(self, messages: Sequence[Message], schema: Mapping[str, Any], *, max_tokens: int = 512,
                      timeout: float | None = None, cancel: threading.Event | None = None,
                      temperature: float = 0.0, progress: Progress | None = None) -> dict[str, Any]:
        check_schema(schema)
        done = self._run(messages, max_tokens, timeout, cancel, temperature, progress, schema)
        return parse_json_answer(done.text, done.finish, schema, self.model_id, max_tokens)

    def complete_text(self, messages: Sequence[Message], *, max_tokens: int = 512, timeout: float | None = None,
                      cancel: threading.Event | None = None, temperature: float = 0.0,
                      progress: Progress | None = None) -> str:
        return self._run(messages, max_tokens, timeout, cancel, temperature, progress, None).text

    def complete(self, messages: Sequence[Message], *, schema: Mapping[str, Any] | None = None,
                 max_tokens: int = 512, timeout: float | None = None, cancel: threading.Event | None = None,
                 temperature: float = 0.0, top_p: float = sampling.TOP_P, seed: int | None = None) -> Completion:
        """One call with what the OpenAI-compatible endpoint reports: the raw text (under the grammar of
        ``schema`` when one is given, but neither parsed nor validated: the caller decides what an answer cut
        off by the token limit is), why it ended and the token counts. ``seed`` None: the model's own."""
        if schema is not None:
            check_schema(schema)
        return self._run(messages, max_tokens, timeout, cancel, temperature, None, schema, top_p=top_p,
                         seed=self._seed if seed is None else seed)

    def status(self) -> ModelStatus:
        """Available unless the last load failed (the next call tries again: the file may have been fixed)."""
        return ModelStatus(self._load_error is None, self._state, model_id=self.model_id, path=str(self.path),
                           reason=self._load_error, load_seconds=self._load_seconds, calls=self._calls)

    # -- loading and unloading ---------------------------------------------------------------------------

    def load(self, timeout: float | None = None) -> None:
        """Load now instead of on the first call (a warm-up)."""
        deadline = self._clock() + (timeout if timeout is not None else self.request_timeout)
        self._acquire(deadline, None)
        try:
            self._ensure_loaded()
        finally:
            self._release()

    def unload(self) -> bool:
        """Free the model now if no call is running; True when it was loaded and is now freed."""
        if not self._slot.acquire(blocking=False):
            return False
        try:
            return self._free()
        finally:
            self._slot.release()

    def unload_if_idle(self) -> bool:
        """Free the model when it has not been used for ``idle_unload_seconds`` (the idle timer calls this)."""
        if not self.idle_unload_seconds or self._clock() - self._last_used < self.idle_unload_seconds:
            return False
        return self.unload()

    def close(self) -> None:
        with self._meta:
            if self._idle_timer is not None:
                self._idle_timer.cancel()
                self._idle_timer = None
        with self._slot:
            self._free()

    def _ensure_loaded(self) -> Any:
        if self._llm is not None:
            return self._llm
        try:
            from llama_cpp import Llama, llama_cpp
        except ImportError as exc:
            raise ModelUnavailable(f"llama-cpp-python is not installed ({exc}); run `make install`") from None
        _close_devnull_at_exit()
        self._state = "loading"
        try:
            if not self._verified:
                verified(self.path, self._sha256, self._size)
                self._verified = True
            started = time.perf_counter()
            llm = Llama(model_path=str(self.path), n_ctx=self.context_tokens, seed=self._seed,
                        n_threads=self.threads or default_threads(),
                        n_threads_batch=self.batch_threads or os.cpu_count() or 1, verbose=False)
        except KumihoError as exc:
            raise self._load_failed(exc.message) from None
        except (ValueError, RuntimeError, OSError) as exc:
            raise self._load_failed(f"llama.cpp cannot load {self.path}: {exc}") from None
        try:
            self._formatter = _chat_formatter(llm, self.model_id)
        except ModelUnavailable as exc:
            llm.close()
            raise self._load_failed(exc.message) from None
        self._abort_fn = llama_cpp.ggml_abort_callback(lambda _data: self._stop_reason is not None)
        llama_cpp.llama_set_abort_callback(llm._ctx.ctx, self._abort_fn, None)
        self._llm, self._state, self._load_error = llm, "loaded", None
        self._load_seconds = round(time.perf_counter() - started, 3)
        log.info("loaded %s in %.2f s", self.model_id, self._load_seconds)
        return llm

    def _load_failed(self, reason: str) -> ModelUnavailable:
        self._state, self._load_error = "unloaded", reason
        log.warning("cannot load %s: %s", self.model_id, reason)
        return ModelUnavailable(reason)

    def _free(self) -> bool:
        if self._llm is None:
            return False
        self._llm.close()
        self._llm = None
        self._state = "unloaded"
        log.info("unloaded %s", self.model_id)
        return True

    # -- one call ----------------------------------------------------------------------------------------

    def _run(self, messages: Sequence[Message], max_tokens: int, timeout: float | None,
             cancel: threading.Event | None, temperature: float, progress: Progress | None,
             schema: Mapping[str, Any] | None, *, top_p: float = sampling.TOP_P, seed: int | None = None
             ) -> Completion:
        if max_tokens < 1:
            raise ModelError("max_tokens must be at least 1")
        deadline = self._clock() + (timeout if timeout is not None else self.request_timeout)
        self._acquire(deadline, cancel)
        try:
            llm = self._ensure_loaded()
            grammar = self._grammar(schema) if schema is not None else None
            self._calls += 1
            return self._generate(llm, messages, max_tokens, deadline, cancel, temperature, progress, grammar,
                                  top_p, self._seed if seed is None else seed)
        finally:
            self._last_used = self._clock()
            self._release()

    def _generate(self, llm: Any, messages: Sequence[Message], max_tokens: int, deadline: float,
                  cancel: threading.Event | None, temperature: float, progress: Progress | None,
                  grammar: str | None, top_p: float, seed: int) -> Completion:
        def check() -> None:
            if cancel is not None and cancel.is_set():
                raise _Stopped("cancelled")
            if self._clock() >= deadline:
                raise _Stopped("timeout")

        def watch() -> None:  # beside the call: sets the flag that llama.cpp's abort callback reads
            while not done.wait(0.05):
                try:
                    check()
                except _Stopped as stop:
                    self._stop_reason = stop.why
                    return

        def after_token(n: int) -> bool:
            if progress is not None:
                progress(n, max_tokens)
            try:
                check()
            except _Stopped as stop:
                self._stop_reason = stop.why
                return True
            return False

        check()
        started = time.perf_counter()
        formatted = self._formatter(messages=[dict(m) for m in messages])
        prompt = llm.tokenize(formatted.prompt.encode("utf-8"), add_bos=not formatted.added_special, special=True)
        room = llm.n_ctx() - len(prompt)
        if room < 1:
            raise ModelInputTooLong(f"{self.model_id}: the prompt has {len(prompt)} tokens and the context "
                                    f"{llm.n_ctx()}; shorten the input (or raise inference.context_tokens)")
        done = threading.Event()
        self._stop_reason = None
        watcher = threading.Thread(target=watch, name="llm-deadline", daemon=True)
        watcher.start()
        try:
            generated = sampling.generate(llm, prompt, max_tokens=min(max_tokens, room), temperature=temperature,
                                          seed=seed, grammar=grammar, after_token=after_token, top_p=top_p,
                                          draft_tokens=self.draft_tokens)
        except RuntimeError as exc:  # llama_decode returned 2: the abort callback stopped it
            if self._stop_reason is None:
                raise ModelError(f"{self.model_id} failed: {exc}") from None
            llm.reset()  # an aborted batch may have left its tokens in the cache
        finally:
            done.set()
            watcher.join()
        if self._stop_reason == "cancelled":
            raise ModelCancelled(f"the {self.model_id} call was cancelled")
        if self._stop_reason == "timeout":
            raise ModelTimeout(f"the {self.model_id} call passed its deadline and was stopped; allow a longer "
                               "timeout, fewer tokens or a shorter prompt")
        text = llm.detokenize(generated.tokens, prev_tokens=prompt).decode("utf-8", errors="ignore")
        seconds = round(time.perf_counter() - started, 3)
        completion = Completion(text, generated.finish, len(prompt), len(generated.tokens),
                                generated.cached_prompt_tokens, generated.steps, seconds)
        self._last.completion = completion
        return completion

    def _grammar(self, schema: Mapping[str, Any]) -> str:
        """The GBNF grammar of ``schema`` (cached: converting a schema is not free)."""
        key = json.dumps(schema, sort_keys=True)
        grammar = self._grammars.get(key)
        if grammar is None:
            grammar = self._grammars[key] = schema_grammar(schema)
            while len(self._grammars) > 64:
                self._grammars.popitem(last=False)
        self._grammars.move_to_end(key)
        return grammar

    # -- the capacity slot -------------------------------------------------------------------------------

    def _acquire(self, deadline: float, cancel: threading.Event | None) -> None:
        with self._meta:
            if self._slot.locked() and self._waiting >= self.max_waiting:
                raise ModelBusy(f"{self.model_id} is busy and {self._waiting} calls already wait for it; "
                                "try again later")
            self._waiting += 1
        try:
            give_up = min(deadline, self._clock() + self.queue_timeout)
            while True:
                if cancel is not None and cancel.is_set():
                    raise ModelCancelled(f"the {self.model_id} call was cancelled while it waited")
                left = give_up - self._clock()
                if self._slot.acquire(timeout=max(0.0, min(left, 0.05))):
                    return
                if self._clock() >= give_up:
                    if give_up >= deadline:
                        raise ModelTimeout(f"the {self.model_id} call passed its deadline while it waited for "
                                           "the model (another call was running)")
                    raise ModelBusy(f"{self.model_id} stayed busy for {self.queue_timeout:g} s (one call runs at "
                                    "a time); try again later")
        finally:
            with self._meta:
                self._waiting -= 1

    def _release(self) -> None:
        self._slot.release()
        if self.idle_unload_seconds:
            with self._meta:
                if self._idle_timer is not None:
                    self._idle_timer.cancel()
                self._idle_timer = threading.Timer(self.idle_unload_seconds, self.unload_if_idle)
                self._idle_timer.daemon = True
                self._idle_timer.start()


def _chat_formatter(llm: Any, model_id: str) -> Any:
    """The GGUF's own chat template (Jinja), as llama-cpp-python applies it in create_chat_completion."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    template = llm.metadata.get("tokenizer.chat_template")
    if not template:
        raise ModelUnavailable(f"{model_id} has no chat template (tokenizer.chat_template); use a chat GGUF")
    eos, bos = llm.token_eos(), llm.token_bos()
    return Jinja2ChatFormatter(template=template, eos_token=llm._model.token_get_text(eos) if eos != -1 else "",
                               bos_token=llm._model.token_get_text(bos) if bos != -1 else "", stop_token_ids=[eos])


def default_threads() -> int:
    """Generation threads: every core but one, at least one. ggml's threads spin at every barrier, so when
    another process or thread takes a core (the index worker embedding, an agent), a call that uses every
    core stalls: on 2 cores under load, generation fell from ~9 to ~1 token/s with 2 threads, while 1
    thread kept 6-13. Reading the prompt (large batches, few barriers) uses every core: a 1,234-token
    transcript took 29.8 s with 1 thread and 14.5 s with 2 here."""
    return max(1, (os.cpu_count() or 2) - 1)


@cache
def _close_devnull_at_exit() -> None:
    """llama-cpp-python opens two /dev/null files at import (to silence loading) and never closes them."""
    from llama_cpp import _utils

    atexit.register(_utils.outnull_file.close)
    atexit.register(_utils.errnull_file.close)
