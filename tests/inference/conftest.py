"""The tiny random-weight GGUF (written once per session) and a clock the tests move."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from appliance.inference.gguf_fixture import write_tiny_llama
from appliance.inference.llm import LlamaModel


class Ticker:
    """A monotonic clock that moves only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(scope="session")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_tiny_llama(tmp_path_factory.mktemp("models") / "tiny.gguf")


@pytest.fixture
def ticker() -> Ticker:
    return Ticker()


@pytest.fixture
def tiny(tiny_gguf: Path) -> Iterator[LlamaModel]:
    model = LlamaModel(tiny_gguf, model_id="tiny", context_tokens=512, threads=1)
    try:
        yield model
    finally:
        model.close()
