"""The Node.js packages the tests give TypeScript/JavaScript programs, as a team's `npm ci` leaves them.

`tests/nodejs/package.json` and its `package-lock.json` pin @pulumi/pulumi, @pulumi/gcp, typescript and
@types/node, as Pulumi's TypeScript template declares them (no ts-node: the SDK's own runs TypeScript, as
for a team on the template). They are installed once per machine (`npm ci --ignore-scripts`) into the user's cache, keyed by
the lockfile's digest: `~/.cache/pubsubguard-tests/node/<digest>/node_modules`. `scripts/setup.sh` runs
this module to install them (`python tests/nodejs_projects.py`); a test gives a program a copy of its
folder with `node_modules` a symbolic link to that install (`as_node_project`), as a team's installed
modules are. Standard library only: setup runs it before anything else is there."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PACKAGES = Path(__file__).resolve().parent / "nodejs"


def cache_root() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "pubsubguard-tests"


def lockfile_digest() -> str:
    return hashlib.sha256((PACKAGES / "package-lock.json").read_bytes()).hexdigest()[:16]


def installed_folder() -> Path:
    return cache_root() / "node" / lockfile_digest()


def install() -> Path:
    """The folder whose `node_modules` holds the pinned packages, installed if it is not yet (atomic: an
    interrupted install leaves nothing a later run would take for complete)."""
    folder = installed_folder()
    if (folder / ".complete").exists():
        return folder
    npm = shutil.which("npm")
    if npm is None:
        raise SystemExit("setup: npm is not on PATH; the TypeScript programs' tests need it (apt-get install npm)")
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
    try:
        for name in ("package.json", "package-lock.json"):
            shutil.copy(PACKAGES / name, staging / name)
        done = subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
                              cwd=staging, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=1200)
        if done.returncode != 0:
            raise SystemExit(f"setup: npm ci in {PACKAGES} failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
        (staging / ".complete").write_text(lockfile_digest())
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for stale in folder.parent.iterdir():  # an earlier lockfile's install: never used again
        if stale != folder and not stale.name.startswith("."):
            shutil.rmtree(stale, ignore_errors=True)
    return folder


def node_modules() -> Path:
    return install() / "node_modules"


def as_node_project(source: Path, destination: Path) -> Path:
    """A copy of the program at `source` with `node_modules` linked to the cached install."""
    shutil.copytree(source, destination, symlinks=True,
                    ignore=shutil.ignore_patterns("node_modules"))
    link = destination / "node_modules"
    if not link.exists():
        link.symlink_to(node_modules(), target_is_directory=True)
    return destination


if __name__ == "__main__":
    where = install()
    print(f"setup: Node.js packages for the tests in {where}", file=sys.stderr)
