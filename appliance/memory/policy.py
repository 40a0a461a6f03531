"""The operator's read-only namespaces (``[memory.policy] read_only_namespaces``). Pure.

A change is named by the graph event it records (routing key and kref, see ``appliance.graph``); it touches a
namespace when the kref lies in the namespace's space or a space under it (``appliance.memory.namespaces``),
or when it removes, archives or restores a project or space that holds the namespace's space. No door and no
job is exempt: an import that would write into one is refused before it writes anything
(``appliance.portability.importer``), and a restore replaces the data directory without writing through the
graph. To change a read-only namespace, the operator takes it out of the setting and restarts.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from appliance.core import kref as krefs
from appliance.errors import KumihoError, PermissionDenied
from appliance.memory import namespaces

# changes of a container that reach every space inside it
CONTAINER_CHANGES = frozenset({"project.archived", "project.restored", "project.deleted", "space.deleted"})
SETTING = "[memory.policy] read_only_namespaces"


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


def refusal(name: str, what: str = "") -> PermissionDenied:
    """``what`` says more about the refused change (an import names its lines)."""
    return PermissionDenied(
        f"namespace {name!r} is read-only ({SETTING}); nothing was written{what}. To write to it, remove "
        f"{name!r} from read_only_namespaces in the configuration and restart the appliance")
