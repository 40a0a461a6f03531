"""The one place where typed ``[inference]`` settings become a ``ChatModel``.

The appliance's configured model (``appliance.app``) and the model one call selects (``selection.py``) are
both built here, so a model is made the same way (options, refusals, reasons) wherever it is asked for.
Nothing is loaded here: ``LlamaModel`` loads on its first call.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

from appliance.config import InferenceSettings
from appliance.core.ports import ChatModel, NoModel
from appliance.errors import ConfigError, KumihoError
from appliance.inference.install import chat_models, configured_chat_model, find_installed


def chat_model(conf: InferenceSettings, search: Sequence[Path]) -> ChatModel:
    """The chat model ``conf`` names, or a ``NoModel`` that says why there is none.

    ``search`` is where manifest models are looked for, in order (``install.model_search_path``).
    A configuration the appliance cannot start with (an endpoint beyond loopback that is not allowed, a
    model name the manifest does not know) is a ``ConfigError``.
    """
    if conf.chat_model == "none":
        return NoModel("disabled by the configuration (inference.chat_model = \"none\")")
    if conf.chat_model == "endpoint":
        return _endpoint(conf)
    if importlib.util.find_spec("llama_cpp") is None:  # not imported here: that loads the library
        return NoModel("llama-cpp-python is not installed; run `make install`")
    if conf.chat_model == "gguf":
        if conf.model_path is None:
            return NoModel("inference.chat_model = \"gguf\" needs inference.model_path")
        if not conf.model_path.is_file():
            return NoModel(f"inference.model_path {conf.model_path} does not exist")
        pinned = f"@{conf.model_sha256[:12]}" if conf.model_sha256 else ""
        return _llama(conf, conf.model_path, model_id=f"gguf:{conf.model_path.name}{pinned}", sha256=conf.model_sha256)
    name = configured_chat_model(conf)
    entry = chat_models()[name]
    path = find_installed(search, name)
    if path is None:
        return NoModel(f"the model {name} is not installed in any of {', '.join(map(str, search))}: run "
                       f"`kumiho-ce models install {name}` (`make install` installs the default one), set models_dir "
                       "to a directory that holds it, or set inference.chat_model = \"gguf\" and model_path")
    return _llama(conf, path, model_id=name, sha256=entry["sha256"], size=entry["size"])


def _llama(conf: InferenceSettings, path: Path, *, model_id: str, sha256: str | None,
           size: int | None = None) -> ChatModel:
    from appliance.inference.llm import LlamaModel

    return LlamaModel(path, model_id=model_id, sha256=sha256, size=size, context_tokens=conf.context_tokens,
                      threads=conf.threads, batch_threads=conf.batch_threads,
                      idle_unload_seconds=conf.idle_unload_seconds, queue_timeout=conf.queue_timeout_seconds,
                      max_waiting=conf.max_waiting, request_timeout=conf.request_timeout_seconds)


def _endpoint(conf: InferenceSettings) -> ChatModel:
    from appliance.inference.remote import EndpointModel

    if not conf.endpoint_url:
        return NoModel("inference.chat_model = \"endpoint\" needs inference.endpoint_url")
    key = conf.endpoint_api_key.get_secret_value() if conf.endpoint_api_key else None
    try:
        return EndpointModel(conf.endpoint_url, conf.endpoint_model, api_key=key,
                             request_timeout=conf.request_timeout_seconds, allow_remote=conf.allow_remote_endpoints)
    except KumihoError as exc:  # a configuration error: the appliance refuses to start with it
        raise ConfigError(f"inference.endpoint_url: {exc.message}") from None
