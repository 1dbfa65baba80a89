"""The one reader of the YAML and JSON files a user names (a plan, a stack file, a suppressions file, a
policy config, invoke results, a run's records): its document, or a one-line error that names the file and
what was expected."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pubsubguard.core.errors import UserError


def json_problem(raw: bytes | str, err) -> str:
    """What is wrong with JSON text that `json.loads` refused (`err`, a JSONDecodeError), for a one-line
    error: `truncated at line L column C (...)` for a cut file (it ends inside the document: an unterminated
    string, or no closing brace), else `not JSON at ...`."""
    ends = raw.rstrip() if isinstance(raw, bytes) else raw.rstrip().encode()
    cut = err.pos >= len(ends) or err.msg.startswith("Unterminated") or not ends.endswith(b"}")
    return f"{'truncated' if cut else 'not JSON'} at line {err.lineno} column {err.colno} ({err.msg})"


def read_mapping(path, error: type[UserError], *, where: str | None = None, missing: str | None = "",
                 language: str = "YAML", expected: str | None = None, read=None) -> Any:
    """The one loader of a YAML or JSON file a user names: its document, or `error` with one line naming
    the file (`where`, default the path) and what was expected:
    - absent: `missing` (the whole line; default `{where}: no such file`), or None returned when `missing`
      is None (an optional file);
    - unreadable (a directory, no permission, not text): `{where}: cannot be read (PermissionError)`;
    - not parsed: `{where}: not JSON (...)` (`language="JSON"`), else
      `{where}:LINE:COLUMN: not valid YAML: problem` (`language` names what is accepted: "YAML or JSON");
    - `expected` given and the document not a mapping: `{where}: expected {expected}`.
    `read(path) -> str` reads it (default: the local file; `storage.read_text` for object stores)."""
    where = str(path) if where is None else where
    try:
        text = read(path) if read is not None else Path(path).read_text()
    except FileNotFoundError:
        if missing is None:
            return None
        raise error(missing or f"{where}: no such file") from None
    except (IsADirectoryError, PermissionError, UnicodeDecodeError) as err:
        raise error(f"{where}: cannot be read ({err.__class__.__name__})") from None
    if language == "JSON":
        import json

        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise error(f"{where}: not JSON ({err})") from None
    else:
        import yaml

        try:
            data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # libyaml when built
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
            at = f":{mark.line + 1}:{mark.column + 1}" if mark is not None else ""
            problem = getattr(err, "problem", None) or str(err).splitlines()[0]
            raise error(f"{where}{at}: not valid {language}: {problem}") from None
    if expected is not None and not isinstance(data, dict):
        raise error(f"{where}: expected {expected}")
    return data


def read_yaml_mapping(path: Path, error: type[UserError], missing_hint: str, expected: str) -> dict:
    """A YAML file that must hold a mapping (`read_mapping`)."""
    return read_mapping(path, error, missing=f"{path}: not found ({missing_hint})", expected=expected)
