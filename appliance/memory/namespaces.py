"""Where the Memory API's namespaces live in the graph (D11). Pure.

Entries of the ``default`` namespace live where Revka's ``revka memory`` reads them, the space
``/<project>/Memory`` of the memory project; every other namespace is a space under it,
``/<project>/Memory/<namespace>``. A space deeper under a namespace's space belongs to that namespace too, so
that a read-only namespace cannot be written through a sub-space. Spaces elsewhere belong to no namespace.
"""

from __future__ import annotations

from appliance.core import names
from appliance.errors import InvalidArgument

DEFAULT = "default"
MEMORY_SPACE = "Memory"  # the space Revka's CLI reads: /<project>/Memory
MAX_NAMESPACE = 64  # characters


def check_namespace(value: object, field: str = "namespace") -> str:
    """A namespace name: a space name of at most 64 characters (letters, digits, '_' and '-')."""
    if isinstance(value, str) and len(value) > MAX_NAMESPACE:
        raise InvalidArgument(f"{field}: a namespace has at most {MAX_NAMESPACE} characters", field=field)
    return names.space_segment(value, field)


def namespace_space(project: str, namespace: str) -> str:
    """``/<project>/Memory`` for the default namespace, else ``/<project>/Memory/<namespace>``."""
    root = f"/{project}/{MEMORY_SPACE}"
    return root if namespace == DEFAULT else f"{root}/{check_namespace(namespace)}"


def namespace_of(project: str, space_path: str) -> str | None:
    """The namespace a space belongs to (``/P/Memory`` → ``default``, ``/P/Memory/ops/x`` → ``ops``), or
    None for a space outside ``/<project>/Memory``."""
    root = f"/{project}/{MEMORY_SPACE}"
    path = "/" + space_path.strip("/")
    if path == root:
        return DEFAULT
    if not path.startswith(root + "/"):
        return None
    return path[len(root) + 1:].split("/", 1)[0]
