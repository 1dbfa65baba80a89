"""`pubsubguard run`: the main job on the embedded default — emulator, plan, check, apply, verify
with faults (the conformance scenarios run beside it on the same emulator and explain its findings), report —
for one stack. Each step is the same subcommand a user can run alone, called as a function
(`commands.run_command`: its parser and `run(args)`), not by re-entering the command line.

Every option (the verify step's included) is validated, and Java, the emulator and the output
directory are found, before the first step starts."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from pubsubguard.commands import options, run_command, step
from pubsubguard.core.errors import INTERRUPTED_EXIT
from pubsubguard.validation.config import (
    MASTER_FORMS,
    EndpointMap,
    faults,
    nemesis_schedule,
    publish_rate,
    spark_master,
)
from pubsubguard.validation.session import DEFAULT_MASTER

DEFAULT_FAULTS = "nack=0.1,expire=0.03,poison=0.02,crash=1"


def register(subparsers) -> None:
    parser = options.add_command(
        subparsers, "run", "the whole flow on the local emulator: plan, check, apply, verify with faults, report",
        exit_codes={0: "the plan passed the pack and every declared guarantee holds on the emulator",
                    1: "the pack rejected the plan, apply was incomplete, or a guarantee is violated or inconclusive",
                    2: "bad option, project or stack file; no emulator or Java"},
        example="pubsubguard run -s dev --faults nack=0.1,crash=1 --keys 4",
    )
    options.add_stack_arguments(parser)
    parser.add_argument("--out", type=options.output_directory, default=None, metavar="DIR",
                        help="output DIRECTORY: plan.json, report/, emulator/ (default: <project>/out/<stack>)")
    parser.add_argument("--state", type=options.or_checkpoint(options.remote_or(options.input_file)), nargs="?", const="", default=None,
                        metavar="FILE",
                        help="rehearse what `pulumi up` deployed instead of planning: a `pulumi stack export` FILE or "
                             "URI (`--state` alone: --stack's checkpoint in a self-managed backend); apply and verify "
                             "use the deployed names, plan and check are skipped (they judge what to deploy)")
    parser.add_argument("--faults", type=faults, default=DEFAULT_FAULTS,
                        help="faults the verify step injects: nack=F,expire=F,poison=F (fractions 0..1), crash=N, misroute=1")
    parser.add_argument("--endpoint", action=EndpointMap, default=None,
                        metavar="REGION=HOST:PORT",
                        help="the verify step dials this host for REGION's locational endpoint (repeatable)")
    parser.add_argument("--keys", type=options.positive_int, default=8, help="ordering keys per topic")
    parser.add_argument("--messages-per-key", type=options.positive_int, default=25, help="messages published per key")
    parser.add_argument("--nemesis", type=nemesis_schedule, default=None, metavar="FILE",
                        help="a fault schedule the verify step's fault layer applies on the wire (YAML or JSON, "
                             "docs/schemas/nemesis.schema.json)")
    parser.add_argument("--rate", type=publish_rate, default=None, metavar="MSG/S",
                        help="the verify step publishes at this many messages per second (default: as fast as the "
                             "emulator settles: at most 2,000 message-subscription pairs published and not settled over "
                             "all publisher tasks, and 1,000 publishes unanswered per task)")
    parser.add_argument("--drain-timeout", type=options.positive_seconds, default=None, metavar="SECONDS",
                        help="the verify step's drain ceiling (default: derived from the faults' timing and the "
                             "settle rate the run measures; a target that stops delivering ends it sooner)")
    parser.add_argument("--master", type=spark_master, default=None,
                        help=f"Spark master URL the verify step runs on ({MASTER_FORMS}; default: {DEFAULT_MASTER}); "
                             "a cluster's executors need this project's virtualenv at the same path")
    parser.set_defaults(run=run)


def _schedule_names(schedule, plan: dict) -> None:
    """A `--nemesis` schedule names only subscriptions and topics the stack declares: refused (one line, exit 2)
    before the emulator starts, not after apply (the verify step checks it again against what it probes)."""
    from pubsubguard.core.declared import estate

    declared = estate(plan)
    schedule.check_names(set(declared.subscriptions), set(declared.topics))


def _step(title: str) -> None:
    print(f"\n== {title}", flush=True)


def _verify_config(args, declared: dict, report):
    """The verify step's configuration: what `run` was given, on the emulator, with the conformance scenarios
    (`declared`: the plan file, or the state `run` rehearses)."""
    from dataclasses import replace

    from pubsubguard.validation.config import RunConfig

    return RunConfig(
        root=args.root, **declared, target="emulator", faults=args.faults, keys=args.keys,
        messages_per_key=args.messages_per_key, report=report, conform=True, endpoint=dict(args.endpoint or {}),
        nemesis=replace(args.nemesis, source=str(Path(args.nemesis.source).absolute())) if args.nemesis else None,
        rate=args.rate, drain_timeout=args.drain_timeout, master=args.master,
    )


def _state_location(deployed: dict) -> Path | str:
    """Where the state `run` rehearses was read (an object store URI as it is), for the verify step to read."""
    from pubsubguard.core import storage

    location = deployed["state"]["location"]
    return location if storage.is_remote(location) else Path(location).expanduser()


def _plan_and_check(args, plan_file) -> int | None:
    """The plan and the policy check of it; the exit code that ends the run when either refuses (None: go on)."""
    from pubsubguard.core.plan_file import load_plan

    _step(f"plan: stack {args.stack!r} -> {plan_file}")
    planned = run_command("plan", ["--stack", args.stack, "--cwd", str(args.root), "--out", str(plan_file)])
    if planned != 0:
        return planned
    if args.nemesis:
        _schedule_names(args.nemesis, load_plan(plan_file))

    _step("check: the policy pack over the plan (the Analyzer protocol, as `pulumi preview --policy-pack policies`)")
    checked = run_command("check", ["--plan", str(plan_file), "--format", "text"])
    if checked == INTERRUPTED_EXIT:
        return checked
    if checked != 0:
        print("run: the policy pack rejected the plan; nothing was applied", file=sys.stderr)
        return checked
    return None


def _start_emulators(state_dir) -> list:
    """The target emulator and the second one, starting (futures of `Emulator.start`), each in a thread."""
    from concurrent.futures import ThreadPoolExecutor

    from pubsubguard.core.emulator import Emulator

    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="emulator")
    started = [pool.submit(Emulator.start, state_dir=state_dir) for _ in range(2)]
    pool.shutdown(wait=False)
    return started


def _stop_emulators(started: list) -> None:
    """Every emulator `_start_emulators` started, stopped (each waited for first: one still starting is stopped
    once up), beside each other; one that did not start has nothing to stop."""
    from concurrent.futures import ThreadPoolExecutor

    def stop(future) -> None:
        try:
            emulator = future.result()
        except Exception:  # noqa: BLE001 - it did not start (Emulator.start stopped what it had started)
            return
        emulator.stop()

    if started:
        with ThreadPoolExecutor(max_workers=len(started), thread_name_prefix="emulator-stop") as pool:
            list(pool.map(stop, started))


def _decided(args):
    """What the run is about, read (and refused when bad) before anything starts: the deployed state it rehearses
    (None: it plans `--stack`), the output directory, how apply names the estate, the verify step's configuration."""
    from pubsubguard.commands.preflight import stack_names

    deployed = None
    if args.state is None:  # the stack, and the schedule's names where its config declares them, before anything starts
        stack_names(args.nemesis, args.root, args.stack)
    else:  # read (and refused when bad) before anything starts
        from pubsubguard.core import state

        deployed = state.load(args.state or None, args.stack if args.state == "" else None, args.root)
        args.stack = deployed["stack"]
        if args.nemesis:
            _schedule_names(args.nemesis, deployed)
    out = (args.out or args.root / "out" / args.stack).absolute()
    options.require_writable(out, "--out", directory=True)
    plan_file = out / "plan.json"
    declared = ["--state", deployed["state"]["location"]] if deployed else ["--plan", str(plan_file)]
    verify_config = _verify_config(args, {"state": _state_location(deployed)} if deployed else {"plan": plan_file},
                                   out / "report")
    return deployed, out, declared, verify_config


