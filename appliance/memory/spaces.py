"""Where memories live: space paths from tool arguments (reference §4.6, §4.8). Pure."""

from __future__ import annotations

import hashlib
import re
import unicodedata

from appliance.core import kref as krefs
from appliance.core import names
from appliance.errors import InvalidArgument
from appliance.memory.client import Client

_SLUG_DROP = re.compile(r"[^\w\s-]")
_SLUG_GAPS = re.compile(r"[\s_-]+")


def slug(text: str, limit: int = 48) -> str:
    """A name segment from free text: lower-case words joined by hyphens ("Chose gRPC!" → "chose-grpc")."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    words = _SLUG_GAPS.sub("-", _SLUG_DROP.sub(" ", folded)).strip("-")
    return words[:limit].rstrip("-") or "memory"


def memory_item_name(base_text: str, *texts: str) -> str:
    """``<slug>-<sha1[:8]>`` (≤ 64 characters): readable, and distinct for distinct contents."""
    digest = hashlib.sha1("".join((*texts, base_text)).encode()).hexdigest()[:8]
    return f"{slug(base_text, 55)}-{digest}"


def scope(project: str, space_path: str | None) -> str:
    """A recall scope as a space path: ``"a/b"``, ``"/a/b"`` and ``"<project>/a/b"`` all mean
    ``/<project>/a/b``; the project's own name (or nothing) means the whole project."""
    raw = (space_path or "").strip().strip("/")
    if not raw or raw == project:
        return "/" + check_project(project)
    if not raw.startswith(project + "/"):
        raw = f"{project}/{raw}"
    return krefs.space_path(krefs.parse_space_path("/" + raw, "space_paths"))


def storage_space(project: str, space_path: str | None = None, space_hint: str | None = None) -> str:
    """The space a memory is written to: ``space_path`` as given (relative to the project), else the
    ``space_hint`` slugified per segment ("Agent Pool/Transport" → ``agent-pool/transport``), else the
    project root."""
    if space_path and space_path.strip().strip("/"):
        return scope(project, space_path)
    if space_hint and space_hint.strip().strip("/"):
        segments = [slug(s, 64) for s in space_hint.strip().strip("/").split("/") if s.strip()]
        if segments and segments[0] == project.casefold():
            segments = segments[1:]
        return scope(project, "/".join(segments))
    return "/" + project


def space_of(path: str) -> str:
    """``/P/a/b`` → ``P/a/b``: how results show a space (no leading slash)."""
    return path.lstrip("/")


def check_project(project: str, field: str = "project") -> str:
    """A project name as a kref segment: checked before anything is written (a project names a folder
    under the data directory's artifacts, so ``../x`` must never reach the file system)."""
    if not project.strip():
        raise InvalidArgument(f"{field}: give a project name such as 'CognitiveMemory'", field=field)
    return names.project_name(project.strip(), field)


def project_for(project: str | None, client: Client) -> str:
    """The call's project: the ``project`` it names, else the client's default (the ``X-Kumiho-Project``
    header, or the configured default project); either is checked, and the error says which one was bad."""
    if project:
        return check_project(project)
    try:
        return check_project(client.project)
    except InvalidArgument as exc:
        raise InvalidArgument(f"{exc.message} (from the X-Kumiho-Project header or the configured default "
                              "project; fix it or pass a valid 'project' argument)", field="project") from None


def scopes(project: str, space_paths: list[str] | None) -> tuple[str, ...]:
    """The normalised, de-duplicated spaces a call names (empty: the whole project)."""
    return tuple(dict.fromkeys(scope(project, s) for s in space_paths or []))
