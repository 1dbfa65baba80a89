"""The user's cache folder, where pubsubguard keeps what it makes once and reuses: the pack's virtualenv
(`pubsubguard/judging/packenv.py`) and Spark's class archive (`validation/class_archive.py`).

`$PUBSUBGUARD_CACHE_DIR`, else `$XDG_CACHE_HOME/pubsubguard`, else `~/.cache/pubsubguard`.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "PUBSUBGUARD_CACHE_DIR"


def cache_root() -> Path:
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "pubsubguard"


class FileLock:
    """An exclusive lock on a file (flock): one builder at a time; the others wait, then find it built."""

    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = None

    def __enter__(self) -> "FileLock":
        import fcntl

        self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc) -> None:
        import fcntl

        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
