"""The error answers every route can give, written into the OpenAPI document.

Litestar documents a route's success and, for a route with parameters, its own validation error shape. The
appliance answers every error as an RFC 9457 problem document instead, and some errors come from in front of
the routes (the Host and Origin checks, the token guard, the body bound), so no handler could declare them.
``document_problems`` adds them to every operation, once, from what the operation takes and its method (the
door answers 413 and 415 to any method that may change something, with or without a body): a client reading
the schema sees every status it can receive, each with the problem shape. It also gives a streamed answer
(the event feed) its schema: text.
"""

from __future__ import annotations

from collections.abc import Iterable

from litestar.openapi.spec import Components, OpenAPI, OpenAPIMediaType, OpenAPIResponse, Operation, Reference, Schema
from litestar.openapi.spec.enums import OpenAPIType

from appliance.server.problems import PROBLEM_CONTENT_TYPE

PROBLEM = "Problem"

# status → what it means, for the schema's readers
_MEANING = {
    400: "Bad input: a parameter or body field is missing, of the wrong type or out of its bounds (`field` "
         "names it), or the request has more than one Host header",
    401: "The appliance's token is missing or wrong (needed beyond loopback, or with require_token)",
    403: "Refused: a web page of another origin, or a cross-site request that would change something",
    404: "Not found: what the request names does not exist",
    408: "The request's headers or body arrived too slowly",
    409: "Conflict: it exists already, or the change is refused in its present state",
    413: "The request body is larger than the configured bound (http.max_body_bytes), whatever the route takes",
    415: "A request that may change something came with a form's or plain text's Content-Type, or with a body "
         "and no Content-Type, even without a body (send JSON with Content-Type: application/json)",
    421: "The Host header does not name this appliance",
    431: "The request's headers are larger than the configured bound",
    500: "A fault in the appliance (the detail says only to see its log)",
    503: "Busy (too many open connections) or briefly unavailable (the search index is rebuilt); retry later",
}
# from in front of every route (the connection limits, the Host and Origin checks) and a fault, whatever the route
_ALWAYS = (400, 403, 408, 421, 431, 500, 503)
_STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def problem_schema() -> Schema:
    """RFC 9457's members plus the appliance's ``code`` and ``field``; other members may follow (the RFC allows
    extensions, e.g. the candidates of an ambiguous kref)."""
    return Schema(
        type=OpenAPIType.OBJECT,
        title="Problem",
        description="An error (RFC 9457 problem details).",
        required=["type", "title", "status", "detail", "code"],
        properties={
            "type": Schema(type=OpenAPIType.STRING, description="urn:kumiho-ce:problem:<code>"),
            "title": Schema(type=OpenAPIType.STRING, description="a short summary of the kind of problem"),
            "status": Schema(type=OpenAPIType.INTEGER, minimum=400, maximum=599, description="the HTTP status"),
            "detail": Schema(type=OpenAPIType.STRING, description="what is wrong and how to fix it"),
            "code": Schema(type=OpenAPIType.STRING, description="a stable, machine-readable error code"),
            "field": Schema(type=OpenAPIType.STRING, description="the parameter or field at fault, when known"),
            "instance": Schema(type=OpenAPIType.STRING, description="the request path"),
        },
    )


def error_statuses(method: str, operation: Operation, open_paths: Iterable[str], path: str) -> list[int]:
    """The error statuses ``method path`` can answer, from what it takes."""
    takes_input = bool(operation.parameters) or operation.request_body is not None
    statuses = set(_ALWAYS)
    if path not in open_paths:
        statuses.add(401)
    if takes_input:
        statuses.add(404)
    if operation.request_body is not None or method.upper() in _STATE_CHANGING:
        statuses |= {413, 415}  # the door answers them before the route: a form type or no type at all is 415
    if method.upper() in _STATE_CHANGING:
        statuses |= {404, 409}
    return sorted(statuses)


def document_problems(openapi: OpenAPI, *, open_paths: Iterable[str] = ()) -> OpenAPI:
    """Every operation's error answers, each a problem document (replacing Litestar's own 400 shape)."""
    open_paths = frozenset(open_paths)
    components = openapi.components if isinstance(openapi.components, Components) else Components()
    components.schemas = {**(components.schemas or {}), PROBLEM: problem_schema()}
    openapi.components = components
    problem = {PROBLEM_CONTENT_TYPE: OpenAPIMediaType(schema=Reference(ref=f"#/components/schemas/{PROBLEM}"))}
    for path, item in (openapi.paths or {}).items():
        for method in ("get", "put", "post", "delete", "options", "head", "patch", "trace"):
            operation = getattr(item, method, None)
            if not isinstance(operation, Operation):
                continue
            responses = operation.responses = dict(operation.responses or {})
            _describe_streams(responses)
            wanted = {str(status) for status in error_statuses(method, operation, open_paths, path)}
            wanted |= {status for status in responses if status[:1] in "45"}  # declared by the handler
            for status in sorted(wanted):
                declared = responses.get(status)
                description = _MEANING.get(int(status)) or getattr(declared, "description", None) or "An error"
                responses[status] = OpenAPIResponse(description=description, content=dict(problem))
    return openapi


# One server-sent event, as clients (and schema checkers) read a text/event-stream: its fields.
SERVER_SENT_EVENT = Schema(type=OpenAPIType.OBJECT, description="one server-sent event of the stream", properties={
    "id": Schema(type=OpenAPIType.STRING, description="resume after it with Last-Event-ID"),
    "event": Schema(type=OpenAPIType.STRING, description="the event's kind, e.g. item.created or job.progress"),
    "data": Schema(type=OpenAPIType.STRING, description="the event as JSON"),
    "retry": Schema(type=OpenAPIType.INTEGER, description="milliseconds to wait before reconnecting")})


def _describe_streams(responses: dict[str, OpenAPIResponse | Reference]) -> None:
    """A streamed answer (the event feed's ``text/event-stream``) is a sequence of events, each described by
    ``SERVER_SENT_EVENT``; other text answers are text. Litestar gives such bodies no schema."""
    for answer in responses.values():
        for media_type, media in ((answer.content or {}) if isinstance(answer, OpenAPIResponse) else {}).items():
            if media_type.startswith("text/event-stream") and _empty(media.schema):
                media.schema = SERVER_SENT_EVENT
            elif media_type.startswith("text/") and _empty(media.schema):
                media.schema = Schema(type=OpenAPIType.STRING)


def _empty(schema: Schema | Reference | None) -> bool:
    return schema is None or (isinstance(schema, Schema) and schema.to_schema() == {})
