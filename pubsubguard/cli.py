"""`pubsubguard`: the one entry point. Each subcommand lives in `pubsubguard.commands.<name>` and
exposes `register(subparsers)`, which adds its parser with `set_defaults(run=function)`; `run(args)`
returns the exit code.

Exit codes: 0 ok / passed / holds, 1 rejected / violated, 2 usage, input or environment error,
130 interrupted. Every error is one line on stderr, `pubsubguard COMMAND: what, where, the fix`:
user errors (`pubsubguard.core.errors.UserError`) and bad options as they are; an OS error (a file that
cannot be read or written) with the file; anything unexpected with its type and message and a
pointer to `PUBSUBGUARD_DEBUG=1`, which re-raises it so the traceback is printed (a bug is never
hidden, only kept off the user's terminal until asked for)."""

from __future__ import annotations

import atexit
import importlib
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from pubsubguard.commands import options
from pubsubguard.core.errors import DEBUG_ENV, INTERRUPTED_EXIT, UserError, debugging, unexpected

COMMANDS = ("plan", "emulator", "apply", "check", "verify", "run", "watch", "conform", "bundle", "pack")
EXAMPLE = """exit codes: 0 ok/passed/holds, 1 rejected/violated, 2 usage, input or environment error, 130 interrupted

the project is the current directory (-C DIR for another); the stack is -s NAME (default dev).
example (the whole flow on the local emulator):
  pubsubguard run -s dev
  pubsubguard COMMAND --help    # options, defaults, exit codes and an example for each command"""


def version() -> str:
    """`pubsubguard.core.__version__`, the one place the version is written (the wheel's metadata is built from it;
    `pubsubguard.__version__` re-exports it)."""
    from pubsubguard.core import __version__

    return __version__


def build_parser() -> options.Parser:
    parser = options.Parser(
        prog="pubsubguard",
        description="Declare, judge and prove a Google Cloud Pub/Sub estate with delivery guarantees.",
        epilog=EXAMPLE, formatter_class=options.HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"pubsubguard {version()}")
    subparsers = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    from pubsubguard.core import extras

    for name in COMMANDS:
        if name in extras.NEEDS_VERIFY and extras.verify_missing():
            extras.register_stub(subparsers, name)  # its options need the extra's modules
            continue
        importlib.import_module(f"pubsubguard.commands.{name}").register(subparsers)
    return parser


_interrupted = threading.Event()


def _interrupt(signum, _frame):
    """Ctrl-C and SIGTERM unwind as KeyboardInterrupt, so every `finally` runs (emulators stopped,
    probe twins deleted). The flag remembers it: an interrupt that lands inside a library (an import
    cut short, a py4j call) can surface as some other exception, which is then still "interrupted"."""
    _interrupted.set()
    raise KeyboardInterrupt(f"signal {signum}")


def _debug() -> bool:
    return debugging()


def _os_error(err: OSError) -> str:
    where = " -> ".join(str(name) for name in (err.filename, err.filename2) if name)
    what = err.strerror or str(err)
    return f"{where}: {what}" if where else f"{type(err).__name__}: {what}"


class _NoTraceback(logging.Formatter):
    """A library's log record as its message alone: the traceback it carries is not for the user."""

    def formatException(self, ei) -> str:  # noqa: N802 - the logging API
        return ""

    def formatStack(self, stack_info) -> str:  # noqa: N802
        return ""


def _not_an_interrupt(record: logging.LogRecord) -> bool:
    """Dropped: py4j's own records ("KeyboardInterrupt while sending command.", "Exception while sending
    command." with the trace of every call Ctrl-C cut short; the error that matters reaches the command,
    which prints it once), and any record whose exception an interrupt caused."""
    if "py4j" in Path(record.pathname).parts:
        return False
    error = record.exc_info[1] if record.exc_info else None
    seen = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, KeyboardInterrupt):
            return False
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return True


_QUIET = logging.StreamHandler(sys.stderr)
_QUIET.setLevel(logging.WARNING)  # what Python prints when nothing is configured (logging.lastResort)
_QUIET.setFormatter(_NoTraceback("%(message)s"))
_QUIET.addFilter(_not_an_interrupt)


def _quiet_libraries(command: str) -> None:
    """Libraries' tracebacks stay off the terminal (PUBSUBGUARD_DEBUG=1 shows them): an exception that
    ends a helper thread is one line, a library's log record is its message alone."""
    if _debug():
        return

    def hook(args):
        if issubclass(args.exc_type, (KeyboardInterrupt, SystemExit)):
            return
        name = args.thread.name if args.thread else "a thread"
        print(f"pubsubguard {command}: in {name}: {args.exc_type.__name__}: {args.exc_value}", file=sys.stderr)

    threading.excepthook = hook
    if not logging.root.handlers:
        logging.root.addHandler(_QUIET)


