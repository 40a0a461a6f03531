"""The layering the code relies on: a pure core, and the layers under the services on the ports, not the adapters.

Read from the source (imports as written), so a violation names the file and line without importing anything.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import appliance

ROOT = Path(appliance.__file__).parent


def _imports(path: Path) -> Iterator[tuple[int, str, bool]]:
    """(line, module, at run time) of every import in ``path``; imports under ``if TYPE_CHECKING:`` are for
    annotations only."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    typing_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and ast.unparse(node.test) in ("TYPE_CHECKING", "typing.TYPE_CHECKING"):
            typing_only.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, id(node) not in typing_only
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.lineno, node.module, id(node) not in typing_only


def _modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def test_the_core_imports_only_the_standard_library_and_itself() -> None:
    allowed = ("appliance.core", "appliance.errors")
    found = [f"{path.relative_to(ROOT.parent)}:{line} imports {module}"
             for path in _modules("core") for line, module, runtime in _imports(path)
             if runtime and module.split(".")[0] not in sys.stdlib_module_names
             and not any(module == a or module.startswith(a + ".") for a in allowed)]
    assert not found, "appliance/core must stay free of storage, model and web imports:\n" + "\n".join(found)


def test_the_layers_under_the_services_use_the_ports_not_the_model_adapters() -> None:
    # memory renders its prompts (Markdown templates shipped in appliance/inference/prompts); nothing else of
    # the adapter package is imported outside the composition root (app, cli, doctor)
    # The OpenAI-compatible endpoint's model calls (admin_api/openai_calls.py) are the one exception: that door
    # serves the model itself, so it runs the llama adapter's raw completion (text, finish reason, token counts)
    # and its grammar check, which the ChatModel port does not offer.
    allowed = {"appliance.inference.prompts"}
    door = {"appliance.inference.chat", "appliance.inference.llm", "appliance.inference.grammar"}
    found = [f"{path.relative_to(ROOT.parent)}:{line} imports {module}"
             for package in ("core", "graph", "search", "memory", "admin_api", "mcp_api")
             for path in _modules(package) for line, module, _ in _imports(path)
             if module.startswith("appliance.inference") and module not in allowed
             and not (path.name == "openai_calls.py" and module in door)
             and not (module == "appliance.inference" and _only_prompts(path))]
    assert not found, "import the model interfaces from appliance.core.ports:\n" + "\n".join(found)


def _only_prompts(path: Path) -> bool:
    """``from appliance.inference import prompts`` and nothing else from the package itself."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return all({alias.name for alias in node.names} <= {"prompts"} for node in ast.walk(tree)
               if isinstance(node, ast.ImportFrom) and node.module == "appliance.inference")


def test_no_two_modules_import_each_other_at_load_time() -> None:
    """Module-level imports between appliance modules form no cycle (imports inside functions do not count:
    they run later). A cycle works or fails by import order alone."""
    modules = {".".join(path.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__"): path
               for path in ROOT.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:  # the module level only
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                submodules = {f"{node.module}.{alias.name}" for alias in node.names} & modules.keys()
                found |= submodules or {node.module}  # `from package import module` needs the module
            elif isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
        # a package's __init__ runs before its modules anyway: importing one's own package is no cycle
        graph[name] = {m for m in found & modules.keys() if m != name and not name.startswith(m + ".")}
    cycles = [cycle for name in graph if (cycle := _cycle_from(name, graph))]
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(cycle) for cycle in cycles)


def _cycle_from(start: str, graph: dict[str, set[str]]) -> list[str] | None:
    """A path of imports from ``start`` back to ``start``, if there is one."""
    stack, seen = [(start, [start])], {start}
    while stack:
        name, path = stack.pop()
        for imported in sorted(graph[name]):
            if imported == start:
                return [*path, start]
            if imported not in seen:
                seen.add(imported)
                stack.append((imported, [*path, imported]))
    return None
