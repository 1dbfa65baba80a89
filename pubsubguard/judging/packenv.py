"""The policy pack where the user is: its folder and its own virtualenv.

The pack runs in an interpreter of its own (pulumi-policy pins protobuf 5, the Pub/Sub client needs
protobuf 6), made from the pack's `requirements.txt` as the Pulumi CLI makes it. Where it comes from:

- **A checkout** of this repository: `policies/`, with `policies/venv` from `scripts/setup.sh`.
- **An installed wheel**: the pack ships as package data (`pubsubguard/policies/`). It is copied once into
  the user's cache, `<cache>/pack-<version>-<content hash>/`, beside a symlink `venv` to the pack's
  virtualenv, so the folder is one the real CLI loads as it is:
  `pulumi preview --policy-pack "$(pubsubguard pack path)"`.
- **`--policy-pack DIR`** (a team's fork): DIR as it is; its virtualenv is the one PulumiPolicy.yaml
  names when it exists.

A pack without its virtualenv gets one on first use, `<cache>/pack-venv-<key>/`, keyed by the pack's
requirements and the Python that makes it: one line on stderr while it builds, nothing on stdout.
It is built in a temporary folder and renamed into place, under a file lock, so two concurrent checks
neither corrupt it nor build it twice. The cache is `$PUBSUBGUARD_CACHE_DIR`, else
`$XDG_CACHE_HOME/pubsubguard`, else `~/.cache/pubsubguard`.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from pubsubguard.core.cache import CACHE_ENV, FileLock, cache_root
from pubsubguard.core.errors import UserError

READY = ".pubsubguard-ready"  # written last into a virtualenv's folder: the build completed
BUILD_TIMEOUT_S = 900.0
SKIPPED = {"__pycache__", "venv", ".venv", "node_modules"}


class PackError(UserError):
    """The pack cannot be found, read or given its virtualenv (one line: which folder, what is missing)."""


def _pack_folder() -> Path | None:
    """Where `pubsubguard.policies` is: the checkout's `policies/` (editable install), or the wheel's
    `pubsubguard/policies/`."""
    from importlib import util

    spec = util.find_spec("pubsubguard.policies")
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = Path(list(spec.submodule_search_locations)[0]).resolve()
    return folder if (folder / "PulumiPolicy.yaml").is_file() else None


def _in_checkout(folder: Path) -> bool:
    return (folder.parent / "pyproject.toml").is_file() and (folder.parent / "Pulumi.yaml").is_file()


def installed_pack_dir() -> Path | None:
    """The pack shipped in the wheel (`pubsubguard/policies/`), if this is an installed copy."""
    folder = _pack_folder()
    return folder if folder is not None and not _in_checkout(folder) else None


def checkout_pack_dir() -> Path | None:
    """The checkout's `policies/` (its virtualenv made by scripts/setup.sh), if this is a checkout."""
    folder = _pack_folder()
    return folder if folder is not None and _in_checkout(folder) else None


def default_pack_dir() -> Path:
    """The pack pubsubguard judges with: the checkout's `policies/`, else the installed pack's folder in
    the cache (made, with its virtualenv, on first use)."""
    checkout = checkout_pack_dir()
    if checkout is not None:
        return checkout
    installed = installed_pack_dir()
    if installed is None:
        raise PackError(f"{Path(__file__).resolve().parents[1]}: no policy pack in this installation "
                        "(pubsubguard/policies/ is missing; reinstall pubsubguard, or pass --policy-pack DIR)")
    return materialize(installed)


def virtualenv_name(pack_dir: Path) -> str:
    """`runtime.options.virtualenv` of PulumiPolicy.yaml (default `venv`), as the CLI reads it."""
    from pubsubguard.core.user_files import read_yaml_mapping

    manifest = read_yaml_mapping(Path(pack_dir) / "PulumiPolicy.yaml", PackError, f"is {pack_dir} a policy pack?",
                                 "a mapping with 'runtime' and 'version'")
    runtime = manifest.get("runtime")
    options = runtime.get("options", {}) if isinstance(runtime, dict) else {}
    return str((options or {}).get("virtualenv", "venv"))


