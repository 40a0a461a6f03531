"""One small error tree for the whole appliance.

    KumihoError                   every error a user or an agent can act on
    ├── InvalidArgument           bad input; names the field and the fix
    │   └── InvalidKref           a kref that does not parse
    ├── NotFound                  the named entity does not exist
    ├── AlreadyExists             create with exists_error=true, duplicate bundle member
    ├── Conflict                  the request is valid but the current state forbids it
    │   └── AmbiguousKref         a short kref matches several items (D8)
    ├── PermissionDenied          the operator's policy forbids this write (a read-only namespace)
    ├── ConfigError               a configuration file or variable is wrong
    ├── DataDirError              the data directory cannot be used
    │   └── DataDirInUse          another kumiho-ce process holds it
    ├── StorageError              the database failed; the write was rolled back
    └── Unavailable               cannot answer right now (e.g. the search index is being repaired); retry

Adapters translate their libraries' exceptions into these (``raise … from exc``); surfaces map ``code``
to their own channel (HTTP status, MCP tool error, gRPC status).
"""

from __future__ import annotations


class KumihoError(Exception):
    code = "internal"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def to_dict(self) -> dict[str, object]:
        body: dict[str, object] = {"code": self.code, "message": self.message}
        if self.field:
            body["field"] = self.field
        return body


class InvalidArgument(KumihoError):
    code = "invalid_argument"


class InvalidKref(InvalidArgument):
    code = "invalid_kref"


class NotFound(KumihoError):
    code = "not_found"


class AlreadyExists(KumihoError):
    code = "already_exists"


class Conflict(KumihoError):
    code = "conflict"


class AmbiguousKref(Conflict):
    code = "ambiguous_kref"

    def __init__(self, message: str, candidates: list[str]) -> None:
        super().__init__(message)
        self.candidates = candidates

    def to_dict(self) -> dict[str, object]:
        return {**super().to_dict(), "candidates": self.candidates}


class PermissionDenied(KumihoError):
    code = "permission_denied"


class ConfigError(KumihoError):
    code = "config_error"


class DataDirError(KumihoError):
    code = "data_dir_error"


class DataDirInUse(DataDirError):
    code = "data_dir_in_use"

    def __init__(self, message: str, pid: int | None = None) -> None:
        super().__init__(message)
        self.pid = pid


class StorageError(KumihoError):
    code = "storage_error"


class Unavailable(KumihoError):
    code = "unavailable"
