"""What the write methods of this package share: the write boundary (credentials redacted before anything is
stored, as every MCP tool's arguments are) and errors that name the request's own field."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from appliance.core import redaction
from appliance.errors import KumihoError


def redacted(**arguments: Any) -> dict[str, Any]:
    """The arguments with every credential replaced by ``[secret]`` (a credential in a kref or a tag is
    refused, as the MCP tools refuse it)."""
    cleaned, _ = redaction.redact_arguments(arguments)
    return cleaned


@contextmanager
def named(field: str, store_name: str = "kref") -> Iterator[None]:
    """The graph store names a kref it cannot follow ``kref`` (or its own argument ``store_name``); the
    request's field has its own name."""
    try:
        yield
    except KumihoError as exc:
        if exc.field in (None, "kref", store_name):
            old, exc.field = exc.field, field
            if old and exc.message.startswith(f"{old}:"):
                exc.message = field + exc.message[len(old):]
            elif not exc.message.startswith(f"{field}:"):
                exc.message = f"{field}: {exc.message}"
        raise
