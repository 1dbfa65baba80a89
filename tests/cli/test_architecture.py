"""The layout tells the architecture, measured from every import of the code (those inside functions
too: a lazy import is still a dependency):

- no import cycle between modules, nor between folders (packages and sub-packages), with no special
  case: the command line (`pubsubguard/cli.py`, `pubsubguard/commands/`) on top, the three parts
  (`infra/` declare, `policies/` judge with `pubsubguard/judging/` running the pack, `validation/` prove)
  beneath it, the shared core (`pubsubguard/core/`) at the bottom, importing none of them;
- the Pub/Sub facts are a leaf that imports nothing of the project;
- the one import name is `pubsubguard`: each folder is named as the build installs it (pyproject.toml).
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

from support import ROOT
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


def imports(path: Path, known: set[str], module: str = "") -> set[str]:
    """Project modules imported by the file (`module`: its own name, which relative imports start from)."""
    found = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level > 0:  # `from ..checks import kernel`: from the package
            base = ".".join(package.split(".")[:len(package.split(".")) - (node.level - 1)])
            base = f"{base}.{node.module}" if node.module else base
            names = [base] + [f"{base}.{alias.name}" for alias in node.names]
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
    return {name: imports(path, set(known), name) - {name} for name, path in known.items()}


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
    for part in ("infra", "validation", "pubsubguard/judging"):
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
    (`pubsubguard.validation.report.render`), which only renders the document it is given."""
    edges = graph()
    render = "pubsubguard.validation.report.render"
    analysis = [m for m in edges if m.startswith(("pubsubguard.validation.checks", "pubsubguard.validation.evidence"))]
    analysis.append("pubsubguard.validation.report.document")
    assert [m for m in analysis if render in edges[m]] == []


# what reads evidence or judges it: the job (validation/judgement.py) calls these, the report never does (issue 66)
READS_OR_JUDGES = {"pubsubguard.validation.evidence.store", "pubsubguard.validation.checks.run",
                   "pubsubguard.validation.checks.verdict", "pubsubguard.validation.checks.buckets",
                   "pubsubguard.validation.checks.sorted_input", "pubsubguard.validation.judgement"}


def report_reading_or_judging(edges: dict[str, set[str]]) -> list[str]:
    """Every import of a report module (validation/report/) of what reads evidence or judges it: `module -> imported`."""
    return [f"{m} -> {t}" for m, targets in sorted(edges.items()) if m.startswith("pubsubguard.validation.report")
            for t in sorted(targets & READS_OR_JUDGES)]


def test_the_report_only_reports():
    """The report arranges and renders a judged run (judgement.JudgedRun); it neither reads evidence nor runs the
    checks or the verdict, and the guard can fail."""
    edges = graph()
    assert report_reading_or_judging(edges) == []
    planted = {k: set(v) for k, v in edges.items()}
    planted["pubsubguard.validation.report.document"].add("pubsubguard.validation.checks.verdict")
    assert report_reading_or_judging(planted) == [
        "pubsubguard.validation.report.document -> pubsubguard.validation.checks.verdict"]


# validation/ by stage (issues 47, 66): one ranking of every stage, top to bottom; "job" is the job's own modules
# (validation/*.py). A module imports its own stage and the stages on lower lines only; the stages of one line never
# import each other (wire/ and checks/: the network layer and the judge stay apart). docs/architecture.md draws it
# ("The prove side, by stage"), with the arrows the code has (test_the_stage_drawing_is_the_code's).
RANKING = (("watch",), ("job",), ("report",), ("conformance",), ("probe",), ("wire", "checks"), ("evidence",))
RANK = {stage: len(RANKING) - line for line, stages in enumerate(RANKING) for stage in stages}
STAGES = tuple(stage for stages in RANKING for stage in stages if stage != "job")  # the stage folders


def stage_of(module: str) -> str | None:
    """`pubsubguard.validation.checks.kernel` -> checks; a module of the job's own (validation/*.py) -> job; a
    module outside validation/ (or validation/__init__.py) -> None."""
    if not module.startswith("pubsubguard.validation."):
        return None
    stage = module.split(".")[2]
    return stage if stage in STAGES else "job"


def stage_crossings(edges: dict[str, set[str]]) -> list[str]:
    """Every import of validation/ that runs up the ranking, or across one line of it: `module -> imported`."""
    wrong = []
    for module, targets in sorted(edges.items()):
        stage = stage_of(module)
        for target in sorted(targets):
            other = stage_of(target)
            if None not in (stage, other) and other != stage and RANK[other] >= RANK[stage]:
                wrong.append(f"{module} -> {target}")
    return wrong


def stage_arrows(edges: dict[str, set[str]]) -> dict[str, set[str]]:
    """The stages each stage imports (its own left out): the drawing's arrows."""
    arrows: dict[str, set[str]] = {stage: set() for stage in RANK}
    for module, targets in edges.items():
        if (stage := stage_of(module)) is not None:
            arrows[stage] |= {other for t in targets if (other := stage_of(t)) not in (None, stage)}
    return arrows