def validate(pack_dir: Path, option: str = "--policy-pack") -> Path:
    """A folder the CLI would load as a Python policy pack, or one line saying what it lacks."""
    import yaml

    folder = Path(pack_dir)
    where = f"{option} {pack_dir}"
    if not folder.is_dir():
        raise PackError(f"{where}: not a directory (expected a policy pack folder with PulumiPolicy.yaml)")
    manifest_path = folder / "PulumiPolicy.yaml"
    if not manifest_path.is_file():
        raise PackError(f"{where}: no PulumiPolicy.yaml (expected a Pulumi policy pack folder)")
    try:
        manifest = yaml.safe_load(manifest_path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise PackError(f"{where}: PulumiPolicy.yaml is not valid YAML ({' '.join(str(err).split())})") from None
    if not isinstance(manifest, dict):
        raise PackError(f"{where}: PulumiPolicy.yaml: expected a mapping with 'runtime' and 'version'")
    runtime = manifest.get("runtime")
    name = runtime.get("name") if isinstance(runtime, dict) else runtime
    if name != "python":
        raise PackError(f"{where}: PulumiPolicy.yaml: runtime is {name!r}; pubsubguard runs Python packs only")
    if not (folder / "__main__.py").is_file():
        raise PackError(f"{where}: no __main__.py (a Python pack builds its PolicyPack there)")
    venv = folder / virtualenv_name(folder)
    if not (venv / "bin" / "python").exists() and not (folder / "requirements.txt").is_file():
        raise PackError(f"{where}: neither its virtualenv ({venv}) nor a requirements.txt to make one from")
    return folder.resolve()


def pack_python(pack_dir: Path) -> Path:
    """The pack's interpreter: the virtualenv PulumiPolicy.yaml names when it exists (a checkout after
    scripts/setup.sh, a fork with its venv, the cached copy), else the cached one for its requirements."""
    pack_dir = Path(pack_dir)
    python = pack_dir / virtualenv_name(pack_dir) / "bin" / "python"
    if python.exists():
        return python
    requirements = pack_dir / "requirements.txt"
    if not requirements.is_file():
        raise PackError(f"{python}: the policy pack's virtualenv is missing and {requirements} does not exist "
                        "to make one from (in a checkout: run scripts/setup.sh)")
    return ensure_venv(requirements) / "bin" / "python"


# --- The virtualenv ----------------------------------------------------------------------------------
def venv_key(requirements: Path) -> str:
    digest = hashlib.sha256()
    digest.update(requirements.read_bytes())
    digest.update(f"\0{platform.python_implementation()}{sys.version_info[0]}.{sys.version_info[1]}"
                  f"\0{platform.machine()}".encode())
    return digest.hexdigest()[:16]


def venv_dir(requirements: Path) -> Path:
    return cache_root() / f"pack-venv-{venv_key(requirements)}"


def _ready(venv: Path) -> bool:
    return (venv / READY).is_file() and (venv / "bin" / "python").exists()


def ensure_venv(requirements: Path, python: str | None = None) -> Path:
    """The virtualenv for a pack's requirements, built on first use (see module doc)."""
    final = venv_dir(requirements)
    if _ready(final):
        return final
    root = final.parent
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise PackError(f"{root}: cannot create the cache directory for the policy pack's virtualenv "
                        f"({err.strerror}; set {CACHE_ENV} to a writable folder)") from None
    with FileLock(root / f"{final.name}.lock"):
        if _ready(final):
            return final
        print(f"pubsubguard: making the policy pack's virtualenv in {final} (once for these requirements)",
              file=sys.stderr, flush=True)
        building = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=root))
        log = root / f"{final.name}.log"
        try:
            _build(building / "venv", requirements, python or sys.executable, log)
            (building / "venv" / READY).write_text(f"{requirements.resolve()}\n")
            if final.exists():  # a build left half-done by a process that was killed
                shutil.rmtree(final)
            os.rename(building / "venv", final)
        finally:
            shutil.rmtree(building, ignore_errors=True)
    return final


