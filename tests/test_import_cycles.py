"""No import cycles between Flarebot's modules, lazy imports (inside functions) included.

A cycle is a layering mistake that a lazy import only hides: the lower module reaches up
into one that imports it. Each app's modules import downwards (docs/architecture.md).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("attachments", "conversations", "flarebot", "memory", "notifications", "settings_ui", "tasks", "tools")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" not in path.parts:
                found[_module_name(path)] = path
    return found


def _imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    is_package = path.name == "__init__.py"
    targets: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                targets.add(full if full in known else base)
    # Importing a.b.c runs a/__init__ and a/b/__init__ first: those are imported too.
    targets |= {".".join(t.split(".")[:i]) for t in set(targets) for i in range(1, t.count(".") + 1)}
    # A module's own packages are where Python finds it, not dependencies it chose.
    own_packages = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    return {t for t in targets if t in known and t != name and t not in own_packages}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(graph[node]):
            if state.get(target) == 1:
                return [*stack[stack.index(target) :], target]
            if target not in state and (found := visit(target)) is not None:
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_no_module_imports_one_that_imports_it_back():
    known = _modules()
    graph = {name: _imports(name, path, known) for name, path in known.items()}

    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_the_check_finds_a_cycle():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
