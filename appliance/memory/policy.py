"""The operator's read-only namespaces (``[memory.policy] read_only_namespaces``). Pure.

A change is named by the graph event it records (routing key and kref, see ``appliance.graph``); it touches a
namespace when the kref lies in the namespace's space or a space under it (``appliance.memory.namespaces``),
or when it removes, archives or restores a project or space that holds the namespace's space. Who may still
write: the operator's own restore and import (the ``cli`` door, and jobs of kind ``import``/``restore``
whatever door queued them), since they put back what the operator chose to keep.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from appliance.core import kref as krefs
from appliance.core.caller import Caller
from appliance.errors import KumihoError, PermissionDenied
from appliance.memory import namespaces

# changes of a container that reach every space inside it
CONTAINER_CHANGES = frozenset({"project.archived", "project.restored", "project.deleted", "space.deleted"})
OPERATOR_DOORS = frozenset({"cli"})
OPERATOR_OPERATIONS = frozenset({"import", "restore"})
SETTING = "[memory.policy] read_only_namespaces"


def exempt(caller: Caller) -> bool:
    """The operator's own restore and import write into read-only namespaces too."""
    return caller.door in OPERATOR_DOORS or caller.operation in OPERATOR_OPERATIONS


@dataclass(frozen=True)
class ReadOnlyNamespaces:
    project: str  # the memory project (settings.kumiho.default_project)
    names: frozenset[str]

    @classmethod
    def of(cls, project: str, names: Iterable[str]) -> ReadOnlyNamespaces:
        return cls(project, frozenset(namespaces.check_namespace(n, "read_only_namespaces") for n in names))

    def touched(self, routing_key: str, kref: str) -> str | None:
        """The read-only namespace that the change ``routing_key`` of ``kref`` touches, or None."""
        if not self.names or not kref:
            return None
        try:
            parsed = krefs.parse(kref)
        except KumihoError:  # events name their entity with a valid kref; a bad one is no namespace's
            return None
        if parsed.project != self.project:
            return None
        own = namespaces.namespace_of(self.project, parsed.space_path)
        if own in self.names:
            return own
        if parsed.is_item or routing_key not in CONTAINER_CHANGES:
            return None
        prefix = parsed.space_path.rstrip("/") + "/"
        for name in sorted(self.names):
            space = namespaces.namespace_space(self.project, name)
            if space.startswith(prefix):
                return name
        return None


def refusal(name: str) -> PermissionDenied:
    return PermissionDenied(
        f"namespace {name!r} is read-only ({SETTING}); nothing was written. To write to it, remove {name!r} "
        f"from read_only_namespaces in the configuration and restart the appliance; the operator's own "
        f"`kumiho-ce restore` and `kumiho-ce import` are not refused")
