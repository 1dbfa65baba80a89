"""`pubsubguard run`: the main job on the embedded default — emulator, plan, check, apply, verify
with faults, report — for one stack. Each step is the same subcommand a user can run alone."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from pubsubguard.commands.plan import add_stack_arguments

DEFAULT_FAULTS = "nack=0.1,expire=0.03,poison=0.02,crash=1"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "run", help="the whole flow on the local emulator: plan, check, apply, verify with faults, report"
    )
    add_stack_arguments(parser)
    parser.add_argument("--out", type=Path, default=None, help="output directory (default: out/<stack>)")
    parser.add_argument("--faults", default=DEFAULT_FAULTS, help=f"fault spec for verify (default: {DEFAULT_FAULTS})")
    parser.add_argument("--keys", type=int, default=8)
    parser.add_argument("--messages-per-key", type=int, default=25)
    parser.set_defaults(run=run)


def _step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def run(args) -> int:
    from pubsubguard import cli
    from pubsubguard.emulator import Emulator
    from pubsubguard.plan import load_plan, make_plan

    root = args.root or Path.cwd()
    out = (args.out or root / "out" / args.stack).resolve()
    out.mkdir(parents=True, exist_ok=True)
    plan_file = out / "plan.json"
    stack = ["--stack", args.stack] + (["--root", str(args.root)] if args.root else [])
    started = time.monotonic()

    # Spark's JVM is launched (fork + exec) before this process opens any gRPC channel (check,
    # apply and verify all do): launched while gRPC's threads ran, it failed now and then.
    from validation.session import spark_session

    spark_session("local[2]")  # what verify uses by default; it gets this session
    _step(f"plan: stack {args.stack!r} -> {plan_file}")
    if cli.main(["plan", *stack, "--out", str(plan_file)]) != 0:
        return 2

    _step("check: the policy pack over the plan (the Analyzer protocol, as `pulumi preview --policy-pack policies`)")
    checked = cli.main(["check", "--plan", str(plan_file), "--format", "text"])
    if checked != 0:
        print("run: the policy pack rejected the plan; nothing was applied", file=sys.stderr)
        return checked

    emulator = None
    if not os.environ.get("PUBSUB_EMULATOR_HOST"):
        _step("emulator: starting the Pub/Sub emulator on a free loopback port")
        emulator = Emulator.start(project=load_plan(plan_file)["gcp_project"], state_dir=out / "emulator")
        os.environ["PUBSUB_EMULATOR_HOST"] = emulator.host
        print(f"emulator at {emulator.host}")
    try:
        _step("apply: create the planned topics and subscriptions on the emulator, read them back")
        applied = cli.main(["apply", "--emulator", "--plan", str(plan_file)])
        if applied != 0:
            return applied
        _step(f"verify: probe with faults {args.faults!r}, check with Spark, report")
        verdict = cli.main(
            [
                "verify",
                "--plan", str(plan_file),
                "--target", "emulator",
                "--faults", args.faults,
                "--keys", str(args.keys),
                "--messages-per-key", str(args.messages_per_key),
                "--report", str(out / "report"),
            ]
        )
    finally:
        if emulator is not None:
            emulator.stop()
            os.environ.pop("PUBSUB_EMULATOR_HOST", None)
    print(f"\nrun: done in {time.monotonic() - started:.0f}s; report: {out / 'report' / 'report.html'} "
          f"(json: {out / 'report' / 'report.json'}); verify exit code {verdict}")
    return verdict