def _build(venv: Path, requirements: Path, python: str, log: Path) -> None:
    with open(log, "w") as out:
        steps = [
            ([python, "-m", "venv", str(venv)], "the venv module"),
            ([str(venv / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check",
              "--no-input", "-r", str(requirements)], "pip install -r requirements.txt"),
        ]
        for command, what in steps:
            out.write(f"$ {' '.join(command)}\n")
            out.flush()
            try:
                done = subprocess.run(command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                      cwd=str(requirements.parent), timeout=BUILD_TIMEOUT_S, env=_build_env())
            except subprocess.TimeoutExpired:
                raise PackError(f"cannot make the policy pack's virtualenv: {what} took over "
                                f"{BUILD_TIMEOUT_S:.0f} s (log: {log})") from None
            except OSError as err:
                raise PackError(f"cannot make the policy pack's virtualenv: {command[0]}: {err.strerror}") from None
            if done.returncode != 0:
                raise PackError(f"cannot make the policy pack's virtualenv: {_why(what, log)} (log: {log})")


# What would make the build install into, or count as installed, anything but the new virtualenv: with
# PYTHONPATH set, pip takes a requirement found there as satisfied and leaves the venv without it (seen with
# PYTHONPATH naming the checkout's site-packages: the pack's venv had no pulumi). The index settings stay.
_NOT_FOR_THE_BUILD = ("PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PIP_TARGET", "PIP_PREFIX", "PIP_ROOT",
                      "PIP_USER")


def _build_env() -> dict[str, str]:
    return {name: value for name, value in os.environ.items() if name not in _NOT_FOR_THE_BUILD}


def _why(what: str, log: Path) -> str:
    """The cause in a few words, from the build's log."""
    text = log.read_text(errors="replace")
    if what == "the venv module":
        if "ensurepip" in text or "No module named venv" in text:
            return "the venv module or ensurepip is missing (Debian/Ubuntu: apt install python3-venv)"
        return f"`python -m venv` failed: {_last_line(text)}"
    if any(sign in text for sign in ("NewConnectionError", "Temporary failure in name resolution",
                                     "Network is unreachable", "No matching distribution found",
                                     "Could not find a version")):
        return f"{what} failed: the package index is not reachable or lacks a requirement ({_last_line(text)})"
    return f"{what} failed: {_last_line(text)}"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("$ ")]
    errors = [line for line in lines if line.startswith("ERROR:")]
    return (errors or lines or ["no output"])[-1][:300]


# --- The installed pack's folder in the cache ---------------------------------------------------------
def _pack_files(source: Path) -> list[Path]:
    return sorted(path for path in source.rglob("*")
                  if path.is_file() and not SKIPPED.intersection(path.relative_to(source).parts)
                  and path.suffix != ".pyc")


def pack_key(source: Path) -> str:
    digest = hashlib.sha256()
    for path in _pack_files(source):
        digest.update(path.relative_to(source).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def materialize(source: Path) -> Path:
    """A copy of the pack `source` in the cache with its virtualenv beside it (a relative symlink named
    as PulumiPolicy.yaml says), so the folder is complete for the real CLI too."""
    from pubsubguard.core import __version__

    venv = ensure_venv(source / "requirements.txt")
    final = cache_root() / f"pack-{__version__}-{pack_key(source)}"
    name = virtualenv_name(source)
    if (final / "PulumiPolicy.yaml").is_file() and (final / name / "bin" / "python").exists():
        return final
    building = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    try:
        for path in _pack_files(source):
            target = building / path.relative_to(source)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, target)
        os.symlink(os.path.relpath(venv, final), building / name)
        try:
            os.rename(building, final)
        except OSError:  # another check made it meanwhile (or a broken copy is in the way)
            if not (final / "PulumiPolicy.yaml").is_file() or not (final / name / "bin" / "python").exists():
                shutil.rmtree(final, ignore_errors=True)
                os.rename(building, final)
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return final


def resolve(policy_pack) -> Path:
    """The pack folder `check` and `pack` use: --policy-pack DIR (validated), else the bundled pack."""
    if policy_pack:
        return validate(policy_pack)
    return default_pack_dir()
