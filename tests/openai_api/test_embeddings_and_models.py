"""GET /v1/models and POST /v1/embeddings through the official ``openai`` client: the appliance's own models,
any model name accepted, vectors in the order of the inputs, float and base64 encodings."""

from __future__ import annotations

import base64

import numpy as np
import openai
import pytest
from openai import OpenAI

from tests.inprocess import InProcess

TEXTS = ["The staging cluster moves to Dublin.", "I take my espresso without sugar.", "TLS certificates expire."]


def test_the_model_list_names_the_chat_and_the_embedding_model(openai_client: OpenAI, tiny_app: InProcess) -> None:
    models = openai_client.models.list()
    ids = [model.id for model in models.data]
    assert ids == [tiny_app.services.model.model_id, tiny_app.services.search.embedder.model_id]
    assert all(model.object == "model" and model.owned_by == "kumiho-ce" and model.created > 0
               for model in models.data)


def test_embeddings_come_in_the_order_of_the_inputs_with_the_models_dimension(openai_client: OpenAI,
                                                                             tiny_app: InProcess) -> None:
    embedder = tiny_app.services.search.embedder
    batch = openai_client.embeddings.create(model="text-embedding-3-small", input=TEXTS, encoding_format="float")
    assert batch.object == "list" and batch.model == embedder.model_id
    assert [item.index for item in batch.data] == [0, 1, 2]
    assert all(len(item.embedding) == embedder.dim for item in batch.data)
    for text, item in zip(TEXTS, batch.data, strict=True):
        alone = openai_client.embeddings.create(model="anything", input=text, encoding_format="float").data
        assert len(alone) == 1
        assert np.allclose(alone[0].embedding, item.embedding, atol=1e-6)
        assert np.allclose(item.embedding, embedder.embed([text])[0], atol=1e-6)  # the appliance's own vector
    vectors = np.array([item.embedding for item in batch.data])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert len({tuple(np.round(v, 5)) for v in vectors}) == 3  # different texts, different vectors


def test_the_clients_default_base64_encoding_decodes_to_the_same_vectors(openai_client: OpenAI) -> None:
    floats = openai_client.embeddings.create(model="m", input=TEXTS, encoding_format="float")
    packed = openai_client.embeddings.create(model="m", input=TEXTS)  # the client asks for base64 and decodes it
    for a, b in zip(floats.data, packed.data, strict=True):
        assert np.allclose(a.embedding, b.embedding, atol=1e-7)
    raw = openai_client.embeddings.with_raw_response.create(model="m", input=TEXTS[0], encoding_format="base64")
    encoded = raw.http_response.json()["data"][0]["embedding"]
    assert np.allclose(np.frombuffer(base64.b64decode(encoded), dtype="<f4"), floats.data[0].embedding, atol=1e-7)


@pytest.mark.parametrize(("options", "param"), [
    ({"input": ["x"] * 257}, "input"),
    ({"input": ""}, "input"),
    ({"input": ["ok", ""]}, "input.1"),
    ({"input": "x" * 32_769}, "input"),
    ({"input": "ok", "dimensions": 12}, "dimensions"),
    ({"input": [[1, 2, 3]]}, "input"),  # token arrays: text only
])
def test_embedding_bounds_are_refused_naming_the_field(openai_client: OpenAI, options: dict[str, object],
                                                       param: str) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        openai_client.embeddings.create(model="m", **options)  # type: ignore[arg-type]
    body = refused.value.body
    assert isinstance(body, dict) and body["type"] == "invalid_request_error", body
    assert str(body["param"]).startswith(param), body
