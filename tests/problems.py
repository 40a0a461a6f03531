"""Reading the appliance's HTTP errors (RFC 9457 problem responses) in tests."""

from __future__ import annotations

import json
from typing import Any


def problem(answer: Any) -> dict[str, Any]:
    """The problem body of an httpx/Litestar response, after checking it is one: the media type, the RFC's
    members (type, title, status, detail) and the appliance's code. ``message`` repeats ``detail``."""
    assert answer.headers["content-type"].startswith("application/problem+json"), answer.headers
    return problem_of(answer.status_code, answer.json())


def problem_of(status: int, body: dict[str, Any] | bytes) -> dict[str, Any]:
    found = json.loads(body) if isinstance(body, bytes) else body
    assert found["status"] == status and found["type"] == "urn:kumiho-ce:problem:" + found["code"], found
    assert found["title"] and found["detail"], found
    return {**found, "message": found["detail"]}
