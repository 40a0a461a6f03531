"""The effective settings as the console shows them: the same keys and types as ``appliance.config.Settings``,
every secret replaced by ``MASK``.

A secret is a ``SecretStr`` setting, or a text setting whose name has the word token, key, password or secret
(by words: ``context_tokens``, ``tokenizer_path`` and the flag ``require_token`` are not secrets, ``api_token``
and ``endpoint_api_key`` are). The
view's model is derived from the settings' models, so a new setting shows up (and a new secret is masked)
without touching this module.
"""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, create_model

from appliance.config import Settings

MASK = "********"
SECRET_WORDS = frozenset({"token", "key", "password", "passwd", "secret", "passphrase", "credential", "credentials"})


def is_secret(name: str, annotation: Any) -> bool:
    """A SecretStr, or text named like a secret (a flag such as require_token is not one)."""
    kinds = set(typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,))
    return SecretStr in kinds or (str in kinds and bool(SECRET_WORDS & set(name.lower().split("_"))))


def _kinds(annotation: Any) -> tuple[Any, ...]:
    return typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)


def _section(annotation: Any) -> type[BaseModel] | None:
    return annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None


def view_model(model: type[BaseModel], name: str) -> type[BaseModel]:
    fields: dict[str, Any] = {}
    for key, info in model.model_fields.items():
        annotation: Any = info.annotation
        section = _section(annotation)
        if is_secret(key, annotation):
            annotation = str | None
        elif Path in _kinds(annotation):  # a path on this machine, not a URI (Litestar would write format: uri)
            annotation = str | None if type(None) in _kinds(annotation) else str
        elif section is not None:
            annotation = view_model(section, name + "".join(p.title() for p in key.split("_")))
        fields[key] = (annotation, Field(description=info.description))
    model_view: type[BaseModel] = create_model(name, __config__=ConfigDict(extra="forbid"), **fields)
    return model_view


SettingsView = view_model(Settings, "SettingsView")


def masked(settings: BaseModel, prefix: str = "") -> tuple[dict[str, Any], list[str]]:
    """The settings' values with every secret masked (None stays None: it says the secret is unset), and the
    dotted names of the secrets."""
    values: dict[str, Any] = {}
    secrets: list[str] = []
    for key, info in type(settings).model_fields.items():
        value = getattr(settings, key)
        if is_secret(key, info.annotation):
            values[key] = None if value is None else MASK
            secrets.append(prefix + key)
        elif isinstance(value, BaseModel):
            values[key], inner = masked(value, f"{prefix}{key}.")
            secrets += inner
        else:
            values[key] = str(value) if isinstance(value, Path) else value
    return values, secrets


def settings_view(settings: Settings) -> tuple[BaseModel, list[str]]:
    values, secrets = masked(settings)
    return SettingsView.model_validate(values), secrets
