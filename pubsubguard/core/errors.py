"""User-facing errors: the message says which file or option, which field, what was expected."""

from __future__ import annotations

from pathlib import Path


class UserError(Exception):
    exit_code = 2


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
