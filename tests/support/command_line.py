"""The command line driven as a user runs it: `cli` runs `python -m pubsubguard` as a subprocess (never with a
traceback), and the `project` fixture is a copy of the project somewhere else."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support import ROOT


def cli(*argv: str, cwd: Path | None = None, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    done = subprocess.run(
        [sys.executable, "-m", "pubsubguard", *argv], capture_output=True, text=True, timeout=timeout,
        cwd=cwd or ROOT, env={**os.environ, "NO_GCE_CHECK": "true", **(env or {})},
    )
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    return done


@pytest.fixture
def project(tmp_path) -> Path:
    """A copy of the project (Pulumi.yaml, the dev stack, the program) somewhere else."""
    copy = tmp_path / "myproj"
    copy.mkdir()
    for name in ("Pulumi.yaml", "Pulumi.dev.yaml"):
        shutil.copy(ROOT / name, copy / name)
    shutil.copytree(ROOT / "infra", copy / "infra", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / ".venv").symlink_to(sys.prefix)  # the virtualenv Pulumi.yaml names, as `pulumi install` makes it
    return copy
