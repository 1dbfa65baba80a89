"""The commands, one module each: `register(subparsers)` adds its parser (options, exit codes, an
example), `run(args)` does the work. `pubsubguard.cli` builds the command line from them; `run_command`
runs one as a step of another (`run`), with its own parser, never by re-entering the command line; `step`
runs a command's function on a value already built (`run`'s verify step: a `RunConfig`)."""

from __future__ import annotations

import importlib
import sys
from typing import Callable

from pubsubguard.commands import options
from pubsubguard.core.errors import UserError


def run_command(name: str, argv: list[str]) -> int:
    """One command's function on its options, as a step of another command (`run`): the command's own
    parser and `run(args)`, its user errors as one line and their exit code. The process-wide setup
    (signals, logging, exit hooks) stays `main`'s, done once."""
    parser = options.Parser(prog="pubsubguard", formatter_class=options.HelpFormatter)
    importlib.import_module(f"pubsubguard.commands.{name}").register(parser.add_subparsers(dest="command"))
    try:
        args = parser.parse_args([name, *argv])
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else 2
    return step(name, lambda: args.run(args))


def step(name: str, work: Callable[[], int | None]) -> int:
    """`work` (a command's function, as a step of another command): its exit code, its user error as one line
    under the command's name and that error's exit code."""
    try:
        return int(work() or 0)
    except UserError as err:
        print(f"pubsubguard {name}: {err}", file=sys.stderr)
        return err.exit_code
