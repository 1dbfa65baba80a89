"""One verify run per report and evidence directory at a time.

A probe run holds its report directory (its evidence is `<report>/evidence`) from before the evidence is
emptied until its report is written; a re-check (`--from-evidence`) holds its report directory and the
directory holding the evidence (where it keeps the checks' sorted input). A second run that wants a held
directory refuses at once, in one line naming the run that holds it (its pid, host, start and command
line): two runs never write, empty or read the same evidence together.

The lock is `fcntl.flock` on `<directory>/.pubsubguard.lock`: the kernel releases it when the process ends,
however it ends (a killed run leaves no stale lock; the file stays, naming the last holder). Local
directories only: an object store (gs://, s3a://) has no lock, and a directory that cannot be written
(read-only evidence, `--no-checks-input`) cannot be written by another run either and is not locked.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from pathlib import Path

from pubsubguard.core import storage
from pubsubguard.core.errors import VerifyError

LOCK = ".pubsubguard.lock"

_held: dict[str, object] = {}  # directory (real path) -> the open lock file


class DirectoryInUse(VerifyError):
    """Another verify run holds the directory."""


def acquire(directory: Path | str, what: str) -> None:
    """Hold `directory` for this process until the enclosing `scope()` ends (DirectoryInUse when another
    run holds it). `what`: the option that named it, for the message."""
    import fcntl

    if storage.is_remote(directory):
        return
    path = Path(directory).resolve()
    key = str(path)
    if key in _held:
        return
    try:
        path.mkdir(parents=True, exist_ok=True)
        handle = open(path / LOCK, "a+")  # noqa: SIM115 - held until the scope ends
    except OSError:
        if os.access(path, os.W_OK):
            raise
        return  # nothing can be written there: by no other run either
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.seek(0)
        holder = " ".join(handle.read().split())[:400] or "another process"
        handle.close()
        raise DirectoryInUse(f"{what} {directory}: in use by another verify run ({holder}); wait for it to end or "
                             "choose another directory") from None
    handle.seek(0)
    handle.truncate()
    command = " ".join(sys.argv)[:200]
    handle.write(f"pid {os.getpid()} on {socket.gethostname()} since {time.strftime('%Y-%m-%d %H:%M:%S %Z')}: {command}\n")
    handle.flush()
    _held[key] = handle


@contextlib.contextmanager
def scope():
    """Every directory acquired inside is released when it ends."""
    before = set(_held)
    try:
        yield
    finally:
        for key in [k for k in _held if k not in before]:
            _held.pop(key).close()  # closing the file releases the flock


@contextlib.contextmanager
def held(*directories: tuple[str, Path | str]):
    """Hold each (what, directory) for the block (a scope of its own)."""
    with scope():
        for what, directory in directories:
            acquire(directory, what)
        yield
