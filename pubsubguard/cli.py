"""`pubsubguard`: the one entry point. Each subcommand lives in `pubsubguard.commands.<name>` and
exposes `register(subparsers)`, which adds its parser with `set_defaults(run=function)`; `run(args)`
returns the exit code. User errors are raised as `pubsubguard.errors.UserError` (or a subclass) and
printed as one message, never a traceback."""

from __future__ import annotations

import argparse
import importlib
import signal
import sys

from pubsubguard.errors import UserError

COMMANDS = ("plan", "emulator", "apply", "check", "verify", "run", "conform")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pubsubguard",
        description="Declare, judge and prove a Google Cloud Pub/Sub estate with delivery guarantees.",
    )
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"pubsubguard.commands.{name}")
        except ModuleNotFoundError as err:
            if err.name == f"pubsubguard.commands.{name}":
                continue  # not built yet
            raise
        module.register(subparsers)
    return parser


def _terminate(signum, _frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so every `finally` runs: emulators stopped, probe twins deleted.
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminate)
    try:
        return int(args.run(args) or 0)
    except UserError as err:
        print(f"pubsubguard {args.command}: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print(f"pubsubguard {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
