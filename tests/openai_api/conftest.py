"""The appliance in this process behind uvicorn on a loopback port, its chat model the tiny random-weight GGUF
(tests/inference/conftest.py explains it) configured as a user would (``chat_model = "gguf"``), and the
official ``openai`` client library talking to it over real HTTP. The tiny model's words are noise: these tests
check the mechanics (shapes, grammars, bounds, the queue), the real-model test the content."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openai import OpenAI

from appliance.inference.gguf_fixture import write_tiny_llama
from tests.inprocess import InProcess, serve_in_process

QUIET = {"idle_consolidation_minutes": 0, "dream_state_time": ""}  # no background model work during a test


def tiny_settings(root: Path, **inference: Any) -> dict[str, Any]:
    path = write_tiny_llama(root / "tiny.gguf")
    return {"inference": {"chat_model": "gguf", "model_path": str(path), "context_tokens": 1024, "threads": 1,
                          **inference},
            "maintenance": QUIET}


def client(app: InProcess, api_key: str = "sk-local-dummy") -> OpenAI:
    """The official client as the stock sidecar makes it: a base URL and a key (any key on loopback)."""
    return OpenAI(base_url=app.base_url + "/v1", api_key=api_key, max_retries=0, timeout=120)


@pytest.fixture(scope="session")
def tiny_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    root = tmp_path_factory.mktemp("openai-tiny")
    with serve_in_process(root / "data", None, **tiny_settings(root)) as running:
        yield running


@pytest.fixture
def openai_client(tiny_app: InProcess) -> Iterator[OpenAI]:
    with client(tiny_app) as opened:  # closes its connections (an open socket left behind is a warning)
        yield opened
