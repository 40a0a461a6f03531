"""The bundled embedding model, loaded from site-packages and verified: meaning and the D1 score bands."""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import pytest

from appliance.core.search import SearchRequest
from appliance.errors import ConfigError
from appliance.inference.embedding import OnnxEmbedder, default_embedder
from appliance.inference.models import verified
from tests.search.conftest import Stack


@cache
def model() -> OnnxEmbedder:
    return default_embedder()


def test_the_default_model_is_verified_and_embeds_meaning() -> None:
    vectors = model().embed(["The cat sits on the mat.", "A cat is sitting on a rug.",
                             "Quarterly revenue grew by eight percent."])
    assert vectors.shape == (3, 384)
    assert float(vectors[0] @ vectors[1]) > 0.6 > 0.2 > float(vectors[0] @ vectors[2])


def test_a_tampered_model_file_is_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    bad = tmp_path / "model.onnx"
    bad.write_bytes(b"not a model")
    with pytest.raises(ConfigError, match="sha256"):
        verified(bad, "0" * 64)


def test_scores_fall_in_the_d1_bands(make_stack: Callable[..., Stack]) -> None:
    stack = make_stack(model())
    stack.memory("/M/s", "dup", "Coffee habit", "Alice drinks a flat white every morning before work.")
    stack.memory("/M/s", "related", "Cafe visit", "Alice met a friend at a new cafe downtown last week.")
    stack.memory("/M/s", "unrelated", "Tax return", "The quarterly VAT return is due at the end of March.")
    stack.sync.run_pending()
    hits = {h.revision_kref.rsplit("/", 1)[1].split(".")[0]: h.score for h in stack.search.search(
        SearchRequest("Every morning before work Alice has a flat white coffee", limit=3))}
    assert hits["dup"] >= 0.6, hits  # near-duplicate: 0.6–0.8 or more
    assert 0.35 <= hits["related"] < hits["dup"], hits
    assert hits["unrelated"] <= 0.35, hits  # unrelated: 0.2–0.35


def test_operators_can_point_at_their_own_onnx_model(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from appliance.app import make_embedder
    from appliance.config import load_settings
    from appliance.inference.models import manifest, model_file

    entry = manifest()["embedding"]["minilm-int8"]
    model, tokenizer = model_file(entry).locate(), model_file(entry["tokenizer"]).locate()
    own = make_embedder(load_settings(None, search={"embedder": "onnx", "model_path": model,
                                                    "tokenizer_path": tokenizer, "model_sha256": entry["sha256"]}))
    assert own.model_id == "onnx:model.onnx" and own.embed(["hello"]).shape == (1, 384)
    with pytest.raises(ConfigError, match="sha256"):
        make_embedder(load_settings(None, search={"embedder": "onnx", "model_path": model,
                                                  "tokenizer_path": tokenizer, "model_sha256": "0" * 64}))
    with pytest.raises(ConfigError, match="model_path"):
        make_embedder(load_settings(None, search={"embedder": "onnx"}))
