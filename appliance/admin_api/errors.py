"""One map from every error a route can raise to an RFC 9457 problem response; nothing leaks a stack trace.

Domain errors (``appliance.errors``) keep their code and the field they name. Litestar's own refusals (a query
parameter of the wrong type, an unknown path, a method the path does not take) are rewritten in the same
words: the field at fault and how to fix it. Anything else is a 500 whose detail points at the log.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException, ValidationException
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR

from appliance.errors import (
    AlreadyExists,
    Conflict,
    InvalidArgument,
    KumihoError,
    NotFound,
    PermissionDenied,
    Unavailable,
)
from appliance.server.problems import PROBLEM_CONTENT_TYPE, problem

log = logging.getLogger(__name__)

_STATUS: tuple[tuple[type[KumihoError], int], ...] = (
    (InvalidArgument, 400),
    (NotFound, 404),
    (AlreadyExists, 409),
    (Conflict, 409),
    (PermissionDenied, 403),
    (Unavailable, 503),
)
_MISSING = re.compile(r"^Missing required (query parameter|header|path parameter|cookie) '([^']+)'")
_HTTP_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found",
               405: "method_not_allowed", 409: "conflict", 413: "payload_too_large", 415: "unsupported_media_type",
               503: "unavailable"}


@contextmanager
def field_as_sent(sent: str | None = None, *raised: str | None) -> Iterator[None]:
    """Errors raised inside name the field the caller sent, in their message too (``kref: item … does not
    exist``). An operation or a store names its own argument (``item_kref``) where a route takes another
    (``kref``): an error naming one of ``raised`` (None: an error naming no field; every error when none are
    given) is renamed ``sent``."""
    try:
        yield
    except KumihoError as exc:
        if sent and (not raised or exc.field in raised):
            if exc.field:
                exc.message = re.sub(rf"\b{re.escape(exc.field)}\b", sent, exc.message)
            exc.field = sent
        if exc.field and exc.field not in exc.message:
            exc.message = f"{exc.field}: {exc.message}"
        raise


def status_of(exc: KumihoError) -> int:
    return next((status for kind, status in _STATUS if isinstance(exc, kind)), 500)


def problem_response(request: Request[Any, Any, Any], status: int, code: str, detail: str, *,
                     field: str | None = None, headers: dict[str, str] | None = None,
                     **extra: Any) -> Response[dict[str, Any]]:
    return Response(problem(status, code, detail, field=field, instance=request.url.path, **extra),
                    status_code=status, media_type=PROBLEM_CONTENT_TYPE, headers=headers)


def kumiho_error(request: Request[Any, Any, Any], exc: KumihoError) -> Response[dict[str, Any]]:
    status = status_of(exc)
    if status == 500:  # a storage or configuration failure: its message is not for the client
        return unexpected_error(request, exc)
    retry = {"Retry-After": "5"} if status == 503 else None  # Unavailable is brief (an index repair)
    extra = {k: v for k, v in exc.to_dict().items() if k not in ("code", "message", "field")}  # e.g. candidates
    return problem_response(request, status, exc.code, exc.message, field=exc.field, headers=retry, **extra)


def validation_error(request: Request[Any, Any, Any], exc: ValidationException) -> Response[dict[str, Any]]:
    """A parameter or body Litestar could not parse: name the first field at fault and what it expects."""
    missing = _MISSING.match(str(exc.detail)) if exc.extra is None else None
    if missing:  # Litestar says so only in its detail text
        exc.extra = [{"key": missing.group(2), "source": missing.group(1).split()[0],
                      "message": "is required; give it"}]
    first = exc.extra[0] if isinstance(exc.extra, list) and exc.extra else None
    if isinstance(first, dict) and first.get("key"):
        field = str(first["key"])
        source = first.get("source")
        where = {"query": "query parameter", "path": "path parameter", "header": "header", "cookie": "cookie",
                 "body": "body field"}.get(str(getattr(source, "value", source) or ""), "field")
        message = str(first.get("message") or "is not valid")
        detail = f"{field}: {message.rstrip('.')} (the {where} {field}); fix it and send the request again"
    else:
        field = None
        detail = "the request body is not valid JSON of the documented shape; see /api/schema"
    return problem_response(request, 400, "invalid_argument", detail, field=field)


def http_error(request: Request[Any, Any, Any], exc: HTTPException) -> Response[dict[str, Any]]:
    status = exc.status_code
    if status >= 500:
        return unexpected_error(request, exc)
    code = _HTTP_CODES.get(status, "bad_request")
    if status == 404:
        detail = f"there is no endpoint {request.url.path}; the API is described at /api/schema"
    elif status == 405:
        detail = f"{request.url.path} does not take {request.method}; the API is described at /api/schema"
    else:
        detail = str(exc.detail)
    return problem_response(request, status, code, detail, headers=exc.headers)


def too_deep(request: Request[Any, Any, Any], exc: RecursionError) -> Response[dict[str, Any]]:
    """The JSON decoder's own nesting limit (about 1,000 levels): the body's fault, not the appliance's."""
    return problem_response(request, 400, "invalid_argument", "the request body nests too deeply; send a flatter "
                            "JSON body (see /api/schema for each route's shape)")


def unexpected_error(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    log.error("unexpected error on %s %s", request.method, request.url.path, exc_info=exc)
    return problem_response(request, HTTP_500_INTERNAL_SERVER_ERROR, "internal",
                            "internal error; see the appliance log")


def schema_page_not_found(response: Response[Any]) -> Response[Any]:
    """Litestar's schema router answers an unknown page under /api/schema with an HTML 404 page of its own (it
    returns it rather than raising, so the handlers above never see it): answer a problem instead."""
    if response.status_code != 404:
        return response
    return Response(problem(404, "not_found", "there is no such schema page; the OpenAPI document is "
                                              "/api/schema/openapi.json"),
                    status_code=404, media_type=PROBLEM_CONTENT_TYPE)


HANDLERS = {KumihoError: kumiho_error, ValidationException: validation_error, HTTPException: http_error,
            RecursionError: too_deep, Exception: unexpected_error}
