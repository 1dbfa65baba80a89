"""`pubsubguard watch`: the guarantees verified all the time -- a canary that probes every probed subscription at
a steady low rate through verify's isolated twins, judges the evidence with Spark Structured Streaming as it is
written, and exposes findings.jsonl, Prometheus metrics and a rolling report (`pubsubguard.validation.watch`).

Everything the command can refuse is refused before anything starts: the stack, the options, the `--out`
directory (another stack's, another format's), the metrics port. On the embedded default it reuses the emulator
`pubsubguard emulator start` runs for the project (so a restarted watch finds the same target, with its messages),
or starts its own, then plans and applies the stack as `run` does.
"""

from __future__ import annotations

import argparse
import os
import socket
from pathlib import Path

from pubsubguard.commands import options, run_command
from pubsubguard.core.errors import UserError
from pubsubguard.validation import watch as defaults
from pubsubguard.validation.config import MASTER_FORMS, EndpointMap, faults, nemesis_schedule, spark_master


def _positive_rate(text: str) -> float:
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected messages per second, a positive number") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: expected messages per second, a positive number")
    return value


def _metrics_port(text: str) -> int:
    """--metrics-port: a TCP port, or 0 for a free one (said on the first line)."""
    return 0 if text.strip() == "0" else options.port(text)


def register(subparsers) -> None:
    parser = options.add_command(
        subparsers, "watch", "verify the guarantees all the time: a canary with streaming checks, metrics and alerts",
        exit_codes={0: "stopped (SIGINT, SIGTERM, --duration) and every guarantee decided in this run held",
                    1: "stopped, and a guarantee broke in this run (findings.jsonl has each finding)",
                    2: "bad option, stack or --out; the metrics port in use; no emulator or Java; the target "
                       "stopped answering (what was decided is kept)"},
        example="pubsubguard watch -s dev --metrics-port 9464     # until Ctrl-C; alerts: validation/watch/alerts.yml",
    )
    options.add_stack_arguments(parser)
    parser.add_argument("--out", type=options.output_directory, default=None, metavar="DIR",
                        help="evidence, checkpoint, findings.jsonl and the rolling report (default: "
                             "<project>/out/<stack>/watch); the same DIR again resumes from its checkpoint")
    parser.add_argument("--rate", type=_positive_rate, default=defaults.DEFAULT_RATE, metavar="MSG/S",
                        help="messages published per second to each probed topic (each of its subscriptions gets them)")
    parser.add_argument("--window", type=options.positive_seconds, default=defaults.DEFAULT_WINDOW_S, metavar="SECONDS",
                        help="a window: how often the streaming checks judge what was written (one line each)")
    parser.add_argument("--horizon", type=options.positive_seconds, default=None, metavar="SECONDS",
                        help="wait this long for every message before it is lost (default: each subscription's own, "
                             "from its ack deadline, retry policy and dead-letter attempts; docs/watch.md)")
    parser.add_argument("--keep", type=options.positive_seconds, default=defaults.DEFAULT_KEEP_S, metavar="SECONDS",
                        help="evidence files are deleted once this old (they were judged windows before)")
    parser.add_argument("--metrics-port", type=_metrics_port, default=9464, metavar="PORT",
                        help="serve Prometheus metrics at http://127.0.0.1:PORT/metrics (0: a free port)")
    parser.add_argument("--duration", type=options.positive_seconds, default=None, metavar="SECONDS",
                        help="stop once the probe has run this long (default: run until SIGINT or SIGTERM)")
    parser.add_argument("--keys", type=options.positive_int, default=defaults.DEFAULT_KEYS, help="ordering keys per topic")
    parser.add_argument("--subscribers", type=options.positive_int, default=1, help="subscriber tasks")
    parser.add_argument("--faults", type=faults, default="",
                        help="client faults (off unless asked): nack=F,expire=F (fractions 0..1); see verify --help")
    parser.add_argument("--nemesis", type=nemesis_schedule, default=None, metavar="FILE",
                        help="a fault schedule for the fault layer on the wire (docs/schemas/nemesis.schema.json)")
    parser.add_argument("--target", choices=("emulator", "gcp"), default="emulator",
                        help="emulator: the embedded default (started or reused, the stack applied); gcp: Google Cloud")
    parser.add_argument("--endpoint", action=EndpointMap, default=None, metavar="REGION=HOST:PORT",
                        help="dial this host for REGION's locational endpoint (repeatable), as verify does")
    parser.add_argument("--master", type=spark_master, default=None,
                        help=f"Spark master URL ({MASTER_FORMS}; default: local[4])")
    parser.add_argument("--conform-every", type=_conform_every, default=DEFAULT_CONFORM_EVERY_S, metavar="SECONDS",
                        help="run the conformance scenarios at start and then this often, on their own throwaway "
                             "resources, to explain findings as verify does (0: never; default %(default)g)")
    parser.add_argument("--no-progress", action="store_true", help="no window lines on the terminal (the report has them)")
    parser.set_defaults(run=run)


