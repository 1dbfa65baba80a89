"""The one-line error every command promises (exit code, exactly one line on stderr, no traceback), asserted the
same way by every test that runs the command line."""

from __future__ import annotations

import subprocess


def one_line(done: subprocess.CompletedProcess, code: int, *fragments: str) -> str:
    """The run failed with `code` and exactly one stderr line, no traceback, holding every fragment."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == code, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert len(lines) == 1, done.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]
