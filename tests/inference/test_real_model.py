"""The real default chat model, when installed (`make models`; `make test` installs it): it loads through the
appliance's own code and answers schema-valid JSON. One short call: CI runs it on 2 cores."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import jsonschema
import pytest

from appliance.inference import prompts
from appliance.inference.llm import SMOKE_SCHEMA, LlamaModel
from tests import real_model

pytestmark = pytest.mark.real_model


@pytest.fixture(scope="module")
def default_model() -> Iterator[LlamaModel]:
    model = real_model.default_model(context_tokens=2048)
    yield model
    model.close()


def test_the_default_model_answers_schema_valid_json(default_model: LlamaModel) -> None:
    messages = prompts.render("json_smoke", text="Priya moves the staging cluster from Frankfurt to Dublin on "
                              "Tuesday; the TLS certificates must be renewed first.")
    answer = default_model.complete_json(messages, SMOKE_SCHEMA, max_tokens=96, timeout=120)
    jsonschema.validate(answer, SMOKE_SCHEMA)
    words = " ".join([answer["title"], *answer["topics"]]).lower()
    assert any(w in words for w in ("dublin", "frankfurt", "cluster", "staging", "tls", "certificate", "migrat",
                                    "move")), answer
    assert default_model.status().state == "loaded"


def test_drafted_decoding_answers_what_token_by_token_decoding_answers_but_for_near_ties(
        default_model: LlamaModel) -> None:
    """Greedy calls check tokens drafted from the prompt several at a time (a summary copies names and
    phrases), in fewer model passes. The answer is the token-by-token one wherever the model's choice is
    clear: llama.cpp does not promise bit-identical logits for a token decoded alone and one decoded in a
    batch, so the two may part only where token by token had two tokens nearly tied."""
    from appliance.inference import sampling

    text = ("Priya moves the staging cluster from Frankfurt to Dublin on Tuesday; the TLS certificates for "
            "staging.example.org must be renewed first, and the budget is capped at 2,000 euros.")
    messages = [{"role": "user", "content": f"Repeat this sentence word for word: {text}"}]
    default_model.load(timeout=120)
    llm = default_model._llm
    formatted = default_model._formatter(messages=messages)
    prompt = llm.tokenize(formatted.prompt.encode(), add_bos=not formatted.added_special, special=True)
    runs = [sampling.generate(llm, prompt, max_tokens=60, temperature=0.0, seed=0, grammar=None,
                              after_token=lambda n: False, draft_tokens=draft) for draft in (0, 8)]
    one_by_one, drafted = runs
    parted = next((i for i, (a, b) in enumerate(zip(one_by_one.tokens, drafted.tokens, strict=False)) if a != b),
                  None)
    if parted is None:
        assert drafted.tokens == one_by_one.tokens and drafted.finish == one_by_one.finish
    else:
        gap = logit_gap(llm, prompt, one_by_one.tokens[:parted], one_by_one.tokens[parted], drafted.tokens[parted])
        assert gap < NEAR_TIE, f"the answers part at token {parted} where token by token chose by {gap:.3f} logits"
    assert one_by_one.steps >= len(one_by_one.tokens) - 1  # one pass a token
    assert drafted.steps < one_by_one.steps / 2, (drafted.steps, one_by_one.steps)
    assert "Dublin" in llm.detokenize(drafted.tokens).decode()


NEAR_TIE = 0.05  # logits: far above float rounding between matmul paths, far below a clear choice


def logit_gap(llm: Any, prompt: list[int], before: list[int], chosen: int, other: int) -> float:
    """How far token-by-token decoding preferred ``chosen`` to ``other`` after ``prompt`` and ``before``."""
    import numpy as np
    from llama_cpp import llama_cpp

    llm.reset()
    llm.eval(list(prompt))
    for token in before:
        llm.eval([token])
    logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1), shape=(llm.n_vocab(),))
    return float(logits[chosen] - logits[other])


def test_models_verify_checks_and_loads_the_installed_default_model(capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """`kumiho-ce models verify` on the real file: its pinned sha256, and a llama.cpp load (wherever it was found)."""
    from appliance.cli import main
    from appliance.inference.install import chat_models, where_installed
    from tests.real_model import real_settings

    # the search path as this machine has it, not the empty models_dir every test gets (tests/conftest.py)
    if os.environ["KUMIHO_TEST_REAL_MODELS_DIR"]:
        monkeypatch.setenv("KUMIHO_CE_MODELS_DIR", os.environ["KUMIHO_TEST_REAL_MODELS_DIR"])
    else:
        monkeypatch.delenv("KUMIHO_CE_MODELS_DIR")
    name = next(iter(chat_models()))
    where = where_installed(real_settings(), name)
    assert where is not None, f"{name} is not installed: run `make models`"
    assert main(["models", "verify", name, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"ok": True, "models": [{
        "name": name, "role": "chat", "path": str(where[0]), "found_in": where[1], "sha256_ok": True, "loads": True,
        "error": None}]}
