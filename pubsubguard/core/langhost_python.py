"""The language host's part for Python programs (`runtime: python`): which Python runs the team's program, and
how, as the Pulumi Python language host runs it.

- **The interpreter**, found as the Pulumi Python language host resolves `runtime.options.toolchain`:
  `--python PATH` first; `uv`: the tool must be on PATH (0.4.26 or newer), its environment is
  `runtime.options.virtualenv` else `.venv` beside the nearest uv.lock or pyproject.toml; `poetry`: the tool
  must be on PATH (1.8 or newer), its environment is `poetry env info --path`; `pip` (the default):
  `runtime.options.virtualenv` of Pulumi.yaml (relative to the project), else an active `VIRTUAL_ENV`,
  else `PULUMI_PYTHON_CMD`, `python3`, `python` on PATH. Where `pulumi preview` stops (the tool missing
  or too old), so does the check, in one line. A project that names none and
  whose Python lacks the pulumi SDK runs on pubsubguard's own environment (said in one line).
- **The child** runs `langhost_exec.py` (copied into the run's scratch directory) with that Python, in the
  confinement `langhost.start` gives every program.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from pubsubguard.core import langhost
from pubsubguard.core.project import PlanError, Project

EXEC_SCRIPT = Path(__file__).resolve().parent / "langhost_exec.py"


@dataclass(frozen=True)
class Interpreter:
    python: str
    source: str  # how it was found, for messages: "runtime.options.virtualenv venv", "python3 on PATH", ...
    fallback_note: str = ""  # set when pubsubguard's own environment stands in


def _runtime_options(project: Project) -> dict:
    options = project.runtime_options
    return options if isinstance(options, dict) else {}


def _has_pulumi(python: str) -> bool:
    try:
        done = subprocess.run([python, "-c", "import importlib.util as u, sys; sys.exit(0 if u.find_spec('pulumi') else 1)"],
                              stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              timeout=60, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _venv_python(folder: Path) -> Path:
    for candidate in (folder / "bin" / "python", folder / "bin" / "python3", folder / "Scripts" / "python.exe"):
        if candidate.exists():
            return candidate
    return folder / "bin" / "python"


def find_interpreter(project: Project, override: str | None = None) -> Interpreter:
    """The Python that runs the program, as the Python language host resolves its toolchain
    (`runtime.options.toolchain`: pip, the default; uv; poetry): PlanError in one line where `pulumi
    preview` would stop too (a toolchain whose tool is missing or too old, an environment not made yet)."""
    where = f"{project.root / 'Pulumi.yaml'}"
    if override:
        python = shutil.which(override) or override
        if not Path(python).exists():
            raise PlanError(f"--python {override}: no such interpreter")
        if not _has_pulumi(python):
            raise PlanError(f"--python {override}: this Python cannot import the pulumi SDK (pip install pulumi)")
        return Interpreter(python, f"--python {override}")
    options = _runtime_options(project)
    toolchain = str(options.get("toolchain") or "pip")
    if toolchain == "uv":
        return _uv_interpreter(project, where, options.get("virtualenv"))
    if toolchain == "poetry":  # Poetry decides the environment: runtime.options.virtualenv is not read
        return _poetry_interpreter(project, where)
    if toolchain != "pip":
        raise PlanError(f"{where}: runtime.options.toolchain: expected pip, poetry or uv, got {toolchain!r}")
    venv = options.get("virtualenv")
    if venv:
        python = _venv_python(project.root / str(venv))
        _usable(python, f"{where}: runtime.options.virtualenv: {venv!r} has no Python ({python} missing; create it "
                        "with `pulumi install`)",
                f"{where}: runtime.options.virtualenv: {python} cannot import the pulumi SDK (install the program's "
                "requirements: `pulumi install`)")
        return Interpreter(str(python), f"toolchain pip, runtime.options.virtualenv {venv}")
    active = os.environ.get("VIRTUAL_ENV")
    if active and _venv_python(Path(active)).exists() and _has_pulumi(str(_venv_python(Path(active)))):
        return Interpreter(str(_venv_python(Path(active))), "toolchain pip, the active virtualenv (VIRTUAL_ENV)")
    for command in filter(None, (os.environ.get("PULUMI_PYTHON_CMD"), "python3", "python")):
        python = shutil.which(command)
        if python and _has_pulumi(python):
            return Interpreter(python, f"toolchain pip, {command} on PATH")
    return Interpreter(sys.executable, "pubsubguard's own environment",
                       fallback_note="the project names no virtualenv and python3 on PATH has no pulumi SDK: "
                                     "running the program on pubsubguard's own environment "
                                     "(set runtime.options.virtualenv in Pulumi.yaml, or --python)")


# The oldest uv and Poetry the Python language host runs (pulumi/pulumi sdk/python/toolchain: uv.go, poetry.go).
MIN_UV = (0, 4, 26)
MIN_POETRY = (1, 8, 0)


def _tool(name: str, where: str, advice: str, minimum: tuple[int, ...], *version_args: str) -> tuple[str, str]:
    """(the path, the version) of a toolchain's tool on PATH, or PlanError as the language host refuses:
    the tool missing, its version unreadable or older than `minimum`."""
    tool = shutil.which(name)
    if tool is None:
        raise PlanError(f"{where}: runtime.options.toolchain: {name}: Could not find `{name}` executable on PATH "
                        f"({advice}; `pulumi preview` stops here too)")
    try:
        done = subprocess.run([tool, *version_args], capture_output=True, text=True, stdin=subprocess.DEVNULL,
                              timeout=120)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise PlanError(f"{where}: runtime.options.toolchain: {name}: `{tool} {' '.join(version_args)}` "
                        f"cannot run ({err.__class__.__name__})") from None
    found = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", done.stdout)
    if done.returncode != 0 or found is None:
        raise PlanError(f"{where}: runtime.options.toolchain: {name}: `{tool} {' '.join(version_args)}` gave no "
                        f"version (exit {done.returncode})")
    version = tuple(int(part or 0) for part in found.groups())
    if version < minimum:
        raise PlanError(f"{where}: runtime.options.toolchain: {name}: {tool} is version {found.group(0)}, older than "
                        f"{'.'.join(map(str, minimum))}, the oldest the Pulumi language host runs: upgrade {name}")
    return tool, found.group(0)


def _usable(python: Path, missing: str, no_sdk: str) -> None:
    """PlanError(`missing`) when the environment's Python is not there, PlanError(`no_sdk`) when it cannot
    import the pulumi SDK."""
    if not python.exists():
        raise PlanError(missing)
    if not _has_pulumi(str(python)):
        raise PlanError(no_sdk)


def _searchup(folder: Path, name: str) -> Path | None:
    for candidate in (folder, *folder.parents):
        if (candidate / name).exists():
            return candidate
    return None


def _uv_interpreter(project: Project, where: str, virtualenv) -> Interpreter:
    """uv's project environment as the language host places it: `runtime.options.virtualenv` (relative to
    the project), else `.venv` beside the nearest uv.lock, else beside the nearest pyproject.toml, else in
    the project (it sets UV_PROJECT_ENVIRONMENT to that folder, so the caller's is not read)."""
    _, version = _tool("uv", where, "install uv, or set runtime.options.toolchain to pip", MIN_UV, "--version")
    root = project.root.resolve()
    if virtualenv:
        folder = root / str(virtualenv)
    else:
        found = _searchup(root, "uv.lock") or _searchup(root, "pyproject.toml") or root
        folder = found / ".venv"
    python = _venv_python(folder)
    _usable(python, f"{where}: runtime.options.toolchain: uv: its environment {folder} has no Python ({python} "
                    "missing): run `uv sync` (or `pulumi install`) in the project; offline the check cannot make it",
            f"{where}: runtime.options.toolchain: uv: {python} cannot import the pulumi SDK: run `uv sync` (or "
            "`pulumi install`) in the project")
    return Interpreter(str(python), f"toolchain uv {version}")


def _poetry_interpreter(project: Project, where: str) -> Interpreter:
    """Poetry's environment of the program's folder (`poetry env info --path`), as the language host asks it."""
    poetry, version = _tool("poetry", where, "install Poetry, or set runtime.options.toolchain to pip", MIN_POETRY,
                            "--version", "--no-ansi", "--no-plugins")
    try:
        done = subprocess.run([poetry, "env", "info", "--path", "--no-ansi"], cwd=project.program_dir,
                              capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise PlanError(f"{where}: runtime.options.toolchain: poetry: `poetry env info --path` cannot run "
                        f"({err.__class__.__name__})") from None
    folder = done.stdout.strip() if done.returncode == 0 else ""
    python = _venv_python(Path(folder)) if folder else Path("/nonexistent")
    _usable(python, f"{where}: runtime.options.toolchain: poetry: Poetry has no environment for {project.program_dir}: "
                    "run `poetry install` (or `pulumi install`) there",
            f"{where}: runtime.options.toolchain: poetry: {python} cannot import the pulumi SDK: run `poetry install` "
            "(or `pulumi install`) in the project")
    return Interpreter(str(python), f"toolchain poetry {version}")


def environment(config_env: dict[str, str], scratch: Path, interpreter: Interpreter, pass_env: tuple[str, ...]) -> dict:
    env = langhost.base_environment(config_env, scratch, pass_env)
    env.update({"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1"})
    python = Path(interpreter.python)
    if (python.parent.parent / "pyvenv.cfg").exists():
        env["VIRTUAL_ENV"] = str(python.parent.parent)
        env["PATH"] = os.pathsep.join([str(python.parent), env.get("PATH", os.defpath)])
    return env


@dataclass(frozen=True)
class PythonRunner:
    """A Python program (`runtime: python`): `langhost_exec.py` run by the project's interpreter."""
    interpreter: Interpreter

    @classmethod
    def find(cls, project: Project, python: str | None = None) -> "PythonRunner":
        return cls(find_interpreter(project, python))

    @property
    def program(self) -> str:  # what runs the program, for messages and the run's record
        return self.interpreter.python

    @property
    def found_by(self) -> str:  # how it was found: the toolchain and its environment
        return self.interpreter.source

    @property
    def notes(self) -> list[str]:
        return [self.interpreter.fallback_note] if self.interpreter.fallback_note else []

    def environment(self, config_env: dict[str, str], scratch: Path, pass_env: tuple[str, ...]) -> dict:
        return environment(config_env, scratch, self.interpreter, pass_env)

    def command(self, scratch: Path, launch: langhost.Launch) -> list[str]:
        script = scratch / "exec" / "pulumi-language-python-exec.py"
        shutil.copyfile(EXEC_SCRIPT, script)
        project = launch.project
        return [self.interpreter.python, "-u", str(script),
                "--monitor", launch.monitor, "--engine", launch.engine, "--project", project.name,
                "--stack", launch.stack, "--pwd", str(project.program_dir), "--root_directory", str(project.root),
                "--organization", "organization", "--dry_run", "true", "--parallel", str(launch.parallel),
                "--idle-timeout", f"{launch.idle_timeout_s:g}", "--max-resources", str(launch.max_resources),
                "--config-file", str(launch.config_file), str(project.main)]

    def failure(self, code: int) -> str | None:
        """The runner's own reading of an exit code, or None."""
        if code == NO_SDK:
            return f"{self.interpreter.python} ({self.interpreter.source}) cannot import the pulumi SDK (pip install pulumi)"
        return None


NO_SDK = 3  # langhost_exec.NO_SDK (that file is run by the program's Python, never imported here)
