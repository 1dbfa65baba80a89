"""User-facing errors: the message says which file or option, which field, what was expected."""

from __future__ import annotations

from pathlib import Path


DEBUG_ENV = "PUBSUBGUARD_DEBUG"  # set (not 0): an unexpected error raises with its traceback


class UserError(Exception):
    exit_code = 2


def debugging() -> bool:
    import os

    return os.environ.get(DEBUG_ENV, "") not in ("", "0")


def unexpected(prefix: str, err: BaseException) -> str:
    """The one line an unexpected error (a bug) gets on every command line (exit 2, never 1: a crash is not
    a rejection or a violation)."""
    return (f"{prefix} unexpected error: {type(err).__name__}: {err} (a bug; run with {DEBUG_ENV}=1 "
            "for the traceback and report it)")


def json_problem(raw: bytes | str, err) -> str:
    """What is wrong with JSON text that `json.loads` refused (`err`, a JSONDecodeError), for a one-line
    error: `truncated at line L column C (...)` for a cut file (it ends inside the document: an unterminated
    string, or no closing brace), else `not JSON at ...`."""
    ends = raw.rstrip() if isinstance(raw, bytes) else raw.rstrip().encode()
    cut = err.pos >= len(ends) or err.msg.startswith("Unterminated") or not ends.endswith(b"}")
    return f"{'truncated' if cut else 'not JSON'} at line {err.lineno} column {err.colno} ({err.msg})"


def read_yaml_mapping(path: Path, error: type[UserError], missing_hint: str, expected: str) -> dict:
    """A YAML file that must hold a mapping, or `error` naming the file and what was expected."""
    import yaml

    try:
        data = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise error(f"{path}: not found ({missing_hint})") from None
    except yaml.YAMLError as err:
        raise error(f"{path}: not valid YAML: {err}") from None
    if not isinstance(data, dict):
        raise error(f"{path}: expected {expected}")
    return data
