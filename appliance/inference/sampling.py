"""The token loop of one model call, on llama.cpp's sampler API, with the grammar checked lazily.

llama-cpp-python puts the grammar at the head of its sampler chain, so every token runs the grammar over
the whole vocabulary: 60-90 ms a token for Qwen's 151,936 tokens on this machine, several times the cost
of the model itself. llama.cpp's own sampler (``common_sampler_sample``) instead samples first and asks
the grammar only about the chosen token; only when the grammar refuses it is the vocabulary filtered and
the token drawn again. This module does the same (1-2 ms a token). The loop also gives the caller a hook
after each token (progress, deadline, cancellation).

It works on a loaded ``llama_cpp.Llama`` and keeps its bookkeeping (``eval`` records the tokens), so the
next call reuses the longest common prompt prefix in the KV cache, as ``Llama.generate`` does.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from appliance.core.ports import ModelOutputError

TOP_K, TOP_P, MIN_P = 40, 0.95, 0.05  # llama-cpp-python's defaults for temperature > 0


def generate(llm: Any, prompt: Sequence[int], *, max_tokens: int, temperature: float, seed: int,
             grammar: str | None, after_token: Callable[[int], bool], top_p: float = TOP_P
             ) -> tuple[list[int], str]:
    """Generate after ``prompt``; returns the new tokens (without the end token) and why it ended:
    ``stop`` (an end-of-generation token), ``length`` (``max_tokens``) or ``halted`` (``after_token``
    returned True after the n-th token)."""
    from llama_cpp import llama_cpp
    from llama_cpp._internals import LlamaTokenDataArray

    _feed_prompt(llm, prompt)
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

    tokens: list[int] = []
    try:
        for n in range(1, max_tokens + 1):
            logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, -1), shape=(n_vocab,))
            token = draw(logits, False)
            if rules is not None and not allowed(token):
                token = draw(logits, True)
                if not allowed(token):  # nothing fits: accepting it would abort the process in llama.cpp
                    raise ModelOutputError("the grammar reached a dead end (no token fits); simplify the schema")
            if llama_cpp.llama_vocab_is_eog(vocab, token):
                return tokens, "stop"
            if rules is not None:
                llama_cpp.llama_sampler_accept(rules, token)
            llama_cpp.llama_sampler_accept(chain, token)
            tokens.append(token)
            if after_token(n):
                return tokens, "halted"
            if n < max_tokens:
                llm.eval([token])
        return tokens, "length"
    finally:
        llama_cpp.llama_sampler_free(chain)
        if rules is not None:
            llama_cpp.llama_sampler_free(rules)


def _feed_prompt(llm: Any, prompt: Sequence[int]) -> None:
    """Evaluate ``prompt``, reusing the KV cache of the longest prefix it shares with the previous call."""
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
