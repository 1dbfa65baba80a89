"""`pubsubguard emulator start|stop|status`: one real Pub/Sub emulator on a free loopback port.

The emulator outlives the command; its pid, process group, host and project are kept in
`.pubsubguard/emulator.json` under the project root (with its log beside it). `start` reuses a
running one and prints `export PUBSUB_EMULATOR_HOST=...` on stdout, so `eval "$(pubsubguard emulator
start)"` points the shell at it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from pubsubguard import emulator as emu


def register(subparsers) -> None:
    parser = subparsers.add_parser("emulator", help="start, stop or inspect the local Pub/Sub emulator")
    parser.add_argument("action", choices=("start", "stop", "status"))
    parser.add_argument("--root", type=Path, default=None, help="project directory (state in ROOT/.pubsubguard/)")
    parser.add_argument("--project", default="pubsubguard-dev", help="project id clients use (default: pubsubguard-dev)")
    parser.add_argument("--port", type=int, default=None, help="loopback port (default: a free one)")
    parser.add_argument("--timeout", type=float, default=90, help="seconds to wait for it to answer (default: 90)")
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
    print(f"emulator: running at {started.host} (pid {started.pid}, project {started.project}); "
          f"state {path}, log {started.log}", file=sys.stderr)
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