def test_validation_imports_follow_the_stage_ranking():
    edges = graph()
    assert {stage_of(m) for m in edges} >= {*RANK, None}  # every stage is a folder the graph reads
    assert stage_crossings(edges) == []
    # the guard can fail: an import up the ranking, or across a line of it, is found and named
    planted = {k: set(v) for k, v in edges.items()}
    planted["pubsubguard.validation.evidence.seal"].add("pubsubguard.validation.config")  # evidence -> job
    planted["pubsubguard.validation.checks.kernel"].add("pubsubguard.validation.report.document")  # checks -> report
    planted["pubsubguard.validation.conformance.runner"].add("pubsubguard.validation.report.render")  # up one line
    planted["pubsubguard.validation.checks.verdict"].add("pubsubguard.validation.wire.endpoints")  # across a line
    planted["pubsubguard.validation.driver"].add("pubsubguard.validation.watch.runner")  # job -> watch
    assert stage_crossings(planted) == [
        "pubsubguard.validation.checks.kernel -> pubsubguard.validation.report.document",
        "pubsubguard.validation.checks.verdict -> pubsubguard.validation.wire.endpoints",
        "pubsubguard.validation.conformance.runner -> pubsubguard.validation.report.render",
        "pubsubguard.validation.driver -> pubsubguard.validation.watch.runner",
        "pubsubguard.validation.evidence.seal -> pubsubguard.validation.config"]


def drawn_stages(text: str) -> dict[str, tuple[int, set[str]]]:
    """docs/architecture.md's drawing of the ranking: `{stage: (rank, the stages it imports)}`, from the block
    whose first line is `rank  stage  imports`."""
    lines = text.split("\n```\nrank  stage", 1)[1].split("```", 1)[0].splitlines()[1:]
    drawn = {}
    for line in lines:
        rank, stage, imported = line.split(None, 2)
        drawn[stage] = (int(rank), set() if imported.strip() == "-" else set(imported.split(", ")))
    return drawn


def test_the_stage_drawing_is_the_code():
    """The drawing in docs/architecture.md is the ranking, and its arrows are the code's, no more and no fewer."""
    drawn = drawn_stages((ROOT / "docs" / "architecture.md").read_text())
    arrows = stage_arrows(graph())
    assert drawn == {stage: (RANK[stage], arrows[stage]) for stage in RANK}


def unresolved_relative_imports(path: Path, module: str, known: set[str]) -> list[str]:
    """`from .x import y` whose package path names no module or package of the project (line: the dotted path):
    an import that would fail when it runs, and an arrow the stage rule would never see."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    wrong = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level > 0:
            base = ".".join(package.split(".")[:len(package.split(".")) - (node.level - 1)])
            base = f"{base}.{node.module}" if node.module else base
            if base not in known:
                wrong.append(f"{node.lineno}: {base}")
    return wrong


def test_every_relative_import_names_a_module(tmp_path):
    known = modules()
    assert {m: w for m, path in known.items() if (w := unresolved_relative_imports(path, m, set(known)))} == {}
    planted = tmp_path / "planted.py"  # a level too few, inside a function: found
    planted.write_text("def f():\n    from ..probe.acks import future_ack_result\n")
    assert unresolved_relative_imports(planted, "pubsubguard.validation.conformance.scenarios.x", set(known)) == [
        "2: pubsubguard.validation.conformance.probe.acks"]


def test_relative_imports_are_read():
    """The stage rule rests on the relative imports inside validation/ being read as the modules they name."""
    edges = graph()
    assert "pubsubguard.validation.checks.kernel" in edges["pubsubguard.validation.checks.run"]
    assert "pubsubguard.validation.evidence.records" in edges["pubsubguard.validation.checks.run"]
    assert "pubsubguard.validation.probe.clients" in edges["pubsubguard.validation.driver"]


def private_imports(path: Path) -> list[str]:
    """`from <project module> import _name` in the file, relative imports too (line: module._name): a private name
    crossing a module's border."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level == 0 and not (node.module and node.module.split(".")[0] in {"pubsubguard", *PACK_NAMES}):
            continue
        source = "." * node.level + (node.module or "")
        found += [f"{node.lineno}: {source}{'' if source.endswith('.') else '.'}{a.name}" for a in node.names
                  if a.name.startswith("_") and not a.name.startswith("__")]
    return found


def test_only_public_names_cross_modules(tmp_path):
    """A module uses another's public names only (issue 38): what a module shares, it names without `_`."""
    crossing = {name: found for name, path in modules().items() if (found := private_imports(path))}
    assert crossing == {}
    planted = tmp_path / "planted.py"  # the finder finds one
    planted.write_text("import os\nfrom pubsubguard.validation.probe.clients import ProbeSubscriber, _hidden\n"
                       "from ..checks import _kernel\n")
    assert private_imports(planted) == ["2: pubsubguard.validation.probe.clients._hidden", "3: ..checks._kernel"]


RUNS_PROGRAMS = {"pubsubguard.core.plan", "pubsubguard.core.engine", "pubsubguard.core.langhost",
                 "pubsubguard.core.langhost_python", "pubsubguard.core.langhost_node"}


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