def _spark_session(master, report):
    """Spark's JVM launched now, the session made in a thread (a future): the JVM is launched (fork + exec) before
    this process opens any gRPC channel (check, apply and verify all do): launched while gRPC's threads ran, it
    failed now and then. The session itself (a few seconds in the JVM) is made beside plan, check and apply;
    verify gets it."""
    from concurrent.futures import ThreadPoolExecutor

    from pubsubguard.validation.session import launch, spark_session

    launch(master, log_dir=report)  # Spark logs to report/
    starting = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spark-session")
    session = starting.submit(spark_session, master, log_dir=report)
    starting.shutdown(wait=False)
    return session


def _emulators_up(emulators: list, project: str):
    """The emulators `_start_emulators` started, up: (the target, its host set for every client of this process
    and its push receiver for push subscriptions; the second one, or None when it did not start: the conformance
    scenarios that disturb the target then wait for the probe's drain, as on any target)."""
    from pubsubguard.core.emulator import PUSH_RECEIVER_ENV, EmulatorError

    _step("emulator: starting the Pub/Sub emulator on a free loopback port (and a second one for the "
          "conformance scenarios that disturb the target)")
    emulator = emulators[0].result()  # raises EmulatorError (with its log's tail) when it did not start
    emulator.project = project
    os.environ["PUBSUB_EMULATOR_HOST"] = emulator.host
    os.environ[PUSH_RECEIVER_ENV] = emulator.push_receiver  # push subscriptions go there, nowhere else
    print(f"emulator at {emulator.host} (push receiver {emulator.push_receiver}; log {emulator.log})")
    try:
        apart = emulators[1].result()
    except EmulatorError as err:
        print(f"run: the second emulator did not start ({str(err).splitlines()[0]}); the conformance "
              "scenarios that disturb the target run after the probe's drain", file=sys.stderr)
        return emulator, None
    apart.project = emulator.project
    print(f"second emulator at {apart.host} (log {apart.log}): the conformance scenarios that disturb "
          "the target run there")
    return emulator, apart


