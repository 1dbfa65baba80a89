"""A Python program's toolchain as `pulumi preview` treats it (issue 64): `runtime.options.toolchain` pip
(the default), uv or poetry. uv and Poetry must be on PATH, as the Python language host requires (a missing
one stops the check in one line, exit 2, never a quiet fall back to another Python); uv's environment is
`.venv` beside the nearest uv.lock (or pyproject.toml), Poetry's is what `poetry env info --path` says. The
first screen names the Python that ran and how it was found.

uv and Poetry are the real tools, installed with pip into a virtualenv kept in the user's cache
(`tests/support/installed.py` `environment`, built once per machine); the program's own environment is a copy of the
cached one with the checkout's pulumi and pulumi-gcp (hard links), as `uv sync` or `poetry install` leaves it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from support.installed import CHECKOUT_PINS, environment, own_virtualenv

TOOLS = ("uv==0.9.5", "poetry==2.2.1")
PROGRAM = """
    import pulumi_gcp as gcp

    orders = gcp.pubsub.Topic("orders", name="orders")
    gcp.pubsub.Subscription("orders-push", name="orders-push", topic=orders.id, enable_exactly_once_delivery=True,
                            push_config={"push_endpoint": "https://orders.example.com/push"},
                            expiration_policy={"ttl": ""})
"""
PYPROJECT = """
    [project]
    name = "team"
    version = "0.1.0"
    requires-python = ">=3.10"
    dependencies = ["pulumi", "pulumi-gcp"]

    [tool.poetry]
    package-mode = false
"""


@pytest.fixture(scope="module")
def tools() -> Path:
    """The bin folder of a virtualenv with uv and Poetry (real installs from PyPI, cached)."""
    return environment(TOOLS) / "bin"


@pytest.fixture(scope="module")
def program_environment() -> Path:
    return environment(CHECKOUT_PINS)


def project(folder: Path, toolchain: str | None, **options) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    runtime = {"name": "python", "options": {**({"toolchain": toolchain} if toolchain else {}), **options}}
    (folder / "Pulumi.yaml").write_text(yaml.safe_dump({"name": "team", "runtime": runtime}))
    (folder / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {"gcp:project": "proj-a"}}))
    (folder / "__main__.py").write_text(textwrap.dedent(PROGRAM).lstrip())
    return folder


def check(root: Path, *args: str, tools: Path | None = None) -> subprocess.CompletedProcess:
    """`pubsubguard check` with uv and Poetry on PATH only when `tools` is given (neither is installed
    on this machine's own PATH), no active virtualenv."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and not (Path(p) / "uv").exists()
            and not (Path(p) / "poetry").exists()]
    env["PATH"] = os.pathsep.join(([str(tools)] if tools else []) + path)
    env["POETRY_CACHE_DIR"] = str(root / ".poetry-cache")  # Poetry writes nothing into the user's cache
    return subprocess.run([sys.executable, "-m", "pubsubguard", "check", "-s", "dev", *args], cwd=root,
                          capture_output=True, text=True, timeout=300, env=env)


def ran_by(done: subprocess.CompletedProcess) -> str:
    return done.stdout.splitlines()[1]


def test_uv_missing_stops_as_pulumi_preview_does_never_running_the_venv_quietly(tmp_path, program_environment):
    root = project(tmp_path / "team", "uv")
    (root / "pyproject.toml").write_text(textwrap.dedent(PYPROJECT).lstrip())
    own_virtualenv(program_environment, root / ".venv")  # there, but `pulumi preview` would not run it
    done = check(root)
    assert done.returncode == 2, done.stdout
    assert done.stderr.strip() == (
        f"pubsubguard check: {root / 'Pulumi.yaml'}: runtime.options.toolchain: uv: Could not find `uv` executable "
        "on PATH (install uv, or set runtime.options.toolchain to pip; `pulumi preview` stops here too)")


def test_uv_runs_the_environment_beside_the_nearest_uv_lock(tmp_path, tools, program_environment):
    """A repository with uv.lock at its top and the Pulumi project in infra/: uv's environment is the
    repository's .venv, as the language host places it (never infra/.venv)."""
    repository = tmp_path / "repo"
    root = project(repository / "infra", "uv")
    (repository / "pyproject.toml").write_text(textwrap.dedent(PYPROJECT).lstrip())
    (repository / "uv.lock").write_text("version = 1\n")
    own_virtualenv(program_environment, repository / ".venv")
    done = check(root, tools=tools)
    assert done.returncode == 1, done.stderr
    uv = subprocess.run([tools / "uv", "--version"], capture_output=True, text=True, check=True).stdout.split()[1]
    assert ran_by(done) == f"program run by: {repository / '.venv' / 'bin' / 'python'}, toolchain uv {uv}"
    assert "mandatory no-exactly-once-on-push" in done.stdout
    missing = project(tmp_path / "fresh", "uv")  # no environment made yet: offline, nothing can make it
    (missing / "pyproject.toml").write_text(textwrap.dedent(PYPROJECT).lstrip())
    refused = check(missing, tools=tools)
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == [
        f"pubsubguard check: {missing / 'Pulumi.yaml'}: runtime.options.toolchain: uv: its environment "
        f"{missing / '.venv'} has no Python ({missing / '.venv' / 'bin' / 'python'} missing): run `uv sync` "
        "(or `pulumi install`) in the project; offline the check cannot make it"]


def test_poetry_missing_stops_as_pulumi_preview_does(tmp_path):
    root = project(tmp_path / "team", "poetry")
    done = check(root)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"pubsubguard check: {root / 'Pulumi.yaml'}: runtime.options.toolchain: poetry: Could not find `poetry` "
        "executable on PATH (install Poetry, or set runtime.options.toolchain to pip; `pulumi preview` stops here too)")


def test_poetry_runs_the_environment_poetry_names(tmp_path, tools, program_environment):
    root = project(tmp_path / "team", "poetry", virtualenv="ignored")  # Poetry decides, as under the CLI
    (root / "pyproject.toml").write_text(textwrap.dedent(PYPROJECT).lstrip())
    (root / "poetry.toml").write_text("[virtualenvs]\nin-project = true\n")
    own_virtualenv(program_environment, root / ".venv")
    done = check(root, "--format", "json", tools=tools)
    assert done.returncode == 1, done.stderr
    program = json.loads(done.stdout)["program"]
    poetry = subprocess.run([tools / "poetry", "--version", "--no-ansi"], capture_output=True, text=True,
                            check=True).stdout.strip().rstrip(")").split()[-1]
    assert (program["interpreter"], program["found_by"]) == (str(root / ".venv" / "bin" / "python"),
                                                             f"toolchain poetry {poetry}")
    text = check(root, tools=tools)
    assert ran_by(text) == f"program run by: .venv/bin/python, toolchain poetry {poetry}"


def test_pip_runs_the_named_virtualenv_and_says_so(tmp_path, program_environment):
    root = project(tmp_path / "team", None, virtualenv="venv")
    own_virtualenv(program_environment, root / "venv")
    done = check(root)
    assert done.returncode == 1, done.stderr
    assert ran_by(done) == "program run by: venv/bin/python, toolchain pip, runtime.options.virtualenv venv"
