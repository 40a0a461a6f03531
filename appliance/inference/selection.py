"""The model one call asks for: ``dream_state``'s ``provider``/``model``/``base_url``/``api_key`` (MISSION §3).

The default is the configured model. ``provider`` local (or none) with ``model`` a ``.gguf`` path loads that
file for the call; ``provider`` openai (any OpenAI-compatible server) or a ``base_url`` selects an endpoint —
on loopback, or beyond it only when ``inference.allow_remote_endpoints`` is set (D6).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from appliance.config import Settings
from appliance.errors import InvalidArgument
from appliance.inference.chat import ChatModel

LOCAL = ("", "local", "llama.cpp", "llamacpp", "llama_cpp", "kumiho-ce")
ENDPOINT = ("openai", "openai-compatible", "endpoint", "llama-server", "ollama", "vllm", "lmstudio")


def model_for_call(settings: Settings, default: ChatModel, args: dict[str, Any]) -> ChatModel:
    """The model the arguments select; the caller closes it when it is not ``default``."""
    conf = settings.inference
    provider = str(args.get("provider") or "").strip().lower()
    name = str(args.get("model") or "").strip()
    base_url = str(args.get("base_url") or "").strip()
    if base_url or provider in ENDPOINT:
        from appliance.inference.remote import EndpointModel

        url = base_url or conf.endpoint_url
        if not url:
            raise InvalidArgument("base_url: give the OpenAI-compatible server's URL (e.g. http://127.0.0.1:8080/v1) "
                                  "or configure inference.endpoint_url", field="base_url")
        key = str(args.get("api_key") or "") or (conf.endpoint_api_key.get_secret_value()
                                                 if conf.endpoint_api_key and not base_url else None)
        return EndpointModel(url, name or conf.endpoint_model, api_key=key or None,
                             request_timeout=conf.request_timeout_seconds, allow_remote=conf.allow_remote_endpoints)
    if provider not in LOCAL:
        raise InvalidArgument(f"provider: {provider!r} is not available offline; use local (the appliance's "
                              "llama.cpp model) or openai (an OpenAI-compatible server, with base_url)",
                              field="provider")
    if not name or name == default.model_id:
        return default
    path = Path(name).expanduser()
    if path.suffix != ".gguf" or not path.is_file():
        raise InvalidArgument(f"model: {name!r} is neither the configured model ({default.model_id}) nor an "
                              "existing .gguf file on this machine", field="model")
    from appliance.inference.llm import LlamaModel

    return LlamaModel(path, model_id=f"gguf:{path.name}", context_tokens=conf.context_tokens, threads=conf.threads,
                      batch_threads=conf.batch_threads, request_timeout=conf.request_timeout_seconds)