DEFAULT_CONFORM_EVERY_S = 3600.0  # about 50 s of scenarios an hour on the emulator (docs/watch.md)


def _conform_every(text: str) -> float:
    """`--conform-every`: 0 (never) or seconds, at least a minute (a run of the scenarios takes about that)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 0 or a number of seconds of at least 60, got {text!r}") from None
    if value != 0 and not 60 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected 0 or a number of seconds of at least 60, got {text}")
    return value


def _port_free(port: int) -> None:
    if port == 0:
        return
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        # as the metrics server binds (http.server's allow_reuse_address): connections of a watch that just stopped
        # or crashed, in TIME_WAIT for a minute, do not hold the port; a listener still does
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as err:
            raise UserError(f"--metrics-port {port}: already in use on 127.0.0.1 ({err.strerror})") from None


def _emulator(args, out: Path, project: str):
    """The emulator to watch: PUBSUB_EMULATOR_HOST's, the project's (`pubsubguard emulator start`), or one of
    its own (returned, to stop at the end)."""
    from pubsubguard.core import emulator as emu

    if os.environ.get(emu.HOST_ENV):
        return None
    recorded = emu.load_state(args.root)
    if recorded is not None and recorded.running():
        os.environ[emu.HOST_ENV] = recorded.host
        receiver = emu.recorded_push_receiver(args.root, recorded.host)
        if receiver:
            os.environ[emu.PUSH_RECEIVER_ENV] = receiver
        print(f"watch: the project's emulator at {recorded.host} (pubsubguard emulator start)", flush=True)
        return None
    started = emu.Emulator.start(project=project, state_dir=out / "emulator")
    os.environ[emu.HOST_ENV] = started.host
    os.environ[emu.PUSH_RECEIVER_ENV] = started.push_receiver
    print(f"watch: started an emulator at {started.host} (stopped with the watch; `pubsubguard emulator start` "
          "keeps one across restarts)", flush=True)
    return started


def _refuse_early(args, plan: dict) -> None:
    """What the plan lets the command refuse before the emulator starts: a --horizon shorter than a probed
    subscription's ack deadline, a schedule naming what the stack does not declare."""
    from pubsubguard.core.declared import estate
    from pubsubguard.validation.watch import horizon

    declared = estate(plan)
    horizon.check_override({name: sub.ack_deadline_s for name, sub in declared.subscriptions.items()}, args.horizon)
    if args.nemesis:
        args.nemesis.check_names(set(declared.subscriptions), set(declared.topics))


def run(args) -> int:
    from pubsubguard.commands.preflight import preflight
    from pubsubguard.core import emulator as emu
    from pubsubguard.core.plan import read_inputs
    from pubsubguard.core.plan_file import load_plan
    from pubsubguard.validation.config import RunConfig
    from pubsubguard.validation.watch import outdir

    stack = args.stack or "dev"
    inputs = read_inputs(args.root, stack)  # an unknown stack: one line, before anything starts
    out = (args.out or args.root / "out" / stack / "watch").absolute()
    options.require_writable(out, "--out", directory=True)
    outdir.WatchDir.refuse_foreign(out, stack)
    _port_free(args.metrics_port)
    if args.faults.crash:
        raise UserError("--faults crash: a watch replaces no crashed subscriber on purpose; use nack, expire or poison")
    config = RunConfig(stack=stack, root=args.root, target=args.target, endpoint=dict(args.endpoint or {}),
                       faults=args.faults, nemesis=args.nemesis, keys=args.keys, subscribers=args.subscribers,
                       rate=args.rate, master=args.master or "local[4]", report=out, no_progress=args.no_progress)
    preflight(config)
    if args.target == "emulator" and not os.environ.get(emu.HOST_ENV):
        emu.Emulator.command()  # raises (with the install hint) when the emulator or Java is missing
    out.mkdir(parents=True, exist_ok=True)
    plan_file = out / "plan.json"
    planned = run_command("plan", ["--stack", stack, "--cwd", str(args.root), "--out", str(plan_file)])
    if planned != 0:
        return planned
    _refuse_early(args, load_plan(plan_file))  # the horizon and the schedule, before the emulator starts
    started = _emulator(args, out, inputs.header["gcp_project"]) if args.target == "emulator" else None
    try:
        if args.target == "emulator":
            applied = run_command("apply", ["--emulator", "--cwd", str(args.root), "--plan", str(plan_file)])
            if applied != 0:
                return applied
        from pubsubguard.validation.watch import runner

        watch_options = runner.WatchOptions(
            run=config.but(plan=plan_file, stack=None), out=out, rate=args.rate, window_s=args.window,
            horizon_s=args.horizon, keep_s=args.keep, metrics_port=args.metrics_port, duration_s=args.duration,
            no_progress=args.no_progress, conform_every_s=args.conform_every)
        return runner.watch(watch_options)
    finally:
        if started is not None:
            started.stop()
            os.environ.pop(emu.HOST_ENV, None)
            os.environ.pop(emu.PUSH_RECEIVER_ENV, None)

