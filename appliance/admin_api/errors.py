"""One map from the domain's errors to HTTP responses; nothing leaks a stack trace."""

from __future__ import annotations

import logging

from litestar import Request, Response
from litestar.exceptions import HTTPException

from appliance.errors import (
    AlreadyExists,
    Conflict,
    InvalidArgument,
    KumihoError,
    NotFound,
    Unavailable,
)

log = logging.getLogger(__name__)

_STATUS: tuple[tuple[type[KumihoError], int], ...] = (
    (InvalidArgument, 400),
    (NotFound, 404),
    (AlreadyExists, 409),
    (Conflict, 409),
    (Unavailable, 503),
)


def status_of(exc: KumihoError) -> int:
    return next((status for kind, status in _STATUS if isinstance(exc, kind)), 500)


def kumiho_error(_: Request, exc: KumihoError) -> Response:
    status = status_of(exc)
    retry = {"Retry-After": "5"} if status == 503 else None  # Unavailable is brief (an index repair)
    return Response({"error": exc.to_dict()}, status_code=status, headers=retry)


def http_error(_: Request, exc: HTTPException) -> Response:
    code = "unauthorized" if exc.status_code == 401 else "http_error"
    return Response({"error": {"code": code, "message": exc.detail}}, status_code=exc.status_code,
                    headers=exc.headers)


def unexpected_error(request: Request, exc: Exception) -> Response:
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    return Response({"error": {"code": "internal", "message": "internal error; see the appliance log"}},
                    status_code=500)


HANDLERS = {KumihoError: kumiho_error, HTTPException: http_error, Exception: unexpected_error}
