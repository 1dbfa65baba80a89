"""What a Spark cluster needs to run the verification job: the project's packages and a Python.

`build(out)` writes two files into `out`:

    pubsubguard.zip          the packages the driver and executors import (`--py-files`):
                             pubsubguard with its core, validation and policies.pubsub_facts (the
                             command line, the check, the declaring program and the pack's rules are
                             not the job's and no task imports them)
    pubsubguard-env.tar.gz   a packed virtualenv (venv-pack) with the job's third-party packages at the
                             versions this installation runs (`--archives ...#env`)

The environment is a fresh, non-editable virtualenv of the runtime dependencies, not this one: an
editable install points at a checkout that executors do not have, and Pulumi and pyspark are not the
job's (the cluster brings its own Spark; `pyspark.zip` from its SPARK_HOME is on every Python
worker's path). venv-pack keeps the interpreter as a link to the base Python this virtualenv was made
from, so every node needs that Python at the same path: build the bundle on the image the nodes run.

Both files are built in a temporary directory beside `out` and renamed into it when complete, so a
failed or interrupted build leaves nothing half-written.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile
import time
import venv
import zipfile
from dataclasses import dataclass
from importlib import metadata, util
from pathlib import Path

from pubsubguard.core.errors import UserError

ZIP_NAME = "pubsubguard.zip"
ENV_NAME = "pubsubguard-env.tar.gz"
ENV_ALIAS = "env"  # the archive's directory name on the executors: `--archives FILE#env`
# The packages the job's driver and executors import (tests/prove/job/test_bundle.py checks the list against what
# importing the job and its task functions loads).
# Each is shipped without its sub-packages (those the job needs are listed themselves).
PACKAGES = ("pubsubguard", "pubsubguard.core", "pubsubguard.policies", "pubsubguard.policies.pubsub_facts",
            "pubsubguard.validation", *(f"pubsubguard.validation.{stage}" for stage in
                                        ("probe", "wire", "evidence", "checks", "report", "conformance")))
# Dependencies of this project that the job does not run: the Pulumi SDK declares, pyspark is the
# cluster's own.
NOT_SHIPPED = {"pulumi", "pulumi-gcp", "pyspark"}
ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # fixed entry times: the same sources give the same zip


class BundleError(UserError):
    """The bundle cannot be built (exit 2)."""


@dataclass(frozen=True)
class Bundle:
    directory: Path
    zip_file: Path
    env_archive: Path
    requirements: tuple[str, ...]
    seconds: dict[str, float]  # build time per step

    def submit_command(self, master: str = "spark://HOST:7077", driver_python: str | None = None) -> list[str]:
        """The spark-submit line (client mode: the driver runs `driver_python`, executors the archive)."""
        job = Path(util.find_spec("pubsubguard.validation.job").origin)
        command = ["spark-submit", "--master", master,
                   "--archives", f"{self.env_archive}#{ENV_ALIAS}",
                   "--conf", f"spark.pyspark.python=./{ENV_ALIAS}/bin/python"]
        if driver_python:
            command += ["--conf", f"spark.pyspark.driver.python={driver_python}"]
        return command + ["--py-files", str(self.zip_file), str(job)]


def _normalised(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def requirements() -> tuple[str, ...]:
    """The job's runtime dependencies (the package's own and its `verify` extra's) minus NOT_SHIPPED,
    pinned to the installed versions."""
    from packaging.requirements import Requirement

    pinned = []
    for text in metadata.requires("pubsubguard") or ():
        requirement = Requirement(text)
        if requirement.marker is not None and not any(requirement.marker.evaluate({"extra": extra})
                                                      for extra in ("", "verify")):
            continue  # another extra's (test) requirement
        if _normalised(requirement.name) in NOT_SHIPPED:
            continue
        pinned.append(f"{requirement.name}=={metadata.version(requirement.name)}")
    return tuple(sorted(pinned))


def package_folders() -> dict[str, Path]:
    """Where each shipped package is installed (a checkout's folder for an editable install)."""
    folders = {}
    for name in PACKAGES:
        spec = util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise BundleError(f"package {name!r} is not importable here (run `bash scripts/setup.sh`)")
        folders[name] = Path(list(spec.submodule_search_locations)[0])
    return folders


def package_files(folder: Path) -> list[Path]:
    """A package's modules and data (report.html's template), without its sub-packages' files."""
    found = []
    for source in sorted(folder.rglob("*")):
        if not source.is_file() or "__pycache__" in source.parts or source.suffix == ".pyc":
            continue
        between = source.relative_to(folder).parents
        if any((folder / part / "__init__.py").exists() for part in between if str(part) != "."):
            continue  # a sub-package's (shipped on its own when the job needs it)
        found.append(source)
    return found


def write_zip(path: Path) -> None:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, folder in sorted(package_folders().items()):
            for source in package_files(folder):
                entry = zipfile.ZipInfo((Path(*name.split(".")) / source.relative_to(folder)).as_posix(), ZIP_TIME)
                entry.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(entry, source.read_bytes())


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip() and not line.startswith("WARNING: Location")]
    return lines[-1].strip() if lines else "no output"


def write_env(path: Path, pinned: tuple[str, ...], work: Path) -> None:
    """A fresh virtualenv of `pinned`, packed with venv-pack into `path`."""
    try:
        import venv_pack
    except ImportError:
        raise BundleError("venv-pack is not installed (run `bash scripts/setup.sh`)") from None
    prefix = work / "env"
    venv.EnvBuilder(with_pip=True, symlinks=True).create(prefix)
    python = prefix / "bin" / "python"
    done = subprocess.run([str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *pinned],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise BundleError(f"cannot install the executors' packages into a fresh virtualenv "
                          f"(pip install {' '.join(pinned)}): {_last_line(done.stderr)}")
    try:
        venv_pack.pack(prefix=str(prefix), output=str(path), compress_level=4)
    except venv_pack.VenvPackException as err:
        raise BundleError(f"venv-pack cannot pack the executors' virtualenv: {err}") from None
    path.chmod(0o644)  # venv-pack writes it private; it is uploaded to clusters like the zip


def build(out: Path) -> Bundle:
    """Write the zip and the packed environment into `out` (created), whole or not at all."""
    out = Path(out).expanduser().absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    pinned = requirements()
    seconds: dict[str, float] = {}
    staging = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}-building-"))
    work = Path(tempfile.mkdtemp(prefix="pubsubguard-bundle-env-"))
    try:
        started = time.monotonic()
        write_zip(staging / ZIP_NAME)
        seconds["zip"] = time.monotonic() - started
        started = time.monotonic()
        write_env(staging / ENV_NAME, pinned, work)
        seconds["env"] = time.monotonic() - started
        out.mkdir(exist_ok=True)
        for name in (ZIP_NAME, ENV_NAME):
            os.replace(staging / name, out / name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    return Bundle(out, out / ZIP_NAME, out / ENV_NAME, pinned, seconds)


def shell_line(command: list[str]) -> str:
    return " ".join(shlex.quote(part) for part in command)
