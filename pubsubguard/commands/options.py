"""What every command's options share: the parser (one error line, exit 2), the help layout
(defaults, exit codes, an example), validators that reject bad values at parse time, and output
paths checked before any work starts."""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from pubsubguard.errors import UserError

INTERRUPTED = (130, "interrupted (Ctrl-C or SIGTERM)")


class Parser(argparse.ArgumentParser):
    """An argument error is one line naming the option and what was expected, then exit 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Every option's default in its help, unless the help already says it or there is none to say."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default:" in text or "%(default)" in text or not action.option_strings:
            return text
        if action.default in (None, False, argparse.SUPPRESS) or isinstance(action, (argparse._HelpAction, argparse._StoreConstAction)):
            return text
        return f"{text} (default: %(default)s)"


def epilog(exit_codes: dict[int, str], example: str) -> str:
    codes = "\n".join(f"  {code:<4}{text}" for code, text in sorted({**exit_codes, INTERRUPTED[0]: INTERRUPTED[1]}.items()))
    return f"exit codes:\n{codes}\n\nexample:\n  {example}"


def description(help: str) -> str:
    """A command's one-line help as the sentence `--help` opens with: capitalised, ending in one stop
    (a question keeps its question mark)."""
    return help[0].upper() + help[1:] + ("" if help.endswith((".", "?", "!")) else ".")


def add_command(subparsers, name: str, help: str, exit_codes: dict[int, str], example: str, **kwargs):
    return subparsers.add_parser(
        name, help=help, description=description(help), epilog=epilog(exit_codes, example),
        formatter_class=HelpFormatter, **kwargs,
    )


# --- Values ---------------------------------------------------------------------------------------
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


def faults(text: str) -> str:
    """`--faults`: the spec as given, once it parses (validation.faults holds the grammar)."""
    from validation.faults import parse_faults

    try:
        parse_faults(text)
    except UserError as err:
        raise argparse.ArgumentTypeError(str(err).removeprefix("--faults: ")) from None
    return text


def endpoint_mapping(text: str) -> str:
    """`--endpoint REGION=HOST:PORT`: one mapping as given, once it parses (validation.endpoints)."""
    from validation.endpoints import parse_endpoint_map

    try:
        parse_endpoint_map([text])
    except UserError as err:
        raise argparse.ArgumentTypeError(str(err).split(": ", 1)[1]) from None
    return text


def remote_or(local):
    """A validator: an object store URI (pubsubguard.storage) of a known scheme as it is, else `local`'s."""

    def parse(text: str):
        from pubsubguard import storage

        return remote_location(text) if storage.is_remote(text) else local(text)

    return parse


def or_checkpoint(parse):
    """`--state [FILE]`: FILE as `parse` reads it; the option alone ("", argparse's const, which it also
    converts) stays "": the stack's checkpoint in its backend (`pubsubguard.state.load`)."""

    def convert(text: str):
        return text if text == "" else parse(text)

    return convert


def remote_location(text: str) -> str:
    from pubsubguard import storage

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


def write_text(path: Path, text: str, option: str) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    except OSError as err:
        raise UserError(f"{option} {path}: cannot write ({err.strerror or err})") from None


def write_stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
