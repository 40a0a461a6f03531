"""The real default chat model, when installed (`make models`; `make test` installs it): it loads through the
appliance's own code and answers schema-valid JSON. One short call: CI runs it on 2 cores."""

from __future__ import annotations

from collections.abc import Iterator

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


def test_drafted_decoding_answers_exactly_what_token_by_token_decoding_answers(default_model: LlamaModel) -> None:
    """Greedy calls check tokens drafted from the prompt several at a time (a summary copies names and
    phrases): the answer is the one token-by-token decoding gives, in fewer model passes."""
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
    assert drafted.tokens == one_by_one.tokens and drafted.finish == one_by_one.finish
    assert one_by_one.steps >= len(one_by_one.tokens) - 1  # one pass a token
    assert drafted.steps < one_by_one.steps / 2, (drafted.steps, one_by_one.steps)
    assert "Dublin" in llm.detokenize(drafted.tokens).decode()
