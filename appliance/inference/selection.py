"""The model one call asks for: ``dream_state``'s ``provider``/``model``/``base_url``/``api_key`` (MISSION §3).

A caller may choose only among what the operator set up: the configured model, another model of the
manifest by name (``kumiho-ce models list``) once it is installed, or the configured OpenAI-compatible
endpoint (``inference.endpoint_url``). Anything else is refused before any file is opened or any connection
is made, and with one message whatever the value names: a file path would otherwise make llama.cpp open a
file of the caller's choosing and tell whether it exists, and a ``base_url`` would send the batch's memories
to a server of the caller's choosing. A per-call ``api_key`` is refused too: the endpoint's key is
``inference.endpoint_api_key``.
"""

from __future__ import annotations

import httpx

from appliance.config import Settings
from appliance.core.ports import ChatModel
from appliance.errors import InvalidArgument
from appliance.inference.factory import chat_model

LOCAL = ("", "local", "llama.cpp", "llamacpp", "llama_cpp", "kumiho-ce")
ENDPOINT = ("openai", "openai-compatible", "endpoint", "llama-server", "ollama", "vllm", "lmstudio")


def model_for_call(settings: Settings, default: ChatModel, *, provider: str | None = None, model: str | None = None,
                   base_url: str | None = None, api_key: str | None = None) -> ChatModel:
    """The model a call's choice (Dream State's provider, model, base_url, api_key) selects; the caller closes it
    when it is not ``default``."""
    provider = (provider or "").strip().lower()
    name = (model or "").strip()
    base_url = (base_url or "").strip()
    if api_key:
        raise InvalidArgument("api_key: a call cannot bring its own key; the endpoint's key is the configured "
                              "inference.endpoint_api_key (omit api_key)", field="api_key")
    if base_url or provider in ENDPOINT:
        return _configured_endpoint(settings, default, name, base_url)
    if provider not in LOCAL:
        raise InvalidArgument(f"provider: {provider[:40]!r} is not available offline; use local (the "
                              "appliance's llama.cpp models) or openai (the configured endpoint)", field="provider")
    if not name or name == default.model_id:
        return default
    return _manifest_model(settings, default, name)


def _manifest_model(settings: Settings, default: ChatModel, name: str) -> ChatModel:
    """A manifest model by name, installed; never a path (the one refusal does not depend on the file system)."""
    from appliance.inference.install import chat_models, installed_path, model_search_path

    models = chat_models()
    if name not in models:
        raise InvalidArgument(f"model: not a model of this appliance; name one of {', '.join(models)} "
                              f"(`kumiho-ce models list`) or omit model for the configured one ({default.model_id})",
                              field="model")
    path = installed_path(settings, name)
    if path is None:
        raise InvalidArgument(f"model: {name} is not installed; the operator installs it with `kumiho-ce models "
                              f"install {name}`, or omit model for the configured one ({default.model_id})",
                              field="model")
    return chat_model(settings.inference.model_copy(update={"chat_model": "default", "model_name": name}),
                      model_search_path(settings))


def _configured_endpoint(settings: Settings, default: ChatModel, name: str, base_url: str) -> ChatModel:
    conf = settings.inference
    if base_url and not (conf.endpoint_url and _same_url(base_url, conf.endpoint_url)):
        raise InvalidArgument("base_url: only the configured endpoint (inference.endpoint_url) may be used; omit "
                              "base_url" + (" to use it" if conf.endpoint_url else " (no endpoint is configured)"),
                              field="base_url")
    if not conf.endpoint_url:
        raise InvalidArgument("provider: no model endpoint is configured (inference.endpoint_url); omit provider "
                              "and model to use the configured model", field="provider")
    if name and name != conf.endpoint_model:
        raise InvalidArgument(f"model: the configured endpoint serves {conf.endpoint_model!r} "
                              "(inference.endpoint_model); omit model to use it", field="model")
    if conf.chat_model == "endpoint":
        return default
    return chat_model(conf.model_copy(update={"chat_model": "endpoint"}), [])  # an endpoint needs no model file


def _same_url(given: str, configured: str) -> bool:
    """The same endpoint, however the caller spells it (case of scheme and host, a trailing slash)."""
    try:
        a, b = httpx.URL(given), httpx.URL(configured)
    except (httpx.InvalidURL, TypeError):
        return False
    return (a.scheme, a.host, a.port, a.path.rstrip("/"), a.userinfo, a.query) == \
        (b.scheme, b.host, b.port, b.path.rstrip("/"), b.userinfo, b.query)
