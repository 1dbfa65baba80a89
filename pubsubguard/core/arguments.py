"""Argument types shared by every command line of pubsubguard (its CLI and the verification job run by
spark-submit): argparse `type=` validators that turn a bad value into one line naming what was expected,
and the check of a default output path. Nothing here knows a command."""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

from pubsubguard.core.errors import UserError


def _whole_number(minimum: int):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number of at least {minimum}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected a whole number of at least {minimum}, got {value}")
        return value

    return parse


positive_int = _whole_number(1)
non_negative_int = _whole_number(0)


def positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds greater than 0, got {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds greater than 0, got {text}")
    return value


def port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 1 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a TCP port from 1 to 65535, got {text!r}")
    return value


def remote_or(local):
    """A validator: an object store URI (pubsubguard.core.storage) of a known scheme as it is, else `local`'s."""

    def parse(text: str):
        from pubsubguard.core import storage

        return remote_location(text) if storage.is_remote(text) else local(text)

    return parse


def or_checkpoint(parse):
    """`--state [FILE]`: FILE as `parse` reads it; the option alone ("", argparse's const, which it also
    converts) stays "": the stack's checkpoint in its backend (`pubsubguard.core.state.load`)."""

    def convert(text: str):
        return text if text == "" else parse(text)

    return convert


def remote_location(text: str) -> str:
    from pubsubguard.core import storage

    try:
        storage.check(text)
    except UserError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def input_file(text: str) -> Path:
    path = Path(text).expanduser()
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "no such file"
        raise argparse.ArgumentTypeError(f"{text}: {what}")
    return path


# --- Output paths -----------------------------------------------------------------------------------
def writable_problem(path: Path, directory: bool) -> str | None:
    """Why `path` cannot be written as a file (or made as a directory), or None. Nothing is created:
    the nearest existing ancestor must be a directory in which a file can be made (tried, then removed)."""
    path = Path(path).expanduser().absolute()
    if path.exists():
        if directory and not path.is_dir():
            return f"{path} exists and is not a directory"
        if not directory and path.is_dir():
            return f"{path} is a directory (expected a file name)"
    ancestor = path if directory and path.is_dir() else path.parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"{ancestor} is a file, so nothing can be created under it"
    try:
        handle, probe = tempfile.mkstemp(dir=ancestor, prefix=".pubsubguard-write-test-")
    except OSError as err:
        return f"cannot write in {ancestor} ({err.strerror or err})"
    os.close(handle)
    os.unlink(probe)
    return None


def output_file(text: str) -> Path:
    problem = writable_problem(Path(text), directory=False)
    if problem:
        raise argparse.ArgumentTypeError(f"{text}: {problem}")
    return Path(text)


def output_directory(text: str) -> Path:
    problem = writable_problem(Path(text), directory=True)
    if problem:
        raise argparse.ArgumentTypeError(f"{text}: {problem}")
    return Path(text)


def require_writable(path: Path, option: str, directory: bool) -> Path:
    """A default output path, checked as `--out` values are at parse time; UserError otherwise."""
    problem = writable_problem(path, directory)
    if problem:
        raise UserError(f"{option} {path}: {problem}; pass {option} with a writable {'directory' if directory else 'file'}")
    return path
