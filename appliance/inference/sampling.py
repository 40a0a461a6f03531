"""The token loop of one model call, on llama.cpp's sampler API, with the grammar checked lazily.

llama-cpp-python puts the grammar at the head of its sampler chain, so every token runs the grammar over
the whole vocabulary: 60-90 ms a token for Qwen's 151,936 tokens on this machine, several times the cost
of the model itself. llama.cpp's own sampler (``common_sampler_sample``) instead samples first and asks
the grammar only about the chosen token; only when the grammar refuses it is the vocabulary filtered and
the token drawn again. This module does the same (1-2 ms a token). The loop also gives the caller a hook
after each token (progress, deadline, cancellation).

Greedy calls (temperature 0: every appliance call) decode drafted tokens several at a time (prompt-lookup
decoding): the tokens that followed the last few generated tokens where they occur in the prompt are fed
with the next token in one model pass, and kept as far as they are what the model would have chosen
itself. The answer is the token-by-token answer except where a near tie between two tokens flips: llama.cpp
does not promise bit-identical logits for a token decoded alone and one decoded in a batch (other matmul
paths, another summation order). On the 40-message sample session the two answers were identical. A summary
copies names, numbers and phrases from its transcript, so about three tokens come out of each pass instead of
one (that session: 251 tokens in 85 passes instead of 251). A pass over a few tokens reads the weights once, so on free
cores it costs less than that many passes; on a CPU-starved machine (measured at a load average of ~20 on
2 cores) it costs about as much, and the call took the same time as token by token.

It works on a loaded ``llama_cpp.Llama`` and keeps its bookkeeping (``eval`` records the tokens), so the
next call reuses the longest common prompt prefix in the KV cache, as ``Llama.generate`` does.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from appliance.core.ports import ModelOutputError

TOP_K, TOP_P, MIN_P = 40, 0.95, 0.05  # llama-cpp-python's defaults for temperature > 0
# Greedy calls draft up to DRAFT_TOKENS tokens from the context (prompt lookup), matching the last
# NGRAM_MAX..NGRAM_MIN tokens; a draft is kept as far as it agrees with the model's own choices.
DRAFT_TOKENS, NGRAM_MAX, NGRAM_MIN = 8, 3, 2


@dataclass(frozen=True)
class Generated:
    """The new tokens (without the end token) and why generation ended: ``stop`` (an end-of-generation
    token), ``length`` (``max_tokens``) or ``halted`` (``after_token`` returned True after the n-th token);
    with what it cost: prompt tokens taken from the KV cache, and decoding steps after the prompt."""

    tokens: list[int]
    finish: str
    cached_prompt_tokens: int
    steps: int


def generate(llm: Any, prompt: Sequence[int], *, max_tokens: int, temperature: float, seed: int,
             grammar: str | None, after_token: Callable[[int], bool], top_p: float = TOP_P,
             draft_tokens: int = DRAFT_TOKENS) -> Generated:
    """Generate after ``prompt``. Greedy calls (``temperature`` 0) check up to ``draft_tokens`` drafted
    tokens per decoding step; the answer is the one without drafts but for near ties (the module says why)."""
    from llama_cpp import llama_cpp
    from llama_cpp._internals import LlamaTokenDataArray

    cached = _feed_prompt(llm, prompt)
    ctx, vocab, n_vocab = llm._ctx.ctx, llm._model.vocab, llm.n_vocab()
    chain = _chain(temperature, seed, top_p)
    rules = llama_cpp.llama_sampler_init_grammar(vocab, grammar.encode(), b"root") if grammar else None
    if grammar and not rules:
        llama_cpp.llama_sampler_free(chain)
        raise ModelOutputError("llama.cpp refused the grammar made from the schema")
    candidates = LlamaTokenDataArray(n_vocab=n_vocab)
    one = (llama_cpp.llama_token_data * 1)()
    single = llama_cpp.llama_token_data_array(data=ctypes.cast(one, llama_cpp.llama_token_data_p), size=1,
                                              selected=-1, sorted=False)

    def allowed(token: int) -> bool:
        # ctypes converts Python numbers on assignment; llama-cpp-python annotates the fields with ctypes types
        one[0].id, one[0].logit, one[0].p = token, 0.0, 0.0  # type: ignore[assignment]
        single.size, single.selected, single.sorted = 1, -1, False
        llama_cpp.llama_sampler_apply(rules, ctypes.byref(single))
        return not math.isinf(one[0].logit)

    def draw(logits: np.ndarray, constrained: bool) -> int:
        candidates.copy_logits(logits)
        if constrained:
            llama_cpp.llama_sampler_apply(rules, ctypes.byref(candidates.candidates))
        llama_cpp.llama_sampler_apply(chain, ctypes.byref(candidates.candidates))
        return int(candidates.candidates_data.id[candidates.candidates.selected])

    def choose(logits: np.ndarray) -> int:
        token = draw(logits, False)
        if rules is not None and not allowed(token):
            token = draw(logits, True)
            if not allowed(token):  # nothing fits: accepting it would abort the process in llama.cpp
                raise ModelOutputError("the grammar reached a dead end (no token fits); simplify the schema")
        return token

    if temperature > 0:
        draft_tokens = 0  # a sampled token is not the model's one choice: a draft could not be checked
    steps = 0
    drafts = Drafts(prompt if draft_tokens else ())  # looked up in the prompt, then in what is generated
    tokens: list[int] = []
    fed: list[int] = []  # the tokens fed last, each row of ``rows`` the logits after one of them
    rows = [np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1), shape=(n_vocab,))]
    try:
        while True:
            for i, logits in enumerate(rows):
                token = choose(logits)
                unused = len(rows) - 1 - i  # draft tokens fed after this row's token
                if llama_cpp.llama_vocab_is_eog(vocab, token):
                    llm.n_tokens -= unused
                    return Generated(tokens, "stop", cached, steps)
                if rules is not None:
                    llama_cpp.llama_sampler_accept(rules, token)
                llama_cpp.llama_sampler_accept(chain, token)
                tokens.append(token)
                if draft_tokens:
                    drafts.append(token)
                if after_token(len(tokens)):
                    llm.n_tokens -= unused
                    return Generated(tokens, "halted", cached, steps)
                if len(tokens) >= max_tokens:
                    llm.n_tokens -= unused
                    return Generated(tokens, "length", cached, steps)
                if unused and fed[i + 1] == token:
                    continue  # the draft guessed this token: the next row is the model's next step
                llm.n_tokens -= unused  # the draft went another way: its KV entries are dropped
                break
            fed = [token, *drafts.draft(min(draft_tokens, max_tokens - len(tokens) - 1))]
            rows = _feed(llm, fed, n_vocab)
            steps += 1
    finally:
        llama_cpp.llama_sampler_free(chain)
        if rules is not None:
            llama_cpp.llama_sampler_free(rules)


class Drafts:
    """Prompt-lookup drafting: the tokens that followed the latest earlier occurrence of the context's last
    few tokens. A summary copies names, numbers and whole phrases from its transcript, so these guesses are
    often right, and a right guess is a token that needs no decoding step of its own.

    The context's n-grams are indexed as its tokens arrive (each one once a token follows it), so a step's
    lookup is a dictionary probe rather than a scan of the whole context (up to ``n_ctx`` tokens)."""

    def __init__(self, context: Sequence[int]) -> None:
        self.context: list[int] = []
        self._latest: dict[tuple[int, ...], int] = {}  # n-gram → start of its latest occurrence with a token after
        for token in context:
            self.append(token)

    def append(self, token: int) -> None:
        end = len(self.context)  # ``token`` follows the n-grams that end here
        self.context.append(token)
        for size in range(NGRAM_MIN, NGRAM_MAX + 1):
            if end >= size:
                self._latest[tuple(self.context[end - size:end])] = end - size

    def draft(self, most: int) -> list[int]:
        """Up to ``most`` tokens, from the longest n-gram (``NGRAM_MAX`` down to ``NGRAM_MIN``) that occurred
        before."""
        if most < 1:
            return []
        for size in range(NGRAM_MAX, NGRAM_MIN - 1, -1):
            start = self._latest.get(tuple(self.context[-size:])) if len(self.context) > size else None
            if start is not None:
                return self.context[start + size:start + size + most]
        return []


def _feed(llm: Any, batch: list[int], n_vocab: int) -> list[np.ndarray]:
    """Decode ``batch`` after the cached tokens; the logits after each of its tokens (a draft is checked
    in one decoding step: on a CPU, reading the weights once for several tokens costs little more than for
    one)."""
    from llama_cpp import llama_cpp

    if len(batch) == 1:
        llm.eval(batch)
        return [np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(n_vocab,))]
    ctx = llm._ctx.ctx
    llm._ctx.kv_cache_seq_rm(-1, llm.n_tokens, -1)  # a rejected draft's entries (eval() does the same)
    n_past = llm.n_tokens
    llm._batch.set_batch(batch=batch, n_past=n_past, logits_all=True)
    # llama.cpp runs any batch of more than one token on the prompt's threads (every core); a draft is
    # decoded on the generation threads instead: with every core in use, a busy machine stalls each of the
    # model's barriers (on 2 loaded cores a 9-token draft took 45 s on 2 threads, 4 s on 1)
    threads, batch_threads = llama_cpp.llama_n_threads(ctx), llama_cpp.llama_n_threads_batch(ctx)
    llama_cpp.llama_set_n_threads(ctx, threads, threads)
    try:
        llm._ctx.decode(llm._batch)
    finally:
        llama_cpp.llama_set_n_threads(ctx, threads, batch_threads)
    llm.input_ids[n_past:n_past + len(batch)] = batch
    llm.n_tokens += len(batch)
    return [np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, i), shape=(n_vocab,))
            for i in range(len(batch))]


def _feed_prompt(llm: Any, prompt: Sequence[int]) -> int:
    """Evaluate ``prompt``, reusing the KV cache of the longest prefix it shares with the previous call;
    the number of tokens reused."""
    keep = 0
    for old, new in zip(llm.input_ids[: llm.n_tokens], prompt[:-1], strict=False):
        if old != new:
            break
        keep += 1
    if keep:
        llm.n_tokens = keep  # eval() drops the cache beyond n_tokens before it decodes
    else:
        llm.reset()
    llm.eval(list(prompt[keep:]))
    return keep


def _chain(temperature: float, seed: int, top_p: float = TOP_P) -> Any:
    from llama_cpp import llama_cpp

    chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
    if temperature <= 0:
        llama_cpp.llama_sampler_chain_add(chain, llama_cpp.llama_sampler_init_greedy())
        return chain
    for sampler in (llama_cpp.llama_sampler_init_top_k(TOP_K), llama_cpp.llama_sampler_init_top_p(top_p, 1),
                    llama_cpp.llama_sampler_init_min_p(MIN_P, 1), llama_cpp.llama_sampler_init_temp(temperature),
                    llama_cpp.llama_sampler_init_dist(seed)):
        llama_cpp.llama_sampler_chain_add(chain, sampler)
    return chain
