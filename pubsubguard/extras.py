"""Which commands need the `verify` extra, and the one line that says so when it is missing.

`pip install pubsubguard` is what gating pull requests needs (`check`, `plan`, `pack`); the verification
job's heavy dependencies (Spark, the Pub/Sub client, the report's plotting) come with
`pip install 'pubsubguard[verify]'`."""

from __future__ import annotations

import importlib.util

from pubsubguard.errors import UserError

VERIFY_MODULES = ("pyspark", "google.cloud.pubsub_v1", "pandas", "pyarrow", "matplotlib", "jinja2", "rich", "venv_pack")
NEEDS_VERIFY = {"verify", "run", "apply", "emulator", "conform", "bundle"}


class MissingExtra(UserError):
    pass


def _missing(modules) -> list[str]:
    missing = []
    for name in modules:
        try:
            if importlib.util.find_spec(name) is None:
                missing.append(name)
        except (ImportError, ValueError):  # a parent package missing (google.cloud)
            missing.append(name)
    return missing


def message(missing: list[str]) -> str:
    return (f"needs the verify extra (missing: {', '.join(missing)}): pip install 'pubsubguard[verify]'")


def require(command: str) -> None:
    """Raise the one line when `command` needs the verify extra and it is not installed."""
    if command in NEEDS_VERIFY:
        missing = _missing(VERIFY_MODULES)
        if missing:
            raise MissingExtra(message(missing))


def for_missing_module(name: str | None) -> str | None:
    """The one line for an ImportError of a module the verify extra brings, else None."""
    top = (name or "").split(".")[0]
    if top and any(module.split(".")[0] == top for module in VERIFY_MODULES + ("pulumi_gcp",)):
        return message([name])
    return None
