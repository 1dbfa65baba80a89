"""The layout tells the architecture: no import cycle between the project's modules, nor between its
folders (`pubsubguard/commands` is a folder of its own: the CLI sits above the rooms it drives; the
entry point `pubsubguard.cli` and `pubsubguard.__main__` belong to that layer), and the Pub/Sub facts are
a leaf that imports nothing of the project."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = {"infra": ROOT / "infra", "validation": ROOT / "validation", "pubsubguard": ROOT / "pubsubguard",
            "pubsub_rules": ROOT / "policies" / "pubsub_rules", "pubsub_facts": ROOT / "policies" / "pubsub_facts"}


def modules() -> dict[str, Path]:
    found = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            name = ".".join((package,) + tuple(p for p in parts if p != "__init__"))
            found[name] = path
    return found


def imports(path: Path, known: set[str]) -> set[str]:
    """Project modules imported by the file (also inside functions: a lazy import is still a dependency)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: imports(path, set(known)) - {name} for name, path in known.items()}


def cycle(edges: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for target in sorted(edges.get(node, ())):
            if state.get(target) == 1:
                return stack[stack.index(target):] + [target]
            if target not in state and (found := visit(target)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(edges):
        if node not in state and (found := visit(node)):
            return found
    return None


ENTRY_POINTS = {"pubsubguard.cli", "pubsubguard.__main__"}


def folder(module: str, known: dict[str, Path]) -> str:
    if module in ENTRY_POINTS:
        return "pubsubguard/commands"
    return known[module].parent.relative_to(ROOT).as_posix()


def test_no_import_cycle_between_modules():
    edges = graph()
    # A package's __init__ importing its own modules is not a cycle of the architecture.
    edges = {m: {t for t in targets if not (m.count(".") == 0 and t.startswith(m + "."))} for m, targets in edges.items()}
    assert cycle(edges) is None


def test_no_import_cycle_between_folders():
    known = modules()
    folders: dict[str, set[str]] = {}
    for module, targets in graph().items():
        source = folder(module, known)
        folders.setdefault(source, set()).update(folder(t, known) for t in targets if folder(t, known) != source)
    assert cycle(folders) is None, folders


def test_the_facts_are_a_leaf():
    edges = graph()
    assert all(not targets for module, targets in edges.items() if module.startswith("pubsub_facts")), edges