def _end_children() -> None:
    """After an interrupt, end the processes this one started and that share its process group (a
    Spark JVM still starting ignores Ctrl-C and would print its own stack trace later). Emulators run
    in groups of their own and are stopped by the commands' `finally`."""
    me, group = os.getpid(), os.getpgid(0)
    try:
        stats = [path.read_text() for path in Path("/proc").glob("[0-9]*/stat")]
    except OSError:
        return
    children: dict[int, list[int]] = {}
    for stat in stats:
        try:
            fields = stat.rsplit(")", 1)[1].split()
            pid = int(stat.split(" ", 1)[0])
            children.setdefault(int(fields[1]), []).append(pid)
        except (IndexError, ValueError):
            continue
    pending, found = list(children.get(me, [])), []
    while pending:
        pid = pending.pop()
        found.append(pid)
        pending.extend(children.get(pid, []))
    for pid in found:
        try:
            if os.getpgid(pid) == group:
                os.kill(pid, signal.SIGTERM)
        except (ProcessLookupError, PermissionError):
            continue


def main(argv: list[str] | None = None) -> int:
    if threading.current_thread() is threading.main_thread():
        for sig, default in ((signal.SIGINT, signal.default_int_handler), (signal.SIGTERM, signal.SIG_DFL)):
            if signal.getsignal(sig) is default:
                signal.signal(sig, _interrupt)
    from pubsubguard.core import extras

    command = extras.command_of(sys.argv[1:] if argv is None else argv)
    if command in extras.NEEDS_VERIFY and extras.verify_missing():  # before its parser, which needs them
        print(f"pubsubguard {command}: {extras.message(extras.verify_missing())}", file=sys.stderr)
        return 2
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as done:  # --help, --version, or a bad option (its one line is printed)
        return done.code if isinstance(done.code, int) else 2
    except KeyboardInterrupt:
        return _interrupted_exit("pubsubguard:")
    except ImportError as err:  # an installation that does not match the code (a package added since)
        if _debug():
            raise
        print(f"pubsubguard: cannot load the commands: {type(err).__name__}: {err} (the installation is out of "
              f"date or broken: run `bash scripts/setup.sh`; {DEBUG_ENV}=1 for the traceback)", file=sys.stderr)
        return 2
    _quiet_libraries(args.command)
    atexit.unregister(_close_stray_event_loops)  # registered once, however often one process calls main (the tests do)
    atexit.register(_close_stray_event_loops)
    prefix = f"pubsubguard {args.command}:"
    try:
        return int(args.run(args) or 0)
    except UserError as err:
        print(f"{prefix} {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        return _interrupted_exit(prefix)
    except BrokenPipeError:  # `pubsubguard plan | head`: the reader went away; not an error of ours
        _silence_stdout()
        return 0
    except OSError as err:
        if _interrupted.is_set():
            return _interrupted_exit(prefix)
        if _debug():
            raise
        print(f"{prefix} {_os_error(err)} (run with {DEBUG_ENV}=1 for the traceback)", file=sys.stderr)
        return 2
    except Exception as err:  # noqa: BLE001 - a bug: one line here, the traceback on request
        if _interrupted.is_set():
            return _interrupted_exit(prefix)
        if _debug():
            raise
        if isinstance(err, ModuleNotFoundError) and extras.for_missing_module(err.name):
            print(f"{prefix} {extras.for_missing_module(err.name)}", file=sys.stderr)
            return 2
        print(unexpected(prefix, err), file=sys.stderr)
        return 2


def _interrupted_exit(prefix: str) -> int:
    _interrupted.set()
    _end_children()
    print(f"{prefix} interrupted", file=sys.stderr)
    return INTERRUPTED_EXIT


def _close_stray_event_loops() -> None:
    """Close the event loops the Pulumi SDK leaves behind. Its mock monitor's `_ensure_event_loop()`
    makes one in each executor thread that registers a resource and never closes it; collected at
    interpreter shutdown after their self-pipe sockets, they printed "Exception ignored in
    BaseEventLoop.__del__ ... ValueError: Invalid file descriptor: -1" now and then. At exit
    (atexit runs before that teardown) every loop that is not running is closed properly."""
    import asyncio
    import gc

    for obj in gc.get_objects():
        if isinstance(obj, asyncio.AbstractEventLoop) and not obj.is_running() and not obj.is_closed():
            obj.close()


def _silence_stdout() -> None:
    """After a broken pipe, point stdout at /dev/null so the interpreter's final flush stays quiet."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


if __name__ == "__main__":
    sys.exit(main())
