"""The Node.js packages the tests give TypeScript/JavaScript programs, as a team's `npm ci` leaves them.

`tests/nodejs/package.json` and its `package-lock.json` pin @pulumi/pulumi, @pulumi/gcp, typescript and
@types/node, as Pulumi's TypeScript template declares them (no ts-node: the SDK's own runs TypeScript, as
for a team on the template). They are installed once per machine (`npm ci --ignore-scripts`) into the user's cache, keyed by
the lockfile's digest: `~/.cache/pubsubguard-tests/node/<digest>/node_modules`. `scripts/setup.sh` runs
this module to install them (`python tests/support/nodejs_projects.py`); a test gives a program a copy of its
folder with `node_modules` a symbolic link to that install (`as_node_project`), as a team's installed
modules are. Standard library only: setup runs it before anything else is there.

Test processes share these caches, and may run at once (`pytest -n N`, several checkouts): `ensure` builds
an entry of them under a lock, for `tests/support/installed.py` too."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import BinaryIO, Callable

PACKAGES = Path(__file__).resolve().parents[1] / "nodejs"


def cache_root() -> Path:
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "pubsubguard-tests"


# --- one cache entry, built by one process at a time -----------------------------------------------
# An entry is a folder, complete once its `.complete` file exists (written last). Its lock file beside it,
# `<entry>.lock`, is locked with flock: exclusively while a process checks and builds the entry, so no two
# build it at once and none sees it half built; shared from then on, for as long as the process that asked
# for the entry lives (it is in use), so that no other process removes it as stale meanwhile (one whose
# sources changed during the run). The kernel drops a dead process's locks.
_IN_USE: dict[Path, BinaryIO] = {}


def _lock_path(entry: Path) -> Path:
    return entry.with_name(f"{entry.name}.lock")


def _lock(entry: Path, how: int) -> BinaryIO:
    """The entry's lock file, open and locked `how` (flock); the one at its path, which `remove_stale` may
    have unlinked while this process was waiting on the one it had opened."""
    path = _lock_path(entry)
    while True:
        handle = open(path, "ab")
        try:
            fcntl.flock(handle, how)
            if os.fstat(handle.fileno()).st_ino == os.stat(path).st_ino:
                return handle
        except FileNotFoundError:
            pass
        except BaseException:
            handle.close()
            raise
        handle.close()


def ensure(entry: Path, build: Callable[[], None]) -> Path:
    """`entry`, complete: `build()` (which must write `entry/.complete` last) runs unless it is complete."""
    held = _IN_USE.pop(entry, None)
    if held is not None:
        if (entry / ".complete").exists():
            _IN_USE[entry] = held
            return entry
        held.close()  # removed meanwhile: this process's own lock would block building it again
    entry.parent.mkdir(parents=True, exist_ok=True)
    handle = _lock(entry, fcntl.LOCK_SH)  # waits while another process builds it
    try:
        while not (entry / ".complete").exists():
            handle.close()
            handle = _lock(entry, fcntl.LOCK_EX)
            if not (entry / ".complete").exists():  # (another process may have built it meanwhile)
                shutil.rmtree(entry, ignore_errors=True)  # what an interrupted build left
                build()
                if not (entry / ".complete").exists():
                    raise RuntimeError(f"{entry}: built without its .complete marker")
            handle.close()
            handle = _lock(entry, fcntl.LOCK_SH)
    except BaseException:
        handle.close()
        raise
    _IN_USE[entry] = handle
    return entry


def remove_stale(entry: Path) -> None:
    """Remove the entries beside `entry` (earlier code's or lockfile's: never used again), with their lock
    files, but those another process is building or using; hidden names (a staging folder) stay."""
    names = {p.name.removesuffix(".lock") for p in entry.parent.iterdir() if not p.name.startswith(".")}
    for name in sorted(names - {entry.name}):
        other = entry.parent / name
        try:
            handle = _lock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            continue  # being built or used
        with handle:
            shutil.rmtree(other, ignore_errors=True)
            _lock_path(other).unlink()


def lockfile_digest() -> str:
    return hashlib.sha256((PACKAGES / "package-lock.json").read_bytes()).hexdigest()[:16]


def installed_folder() -> Path:
    return cache_root() / "node" / lockfile_digest()


def install() -> Path:
    """The folder whose `node_modules` holds the pinned packages, installed if it is not yet (atomic: an
    interrupted install leaves nothing a later run would take for complete; one process installs at a
    time, `ensure`)."""
    folder = installed_folder()

    def build() -> None:
        npm = shutil.which("npm")
        if npm is None:
            raise SystemExit("setup: npm is not on PATH; the TypeScript programs' tests need it (apt-get install npm)")
        staging = Path(tempfile.mkdtemp(prefix=f".{folder.name}-", dir=folder.parent))
        try:
            for name in ("package.json", "package-lock.json"):
                shutil.copy(PACKAGES / name, staging / name)
            done = subprocess.run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"],
                                  cwd=staging, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=1200)
            if done.returncode != 0:
                raise SystemExit(f"setup: npm ci in {PACKAGES} failed: {(done.stderr.strip().splitlines() or ['?'])[-1]}")
            (staging / ".complete").write_text(lockfile_digest())
            staging.rename(folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        remove_stale(folder)  # an earlier lockfile's install: never used again

    return ensure(folder, build)


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
