"""The layout tells the architecture, measured from every import of the code (those inside functions
too: a lazy import is still a dependency):

- no import cycle between modules, nor between folders (packages and sub-packages), with no special
  case: the command line (`pubsubguard/cli.py`, `pubsubguard/commands/`) on top, the three parts
  (`infra/` declare, `policies/` judge with `pubsubguard/check/` running the pack, `validation/` prove)
  beneath it, the shared core (`pubsubguard/core/`) at the bottom, importing none of them;
- the Pub/Sub facts are a leaf that imports nothing of the project;
- the one import name is `pubsubguard`: each folder is named as the build installs it (pyproject.toml).
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The installed name of each folder, as pyproject.toml maps them (test_the_build_maps_the_folders_so).
PACKAGES = {"pubsubguard": ROOT / "pubsubguard", "pubsubguard.infra": ROOT / "infra",
            "pubsubguard.policies": ROOT / "policies", "pubsubguard.validation": ROOT / "validation"}
# The pack's own interpreter runs it from its folder, where its two packages are top-level names.
PACK_NAMES = {"pubsub_rules": "pubsubguard.policies.pubsub_rules", "pubsub_facts": "pubsubguard.policies.pubsub_facts"}
SKIPPED = {ROOT / "policies" / "venv"}  # the pack's virtualenv, when made in the checkout


def modules() -> dict[str, Path]:
    found = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            if any(skipped in path.parents for skipped in SKIPPED):
                continue
            parts = path.relative_to(folder).with_suffix("").parts
            name = ".".join((package,) + tuple(p for p in parts if p != "__init__"))
            found[name] = path
    return found


def imports(path: Path, known: set[str]) -> set[str]:
    """Project modules imported by the file."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            head = name.split(".")[0]
            if head in PACK_NAMES:
                name = PACK_NAMES[head] + name[len(head):]
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


def folder(module: str, known: dict[str, Path]) -> str:
    return known[module].parent.relative_to(ROOT).as_posix()


def folder_graph() -> dict[str, set[str]]:
    known = modules()
    folders: dict[str, set[str]] = {}
    for module, targets in graph().items():
        source = folder(module, known)
        folders.setdefault(source, set()).update(folder(t, known) for t in targets if folder(t, known) != source)
    return folders


def test_no_import_cycle_between_modules():
    assert cycle(graph()) is None


def test_no_import_cycle_between_folders():
    folders = folder_graph()
    assert cycle(folders) is None, folders


def test_the_core_is_the_bottom():
    """The core imports nothing of the command line nor of the three parts (the facts excepted: a leaf)."""
    folders = folder_graph()
    assert folders["pubsubguard/core"] <= {"policies/pubsub_facts", "policies"}, folders["pubsubguard/core"]
    for part in ("infra", "validation", "pubsubguard/check"):
        assert "pubsubguard/commands" not in folders.get(part, set()) and "pubsubguard" not in folders.get(part, set()), (part, folders[part])


def test_the_cycle_finder_finds_a_cycle():
    """The guard can fail: a cycle planted in a copy of the graph is found."""
    edges = {k: set(v) for k, v in graph().items()}
    edges["pubsubguard.core.errors"].add("pubsubguard.cli")
    assert cycle(edges) is not None


def test_the_facts_are_a_leaf():
    edges = graph()
    facts = [m for m in edges if m.startswith("pubsubguard.policies.pubsub_facts")]
    assert facts and all(not edges[m] for m in facts), {m: edges[m] for m in facts}


def test_the_build_maps_the_folders_so():
    """The names this test gives the folders are the ones the wheel installs: one import name."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped = {name: ROOT / folder for name, folder in config["package-dir"].items()}
    assert mapped == PACKAGES
    assert all(name == "pubsubguard" or name.startswith("pubsubguard.") for name in config["packages"])


def test_analysis_never_imports_rendering():
    """The checks, the verdict and the report's document are analysis: none of them imports the renderer
    (`pubsubguard.validation.report`), which only renders the document it is given."""
    edges = graph()
    analysis = ("kernel", "checks", "verdict", "document", "evidence_store", "evidence")
    for name in analysis:
        module = f"pubsubguard.validation.{name}"
        assert "pubsubguard.validation.report" not in edges[module], module
    assert not edges["pubsubguard.validation.report"] & {f"pubsubguard.validation.{n}" for n in ("checks", "verdict", "evidence_store")}


def private_imports(path: Path) -> list[str]:
    """`from <project module> import _name` in the file (line: module._name): a private name crossing a
    module's border."""
    return [f"{node.lineno}: {node.module}.{a.name}" for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.ImportFrom) and node.module
            and node.module.split(".")[0] in {"pubsubguard", *PACK_NAMES}
            for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]


def test_only_public_names_cross_modules(tmp_path):
    """A module uses another's public names only (issue 38): what a module shares, it names without `_`."""
    crossing = {name: found for name, path in modules().items() if (found := private_imports(path))}
    assert crossing == {}
    planted = tmp_path / "planted.py"  # the finder finds one
    planted.write_text("import os\nfrom pubsubguard.validation.probe import ProbeSubscriber, _hidden\n")
    assert private_imports(planted) == ["2: pubsubguard.validation.probe._hidden"]


RUNS_PROGRAMS = {"pubsubguard.core.plan", "pubsubguard.core.engine", "pubsubguard.core.langhost",
                 "pubsubguard.core.langhost_node"}


def reached(edges: dict[str, set[str]], start: str) -> set[str]:
    """Every module `start` imports, directly or through others."""
    seen, todo = set(), [start]
    while todo:
        for target in edges.get(todo.pop(), ()):
            if target not in seen:
                seen.add(target)
                todo.append(target)
    return seen


def test_reading_a_plan_runs_no_program():
    """Issue 47: the plan file (written, read back, retargeted) is apart from the program runner; reading a plan
    reaches neither the language host nor the engine, and the commands and the job that only read plans
    (`run`'s steps, the target's retarget) import the plan file, not the runner."""
    edges = graph()
    assert not reached(edges, "pubsubguard.core.plan_file") & RUNS_PROGRAMS
    for reader in ("pubsubguard.validation.target", "pubsubguard.commands.run"):
        assert "pubsubguard.core.plan_file" in edges[reader] and "pubsubguard.core.plan" not in edges[reader], reader
    # the guard can fail: the runner planted among the plan file's imports is reached
    planted = {k: set(v) for k, v in edges.items()}
    planted["pubsubguard.core.signatures"].add("pubsubguard.core.engine")
    assert reached(planted, "pubsubguard.core.plan_file") & RUNS_PROGRAMS


def test_no_command_imports_another():
    """Issue 47: what commands share (options, the pre-flight, `run_command`) lives beside them, never in one of
    them: a command module imports no other command module."""
    from pubsubguard.cli import COMMANDS

    edges = graph()
    commands = {f"pubsubguard.commands.{name}" for name in COMMANDS}
    crossing = {module: sorted(edges[module] & commands) for module in sorted(commands) if edges[module] & commands}
    assert crossing == {}
    planted = {**edges, "pubsubguard.commands.run": edges["pubsubguard.commands.run"] | {"pubsubguard.commands.verify"}}
    assert {m for m in commands if planted[m] & commands} == {"pubsubguard.commands.run"}  # the guard can fail
