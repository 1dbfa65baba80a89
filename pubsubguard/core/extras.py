"""Which commands need the `verify` extra, and the one line that says so when it is missing.

`pip install pubsubguard` is what gating pull requests needs (`check`, `plan`, `pack`); the verification
job's heavy dependencies (Spark, the Pub/Sub client, the report's plotting) come with
`pip install 'pubsubguard[verify]'`."""

from __future__ import annotations

import importlib.util

VERIFY_MODULES = ("pyspark", "google.cloud.pubsub_v1", "pandas", "pyarrow", "matplotlib", "jinja2", "rich", "venv_pack")
NEEDS_VERIFY = {"verify", "run", "apply", "emulator", "conform", "bundle"}


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


_verify_missing: list[str] | None = None


def verify_missing() -> list[str]:
    """The verify extra's modules that are not installed (looked up once: no module is imported)."""
    global _verify_missing
    if _verify_missing is None:
        _verify_missing = _missing(VERIFY_MODULES)
    return _verify_missing


def command_of(argv: list[str]) -> str | None:
    """The subcommand of a command line (the first word that is not an option; the top-level options
    take no values)."""
    return next((word for word in argv if not word.startswith("-")), None)


def register_stub(subparsers, name: str) -> None:
    """`pubsubguard --help` still lists a command whose extra is missing, and says what it needs."""
    subparsers.add_parser(name, help="(needs the verify extra: pip install 'pubsubguard[verify]')")


def for_missing_module(name: str | None) -> str | None:
    """The one line for an ImportError of a module the verify extra brings, else None."""
    top = (name or "").split(".")[0]
    if top and any(module.split(".")[0] == top for module in VERIFY_MODULES + ("pulumi_gcp",)):
        return message([name])
    return None
