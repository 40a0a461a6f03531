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
