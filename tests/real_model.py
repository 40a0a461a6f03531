"""The installed default chat model, for the tests that run on it (``make test`` installs it: a missing one is a
failure, not a skip)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from appliance.config import load_settings
from appliance.inference.install import chat_models, installed_path, model_search_path
from appliance.inference.llm import LlamaModel


def real_settings() -> Any:
    """This machine's settings with the models directory the tests hide (tests/conftest.py) put back."""
    hidden = os.environ["KUMIHO_TEST_REAL_MODELS_DIR"]  # "" when no models_dir was set: the default search path
    return load_settings(models_dir=Path(hidden) if hidden else None)


def default_model(**options: Any) -> LlamaModel:
    """The manifest's default model, verified by its sha256 when it loads; ``options`` go to ``LlamaModel``."""
    settings = real_settings()
    name, entry = next(iter(chat_models().items()))
    path = installed_path(settings, name)
    assert path is not None, (f"{name} is not installed in any of {', '.join(map(str, model_search_path(settings)))}: "
                              "run `make models`")
    return LlamaModel(path, model_id=name, sha256=entry["sha256"], size=entry["size"], **options)
