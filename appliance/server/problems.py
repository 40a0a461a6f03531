"""RFC 9457 problem details: the one shape of every HTTP error the appliance sends.

    content-type: application/problem+json
    {"type": "urn:kumiho-ce:problem:invalid_argument", "title": "Invalid argument", "status": 400,
     "detail": "limit: must be at most 100; ask for a smaller page", "code": "invalid_argument",
     "field": "limit", "instance": "/api/v1/items"}

``type`` is a URN rather than a web address: the appliance works offline and its problem types are named, not
hosted. ``code`` repeats the type's last part for clients that switch on a short string (the MCP tools use the
same codes), ``field`` names the input at fault when one is. ``detail`` is written for the person reading it and
never carries internal text (a stack trace, a query, a path on disk).
"""

from __future__ import annotations

import json
from typing import Any

PROBLEM_CONTENT_TYPE = "application/problem+json"
TYPE_PREFIX = "urn:kumiho-ce:problem:"

TITLES = {
    "bad_request": "Bad request",
    "invalid_argument": "Invalid argument",
    "invalid_kref": "Invalid kref",
    "not_found": "Not found",
    "already_exists": "Already exists",
    "conflict": "Conflict",
    "ambiguous_kref": "Ambiguous kref",
    "unauthorized": "Token required",
    "forbidden": "Forbidden",
    "forbidden_origin": "Cross-site request refused",
    "forbidden_host": "Unknown host name",
    "method_not_allowed": "Method not allowed",
    "payload_too_large": "Request body too large",
    "headers_too_large": "Request headers too large",
    "request_timeout": "Request too slow",
    "unsupported_media_type": "Unsupported media type",
    "overloaded": "Too busy",
    "unavailable": "Unavailable",
    "internal": "Internal error",
}


def problem(status: int, code: str, detail: str, *, field: str | None = None, instance: str | None = None,
            **extra: Any) -> dict[str, Any]:
    """The problem object (a plain dict, ready for JSON)."""
    body: dict[str, Any] = {"type": TYPE_PREFIX + code, "title": TITLES.get(code, code.replace("_", " ").capitalize()),
                            "status": status, "detail": detail, "code": code}
    if field:
        body["field"] = field
    if instance:
        body["instance"] = instance
    body.update(extra)
    return body


def problem_bytes(status: int, code: str, detail: str, **kwargs: Any) -> bytes:
    return json.dumps(problem(status, code, detail, **kwargs)).encode()
