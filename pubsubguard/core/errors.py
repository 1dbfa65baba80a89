"""User-facing errors: the message says which file or option, which field, what was expected."""

from __future__ import annotations


DEBUG_ENV = "PUBSUBGUARD_DEBUG"  # set (not 0): an unexpected error raises with its traceback
INTERRUPTED_EXIT = 130  # every command's exit code when Ctrl-C or SIGTERM cut it short (the shell's 128 + SIGINT)


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


class VerifyError(UserError):
    """The verification run cannot go on: the message says which option or input and what was expected."""