def run(args) -> int:
    from pubsubguard.commands.preflight import preflight, verify
    from pubsubguard.core.emulator import PUSH_RECEIVER_ENV, Emulator
    from pubsubguard.core.plan_file import load_plan
    from pubsubguard.validation.config import RunConfig

    deployed, out, declared, verify_config = _decided(args)
    report = verify_config.report
    # Pre-flight: the verify step's options and needs, and the emulator, before anything starts.
    preflight(RunConfig(target="emulator", report=report))
    own_emulator = not os.environ.get("PUBSUB_EMULATOR_HOST")
    if own_emulator:
        Emulator.command()  # raises (with the install hint) when the emulator or Java is missing
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    session = _spark_session(args.master, report)
    # The emulators start beside plan and check (a JVM's start, seconds): the target, and a second one, started
    # with the same command, for the conformance scenarios that disturb the target's other subscriptions (they
    # run there beside the probe instead of after its drain). Their project is only recorded: set once known.
    emulators = _start_emulators(out / "emulator") if own_emulator else []
    emulator = None
    try:
        if deployed:
            from pubsubguard.core.state import describe

            _step(f"state: {describe(deployed['state'])}: what `pulumi up` deployed (plan and check judge what to "
                  "deploy: skipped)")
        else:
            refused = _plan_and_check(args, out / "plan.json")
            if refused is not None:
                return refused

        if own_emulator:
            emulator, apart = _emulators_up(emulators, (deployed or load_plan(out / "plan.json"))["gcp_project"])
            if apart is not None:
                verify_config = verify_config.but(conform_apart=apart.host)
        _step("apply: create the planned topics and subscriptions on the emulator, read them back")
        applied = run_command("apply", ["--emulator", "--cwd", str(args.root), *declared])
        if applied != 0:
            return applied
        _step(f"verify: probe with faults {args.faults.spec()!r} and the conformance scenarios beside it, check with "
              "Spark, report")
        session.result()  # raises what making it raised
        verdict = step("verify", lambda: verify(verify_config))
    finally:
        _stop_emulators(emulators)
        if emulator is not None:
            os.environ.pop("PUBSUB_EMULATOR_HOST", None)
            os.environ.pop(PUSH_RECEIVER_ENV, None)
    elapsed = f"{time.monotonic() - started:.0f}s"
    if (report / "report.json").exists():
        print(f"\nrun: done in {elapsed}; report: {report / 'report.html'} (json: {report / 'report.json'}); "
              f"verify exit code {verdict}")
    else:
        print(f"\nrun: stopped after {elapsed}: verify exit code {verdict}, no report written", file=sys.stderr)
    return verdict
