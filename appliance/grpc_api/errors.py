"""The appliance's errors as gRPC status codes, with the same messages every other door gives.

Kumiho's SDK retries UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL and RESOURCE_EXHAUSTED three times, so a
deterministic refusal never uses them, and a failure the appliance did not foresee answers UNKNOWN (not
retried) with a fixed text: its details stay in the appliance's log."""

from __future__ import annotations

import grpc

from appliance import errors

UNEXPECTED = "internal error; the appliance's log has the details"


class Unimplemented(errors.KumihoError):
    """A method of Kumiho's service that this appliance does not serve."""

    code = "unimplemented"


class Exhausted(errors.KumihoError):
    """A bounded resource of the gRPC door is in use (the event streams open at once): try again later."""

    code = "resource_exhausted"


_CODES: tuple[tuple[type[errors.KumihoError], grpc.StatusCode], ...] = (
    (errors.InvalidArgument, grpc.StatusCode.INVALID_ARGUMENT),  # InvalidKref too
    (errors.NotFound, grpc.StatusCode.NOT_FOUND),
    (errors.AlreadyExists, grpc.StatusCode.ALREADY_EXISTS),
    (errors.Conflict, grpc.StatusCode.FAILED_PRECONDITION),  # AmbiguousKref too: the message lists candidates
    (errors.PermissionDenied, grpc.StatusCode.PERMISSION_DENIED),
    (errors.Unavailable, grpc.StatusCode.UNAVAILABLE),  # transient by definition: the SDK's retry is right
    (Unimplemented, grpc.StatusCode.UNIMPLEMENTED),  # permanent: the SDK does not retry it
    (Exhausted, grpc.StatusCode.RESOURCE_EXHAUSTED),  # the SDK retries it, as it should: a slot frees up
)


def status_of(error: errors.KumihoError) -> grpc.StatusCode:
    """The status code for a domain error; one without its own code (storage, configuration) is UNKNOWN."""
    for kind, code in _CODES:
        if isinstance(error, kind):
            return code
    return grpc.StatusCode.UNKNOWN
