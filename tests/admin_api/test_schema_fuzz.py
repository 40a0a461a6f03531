"""The HTTP API fuzzed from its own OpenAPI document: schemathesis reads ``/api/schema`` of a real appliance
(real stores in a tmp directory, real HTTP) and sends every operation generated requests, valid ones and
broken ones (wrong types, bounds overstepped, missing fields). Every answer: no 5xx; a status the schema
documents for that operation; the content type and body the schema gives for that status; broken input refused
with a 4xx; no internal text in an error.

The operations come from the served document, so a new route is fuzzed as soon as it exists. Valid requests
name the seeded memories and job (by parameter name: krefs, ``job_id``, ``project``) often enough to get past
"not found". A short deterministic run is part of ``make test``; ``make test-fuzz-api`` runs many more examples
(``KUMIHO_API_FUZZ_EXAMPLES`` per operation and mode, default 300) and prints the figures as JSON."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote_plus

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from appliance.admin_api.openai_compat import ROUTE_STATUSES
from tests.inprocess import InProcess, serve_in_process
from tests.mcp_api.hostile import INTERNAL, RawMcp

SHORT_EXAMPLES = 6
LONG_EXAMPLES = int(os.environ.get("KUMIHO_API_FUZZ_EXAMPLES", "300"))
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_headers_conformance,
          response_schema_conformance, negative_data_rejection]
TIMEOUT = 30.0  # seconds for one answer; an event stream is read for STREAM_SECONDS, then cut
STREAM_SECONDS = 1.0
# Broken input must be refused: a 4xx of these (schemathesis' list, plus the refusals of the appliance's front:
# a request too slow, a body or URL too large, headers too large).
REFUSALS = ["400", "401", "403", "404", "405", "406", "408", "409", "413", "414", "415", "422", "428", "429", "431"]
# Deleting runs last, so the operations before it still find the seeded memories.
_ORDER = {"GET": 0, "HEAD": 0, "POST": 1, "PUT": 1, "PATCH": 1, "DELETE": 2}


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with serve_in_process(tmp_path_factory.mktemp("api-fuzz") / "data", None,
                          inference={"chat_model": "none"}) as running:
        yield running


@pytest.fixture(scope="module")
def known(app: InProcess) -> dict[str, list[str]]:
    """Values that exist, by parameter name: two memories (one derived from the other, in a bundle, tagged)
    and a finished job."""
    mcp = RawMcp(app.base_url)
    try:
        first = mcp.call("kumiho_memory_store", {
            "project": "demo", "space_path": "notes", "title": "Espresso", "user_text": "Espresso, no sugar.",
            "tags": ["coffee"], "bundle_name": "breakfast"}).payload
        assert first and first.get("stored"), first
        second = mcp.call("kumiho_memory_store", {
            "project": "demo", "space_path": "notes", "title": "Morning", "user_text": "A walk before coffee.",
            "source_revision_krefs": [first["revision_kref"]]}).payload
        assert second and second.get("stored"), second
        job = mcp.call("kumiho_memory_dream_state", {"project": "demo", "dry_run": True, "maintain_graph": True})
        assert job.payload and "error" not in job.payload, job.text
    finally:
        mcp.close()
    jobs = [j.id for j in app.services.jobs.list()]
    assert jobs, "the seed started no job"
    krefs = [first["item_kref"], first["revision_kref"], second["item_kref"], second["revision_kref"],
             first["bundle_kref"], first["artifact_kref"]]
    return {"kref": krefs, "job_id": jobs, "project": ["demo"], "space_path": ["/demo/notes", "demo/notes"],
            "parent_path": ["/demo", "/demo/notes"], "space": ["/demo/notes", "demo"]}


def _known_for(name: str, known: dict[str, list[str]]) -> list[str] | None:
    if name.endswith("kref") or name.endswith("krefs"):
        return known["kref"]
    return known.get(name)


def _with_known(case: Any, known: dict[str, list[str]], pick: st.DataObject) -> Any:
    """The case with some of its parameters and body fields set to values that exist."""
    for container in (case.query, case.path_parameters, case.body if isinstance(case.body, dict) else None):
        for name in sorted(container or {}):
            values = _known_for(name, known)
            if values and pick.draw(st.booleans()):
                value = pick.draw(st.sampled_from(values))
                container[name] = [value] if isinstance(container[name], list) else value
    return case


def _streams(operation: Any) -> bool:
    responses = operation.definition.raw.get("responses", {})
    return any(media.startswith("text/event-stream") for answer in responses.values()
               for media in (answer.get("content") or {}))


def _leaks(response: Any) -> list[str]:
    """Internal words in an error answer, except those the request itself carried (an error may quote the
    value it refuses: a kref 'LANCE ERROR' is named back as given)."""
    if response.status_code < 400:
        return []
    lowered = response.text.casefold()
    sent = _sent(response.request)
    return [word for word in INTERNAL if word in lowered and word not in sent]


def _no_chat_model(response: Any) -> bool:
    """The documented 503 of the OpenAI-compatible chat route on an appliance without a chat model (this one):
    the only 5xx the fuzzing expects."""
    if response.status_code != 503 or not response.request.url.endswith("/v1/chat/completions"):
        return False
    return bool(response.json().get("error", {}).get("code") == "model_unavailable")


def _sent(request: Any) -> str:
    body = request.body or b""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    return (unquote_plus(str(request.url)) + " " + text + " " + json.dumps(dict(request.headers))).casefold()


def _requests(operation: Any, mode: GenerationMode, known: dict[str, list[str]], examples: int,
              counts: Counter[str], *, quick: bool) -> Any:
    """A hypothesis test sending ``examples`` generated requests to one operation, checking each answer."""
    timeout = STREAM_SECONDS if _streams(operation) else TIMEOUT

    @settings(max_examples=examples, deadline=None, database=None, derandomize=quick,
              phases=[Phase.explicit, Phase.generate] if quick else list(Phase),
              suppress_health_check=list(HealthCheck), print_blob=True)
    @given(case=operation.as_strategy(generation_mode=mode), pick=st.data())
    def one_request(case: Any, pick: st.DataObject) -> None:
        if mode is GenerationMode.POSITIVE:
            case = _with_known(case, known, pick)
        response = case.call(timeout=timeout)
        counts["requests"] += 1
        counts[f"status_{response.status_code // 100}xx"] += 1
        case.validate_response(response, checks=[c for c in CHECKS if not (c is not_a_server_error
                                                                            and _no_chat_model(response))])
        leaked = _leaks(response)
        assert not leaked, f"internal text {leaked} in {response.status_code}: {response.text[:500]}"

    return one_request


def _fuzz(app: InProcess, known: dict[str, list[str]], examples: int, figures: dict[str, Counter[str]],
          *, quick: bool) -> dict[str, str]:
    """Run every operation of the served schema in both modes; what failed, by operation and mode."""
    config = SchemathesisConfig.from_dict({"checks": {"negative_data_rejection": {"expected-statuses": REFUSALS}}})
    schema = schemathesis.openapi.from_url(app.base_url + "/api/schema", timeout=TIMEOUT, config=config)
    operations = [result.ok() for result in schema.get_all_operations()]
    operations.sort(key=lambda op: (_ORDER.get(op.method.upper(), 1), op.path))
    failures: dict[str, str] = {}
    for operation in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):
            label = f"{operation.label} ({mode.value})"
            counts = figures.setdefault(label, Counter())
            try:
                _requests(operation, mode, known, examples, counts, quick=quick)()
            except Unsatisfiable:
                counts["no_broken_input"] += 1  # nothing to break: the operation takes no input
            except (Exception, BaseExceptionGroup) as exc:  # schemathesis reports its findings as a group
                failures[label] = _shown(exc)
    return failures


def _shown(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    text = re.sub(r"http://127\.0\.0\.1:\d+", "http://127.0.0.1:9190", text)
    return text[:4000] + (" …" if len(text) > 4000 else "")


def _report(failures: dict[str, str]) -> str:
    return f"{len(failures)} operation(s) failed: {sorted(failures)}\n\n" + "\n\n".join(
        f"=== {label}\n{text}" for label, text in sorted(failures.items()))


@pytest.fixture(scope="module")
def figures() -> Iterator[dict[str, Counter[str]]]:
    found: dict[str, Counter[str]] = {}
    yield found
    if found:
        total = sum(found.values(), Counter())
        print("\n" + json.dumps({"api_fuzz": {"operations_and_modes": len(found), **total},
                                 "per_operation": found}, sort_keys=True))


def test_the_schema_documents_every_error_as_a_problem(app: InProcess) -> None:
    import httpx

    document = httpx.get(app.base_url + "/api/schema", timeout=30).json()
    assert document["components"]["schemas"]["Problem"]["required"] == ["type", "title", "status", "detail", "code"]
    operations = [(path, method, op) for path, item in document["paths"].items() for method, op in item.items()]
    assert len(operations) >= 7
    for path, method, operation in operations:
        responses = operation["responses"]
        for status in ("400", "403", "421", "500", "503"):
            assert status in responses, (method, path, status)
        errors = {status: answer for status, answer in responses.items() if status[0] in "45"}
        for status, answer in errors.items():
            if path.startswith("/v1/") and status in ROUTE_STATUSES:  # OpenAI's shape from the route, the door's
                assert list(answer["content"]) == ["application/json", "application/problem+json"], (path, status)
                assert answer["content"]["application/json"]["schema"]["$ref"].endswith("/OpenAIError")
                continue
            assert list(answer["content"]) == ["application/problem+json"], (method, path, status)
        if operation.get("parameters") or operation.get("requestBody"):
            assert "400" in errors, (method, path)


def test_every_write_documents_the_doors_413_and_415_and_answers_415_to_a_form(app: InProcess) -> None:
    """The door refuses a form's content type (415) and a too large body (413) before any route runs, so every
    operation that may change something documents both, even one that takes no body."""
    import httpx

    document = httpx.get(app.base_url + "/api/schema", timeout=30).json()
    writes = [(path, method) for path, item in document["paths"].items() for method in item
              if method in ("post", "put", "patch", "delete")]
    assert {("/api/v1/items/deprecate", "post"), ("/api/v1/jobs/{job_id}/cancel", "post"),
            ("/api/v1/items/by-kref", "delete")} <= set(writes), writes
    for path, method in writes:
        responses = document["paths"][path][method]["responses"]
        assert {"413", "415"} <= set(responses), (method, path, sorted(responses))
        url = app.base_url + re.sub(r"\{[^}]+\}", "x", path)
        answer = httpx.request(method.upper(), url, headers={"Content-Type": "application/x-www-form-urlencoded"},
                               timeout=30)
        assert answer.status_code == 415, (method, path, answer.status_code, answer.text)
        assert answer.headers["content-type"].startswith("application/problem+json")


def test_the_event_feed_is_documented_as_a_stream_of_events(app: InProcess) -> None:
    import httpx

    document = httpx.get(app.base_url + "/api/schema", timeout=30).json()
    content = document["paths"]["/api/v1/events"]["get"]["responses"]["200"]["content"]
    assert list(content) == ["text/event-stream"], content
    event = content["text/event-stream"]["schema"]
    assert event["type"] == "object" and set(event["properties"]) == {"id", "event", "data", "retry"}, event


def test_every_operation_answers_as_its_schema_says(app: InProcess, known: dict[str, list[str]],
                                                    figures: dict[str, Counter[str]]) -> None:
    failures = _fuzz(app, known, SHORT_EXAMPLES, figures, quick=True)
    if failures:
        pytest.fail(_report(failures), pytrace=False)
    assert all(counts["requests"] or counts["no_broken_input"] for counts in figures.values()), figures


@pytest.mark.long
@pytest.mark.timeout(2 * 3600)  # 300 examples × ~60 operation modes: far beyond the per-test default
def test_every_operation_answers_as_its_schema_says_at_length(app: InProcess, known: dict[str, list[str]],
                                                              figures: dict[str, Counter[str]]) -> None:
    failures = _fuzz(app, known, LONG_EXAMPLES, figures, quick=False)
    if failures:
        pytest.fail(_report(failures), pytrace=False)
