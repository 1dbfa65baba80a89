"""pubsubguard as teams get it, for the tests that judge programs through it: the wheel built from this
checkout and installed alone into a fresh virtualenv (no checkout on the path, no pulumi-gcp beside the
tool), and programs that each run in a virtualenv of their own, named by their Pulumi.yaml as a team's is.

Everything slow is built once per machine and kept under the user's cache directory
(`~/.cache/pubsubguard-tests/`): the installed tool by a digest of the sources that go into the wheel
(a change of the code builds it anew), a program environment by its pins (and a local library's
contents). A program's own virtualenv is a copy of such an environment made of hard links (instant, and its
files stay the cached ones). Concurrent test processes (`pytest -n N`) build each entry once, under a lock,
and never see one half built (`nodejs_projects.ensure`)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import yaml

from support.nodejs_projects import cache_root, ensure, remove_stale

from support import ROOT
SOURCES = ("pyproject.toml", "README.md", "pubsubguard", "infra", "validation", "policies")
IGNORED = shutil.ignore_patterns("__pycache__", "venv", ".venv", "*.egg-info", "build", "*.pyc")
# The checkout's own pins: a program environment with them differs from the checkout's only in what is
# installed beside the tool, so any other verdict is the tool's install at fault.
CHECKOUT_PINS = tuple(f"{name}=={metadata.version(name)}" for name in ("pulumi", "pulumi-gcp"))


def run(command, **kwargs) -> subprocess.CompletedProcess:
    kwargs.setdefault("timeout", 900)
    done = subprocess.run([str(part) for part in command], capture_output=True, text=True, **kwargs)
    assert done.returncode == 0 or kwargs.get("check") is False, f"{command}: {done.stdout}\n{done.stderr}"
    return done


def _files_digest(root: Path, names, digest) -> None:
    """Each file's path (relative to `root`) and bytes into `digest`, in a fixed order; IGNORED skipped."""
    for name in names:
        path = root / name
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for file in files:
            relative = file.relative_to(root)
            if any(IGNORED("", [part]) for part in relative.parts):
                continue
            digest.update(str(relative).encode() + b"\0" + file.read_bytes() + b"\0")


def _sources_digest() -> str:
    digest = hashlib.sha256(sys.version.encode())
    _files_digest(ROOT, SOURCES, digest)
    return digest.hexdigest()[:16]


def build(source: Path, out: Path) -> list[Path]:
    """`python -m build` (sdist, then the wheel from it) where it is installed, else `pip wheel`."""
    if importlib.util.find_spec("build") is not None:
        run([sys.executable, "-m", "build", "--outdir", out, source])
    else:
        run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--disable-pip-version-check", "-w", out, source])
    return sorted(out.iterdir())


def installed_tool() -> tuple[Path, Path]:
    """(the wheel, the bin/ of a fresh virtualenv with pubsubguard installed from it alone)."""
    folder = cache_root() / "installed" / _sources_digest()

    def make() -> None:
        remove_stale(folder)  # earlier code's: never used again
        source = folder / "source"  # a copy, so the build writes nothing into the checkout
        source.mkdir(parents=True)
        for name in SOURCES:
            if (ROOT / name).is_dir():
                shutil.copytree(ROOT / name, source / name, ignore=IGNORED)
            else:
                shutil.copy(ROOT / name, source / name)
        build(source, folder / "dist")
        shutil.rmtree(source)
        run([sys.executable, "-m", "venv", folder / "venv"])
        [wheel] = sorted((folder / "dist").glob("*.whl"))
        run([folder / "venv" / "bin" / "python", "-m", "pip", "install", "--disable-pip-version-check", "-q", wheel],
            cwd=folder)
        (folder / ".complete").write_text(wheel.name)

    ensure(folder, make)
    [wheel] = sorted((folder / "dist").glob("*.whl"))
    return wheel, folder / "venv" / "bin"


def _key_part(argument: str) -> str:
    """A pip argument as an environment's key holds it: a local folder (a library, which pip installs as a
    copy) by its contents, not by where it is (a test's temporary folder, another on every run)."""
    path = Path(argument)
    if not path.is_dir():
        return argument
    digest = hashlib.sha256()
    _files_digest(path, sorted(p.name for p in path.iterdir()), digest)
    return f"folder:{digest.hexdigest()}"


def environment(pins: tuple[str, ...], *extra: str) -> Path:
    """A virtualenv with `pins` (and `extra` pip arguments, e.g. a local library), built once."""
    key = hashlib.sha256(json.dumps([pins, [_key_part(e) for e in extra], sys.version]).encode()).hexdigest()[:16]
    folder = cache_root() / "envs" / key

    def make() -> None:
        run([sys.executable, "-m", "venv", folder])
        run([folder / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check", *pins, *extra])
        (folder / ".complete").write_text("\n".join(pins))

    return ensure(folder, make)


def own_virtualenv(environment_folder: Path, destination: Path) -> Path:
    """A virtualenv of the program's own at `destination`: a copy of `environment_folder` made of hard links."""
    shutil.copytree(environment_folder, destination, symlinks=True, copy_function=os.link)
    return destination


def as_team_project(source: Path, destination: Path, environment_folder: Path) -> Path:
    """A copy of the program at `source` whose Pulumi.yaml names its own virtualenv (`venv`, beside it), as
    `pulumi install` leaves a team's repository. A Pulumi.yaml that does not parse is copied as it is."""
    shutil.copytree(source, destination, symlinks=True, ignore=IGNORED)
    own_virtualenv(environment_folder, destination / "venv")
    path = destination / "Pulumi.yaml"
    try:
        project = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return destination
    if isinstance(project, dict):
        runtime = project.get("runtime")
        runtime = dict(runtime) if isinstance(runtime, dict) else {"name": runtime}
        runtime["options"] = {**(runtime.get("options") or {}), "virtualenv": "venv"}
        path.write_text(yaml.safe_dump({**project, "runtime": runtime}, sort_keys=False))
    return destination


def user_env(cache: Path) -> dict:
    """A user's shell: no checkout on the path (no PYTHONPATH), no active virtualenv, its own cache."""
    env = {key: value for key, value in os.environ.items() if not key.startswith(("PYTHON", "PUBSUBGUARD", "VIRTUAL_ENV"))}
    return {**env, "PUBSUBGUARD_CACHE_DIR": str(cache), "NO_GCE_CHECK": "true"}
