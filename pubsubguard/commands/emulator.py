"""`pubsubguard emulator start|stop|status`: one real Pub/Sub emulator on a free loopback port.

The emulator outlives the command; its pid, process group, host and project are kept in
`.pubsubguard/emulator.json` under the project directory (the current one, or `-C DIR`), with its
log beside it: each project has its own emulator, and `stop` ends only that one. `start` reuses a
running one and prints `export PUBSUB_EMULATOR_HOST=...` on stdout, so `eval "$(pubsubguard emulator
start)"` points the shell at it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pubsubguard.core import emulator as emu
from pubsubguard.commands import options


def register(subparsers) -> None:
    parser = options.add_command(
        subparsers, "emulator", "start, stop or inspect this project's local Pub/Sub emulator",
        exit_codes={0: "started (or already running) / stopped / status: running",
                    1: "status: not running",
                    2: "bad option; the emulator or Java is not installed; it did not start"},
        example='eval "$(pubsubguard emulator start)"   # exports PUBSUB_EMULATOR_HOST for this shell',
    )
    parser.add_argument("action", choices=("start", "stop", "status"),
                        help="start one (or reuse the running one), stop it, or say whether it runs")
    options.add_project_argument(parser)
    parser.add_argument("--project", default="pubsubguard-dev", help="Google Cloud project id the clients use")
    parser.add_argument("--port", type=options.port, default=None, help="loopback port (default: a free one)")
    parser.add_argument("--timeout", type=options.positive_seconds, default=90,
                        help="seconds to wait for it to answer")
    parser.set_defaults(run=run)


def run(args) -> int:
    return {"start": start, "stop": stop, "status": status}[args.action](args)


def _ours(recorded: emu.Emulator) -> bool:
    """The recorded pid is still the emulator we started (not a reused pid)."""
    try:
        cmdline = Path(f"/proc/{recorded.pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return recorded.running()
    return f"--port={recorded.host.rsplit(':', 1)[1]}" in cmdline


def start(args) -> int:
    recorded = emu.load_state(args.root)
    if recorded is not None and recorded.running():
        print(f"emulator: already running at {recorded.host} (pid {recorded.pid}, project {recorded.project})", file=sys.stderr)
        print(f"export {emu.HOST_ENV}={recorded.host}")
        return 0
    state_dir = emu.state_path(args.root).parent
    started = emu.Emulator.start(project=args.project, port=args.port, state_dir=state_dir, timeout=args.timeout)
    path = emu.save_state(started, args.root)
    print(f"emulator: running at {started.host} (pid {started.pid}, project {started.project}); push "
          f"subscriptions go to {started.push_receiver}; state {path}, log {started.log}", file=sys.stderr)
    print(f"export {emu.HOST_ENV}={started.host}")
    return 0


def stop(args) -> int:
    recorded = emu.load_state(args.root)
    path = emu.state_path(args.root)
    if recorded is None:
        print(f"emulator: not running (no {path})", file=sys.stderr)
        return 0
    if recorded.pid is not None and emu.pid_alive(recorded.pid) and _ours(recorded):
        recorded.stop()
        print(f"emulator: stopped {recorded.host} (pid {recorded.pid})", file=sys.stderr)
    else:
        print(f"emulator: {recorded.host} (pid {recorded.pid}) was not running; removed {path}", file=sys.stderr)
    path.unlink(missing_ok=True)
    return 0


def status(args) -> int:
    recorded = emu.load_state(args.root)
    if recorded is None:
        print(f"emulator: not running (no {emu.state_path(args.root)})")
        return 1
    pid_alive = recorded.pid is not None and emu.pid_alive(recorded.pid)
    answering = emu.answers(recorded.host)
    if pid_alive and answering:
        print(f"emulator: running at {recorded.host} (pid {recorded.pid}, project {recorded.project}); log {recorded.log}")
        return 0
    why = "process gone" if not pid_alive else "process alive but the port does not answer"
    print(f"emulator: not running ({why}; recorded {recorded.host}, pid {recorded.pid})")
    return 1
