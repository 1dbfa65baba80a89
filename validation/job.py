"""The verification job: probe a deployed estate with Spark tasks, record evidence, check, report.

Run it through the CLI (`pubsubguard verify --stack dev --faults nack=0.1,expire=0.05,poison=0.01,crash=1`)
or unchanged with spark-submit, shipping the project's packages to the executors as one zip:

    (cd /work/main && zip -qr /tmp/pubsubguard.zip infra validation pubsubguard \
        && (cd policies && zip -qr /tmp/pubsubguard.zip pubsub_rules))
    PUBSUB_EMULATOR_HOST=127.0.0.1:8085 spark-submit --master local[2] --py-files /tmp/pubsubguard.zip \
        validation/job.py --plan out/dev/plan.json --target emulator --report out/dev/report

`--py-files` puts the zip on every executor's PYTHONPATH, so the probe's task functions
(`validation.probe.publish_partition` / `subscribe_partition`) unpickle there; executors also need the
third-party packages (google-cloud-pubsub, pyarrow, numpy, pandas) in their Python (`PYSPARK_PYTHON`). Evidence is
written by executors straight to `<report>/evidence`, so on a cluster `--report` must be on storage all
nodes share. `--from-evidence DIR` re-runs checks and report on recorded evidence alone.

Flow (`run_verify`): faults parsed, plan read, target resolved (all before anything is created) ->
run.json -> config check (readback: each difference a `config_drift` finding) -> filter canary ->
probe twins created (isolation) -> publisher job (partitioned by ordering key) and subscriber jobs
(one Spark job per subscriber task, submitted from driver threads; a crashed task is replaced) ->
drain until every published message is settled per subscription or `--drain-timeout` -> twins
deleted (also on SIGINT/SIGTERM) -> checks (validation.checks) -> report (validation.report).
Exit code: 0 all declared guarantees hold, 1 one is violated, 2 user error.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import sys
import threading
import time
import uuid
from dataclasses import asdict
from pathlib import Path

from pubsub_rules import facts

from pubsubguard.errors import UserError
from validation import evidence
from validation.declared import DeclaredEstate, estate_from_plan, short_name
from validation.faults import Faults, parse_faults, poison_set
from validation.isolation import Twins, cleanup, plan_twins
from validation.judge import DEFAULT_SKEW_US
from validation.probe import CLIENT_LOG_PREFIX, FLUSH_ROWS, FLUSH_S, NOTES_PREFIX, READY_PREFIX

DEFAULT_FAULTS = ""
EXPIRE_MARGIN_S = 2.0  # an expired delivery is acked this long after its deadline
# Added to the longest ack deadline for the default drain timeout: a message held by a crashed task or
# by the expire fault is redelivered one deadline later (it expires at most once, validation.faults).
DRAIN_SLACK_S = 30.0
CRASH_PREFETCH = 5  # messages per twin a task chosen to crash pulls at a time (unary Pull)
CRASH_AFTER_MAX = 3  # it starts holding (not acking) after at most this many deliveries
READY_TIMEOUT_S = 60.0  # the publisher waits this long at most for a subscriber's open streams
# Spark's own log lines for a subscriber task's death (an ERROR and a Java stack trace per crash); the
# failure's full text goes to <evidence>/failure-<task>.txt and the report instead.
CRASH_LOGGERS = ("org.apache.spark.executor.Executor", "org.apache.spark.scheduler.TaskSetManager",
                 "org.apache.spark.api.python.PythonRunner", "org.apache.spark.api.python.PythonGatewayServer")
CONFIG_DRIFT = "config_drift"
# Settings whose drift breaks a declared guarantee (error); any other drift is advisory.
GUARANTEE_OF_SETTING = {
    "ordering": "ordering",
    "exactly_once": "exactly_once",
    "ack_deadline_seconds": "exactly_once",
    "dead_letter_topic": "dead_letter",
    "max_delivery_attempts": "dead_letter",
    "exists": "completeness",
}


class VerifyError(UserError):
    pass


class Interrupted(KeyboardInterrupt):
    pass


# ------------------------------------------------------------------------------------------ CLI
def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_argument_group("what to verify")
    source.add_argument("--stack", default="dev", help="stack whose plan is made offline (default: dev)")
    source.add_argument("--root", type=Path, default=None, help="project directory holding Pulumi.yaml")
    source.add_argument("--plan", type=Path, default=None, help="a plan file (`pubsubguard plan --out`) instead of --stack")
    source.add_argument("--target", choices=("emulator", "gcp"), default="emulator")
    source.add_argument("--project", default=None, help="Google Cloud project (default: the plan's gcp:project)")
    source.add_argument("--allow-shared-subscriptions", action="store_true",
                        help="on gcp, probe although production subscriptions do not exclude probe messages")
    work = parser.add_argument_group("workload")
    work.add_argument("--faults", default=DEFAULT_FAULTS, help="e.g. nack=0.1,expire=0.05,poison=0.01,crash=1")
    work.add_argument("--keys", type=int, default=8, help="ordering keys per topic (default 8)")
    work.add_argument("--messages-per-key", type=int, default=25, help="messages per key (default 25)")
    work.add_argument("--subscribers", type=int, default=2, help="subscriber tasks (default 2)")
    work.add_argument("--drain-timeout", type=float, default=None,
                      help="seconds to wait after publishing for every message to be settled (default: the "
                           f"longest probed ack deadline + {EXPIRE_MARGIN_S:.0f} s expire margin + {DRAIN_SLACK_S:.0f} s)")
    work.add_argument("--skew-us", type=int, default=DEFAULT_SKEW_US,
                      help=f"clock skew tolerated between tasks (default {DEFAULT_SKEW_US})")
    out = parser.add_argument_group("output")
    out.add_argument("--report", type=Path, default=None, help="report directory (default: out/<stack>/report)")
    out.add_argument("--from-evidence", type=Path, default=None, metavar="DIR",
                     help="re-run checks and report on recorded evidence only (no target needed)")
    out.add_argument("--cleanup", action="store_true", help="delete probe twins left by killed runs, then exit")
    out.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    out.add_argument("--no-progress", action="store_true", help="no progress bars")


def _positive(name: str, value: float) -> None:
    if value <= 0:
        raise VerifyError(f"{name}: expected a positive number, got {value}")


def main(argv: list[str] | None = None, spark=None) -> int:
    parser = argparse.ArgumentParser(prog="validation/job.py", description=__doc__.split("\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args, spark=spark)
    except UserError as err:
        print(f"verify: {err}", file=sys.stderr)
        return err.exit_code


def run(args, spark=None) -> int:
    if args.from_evidence:
        return from_evidence(args, spark)
    if args.cleanup:
        return run_cleanup(args)
    return run_verify(args, spark)


# ---------------------------------------------------------------------------------- resolution
def load_estate(args) -> tuple[dict, DeclaredEstate]:
    from pubsubguard import plan as planning

    plan = planning.load_plan(args.plan) if args.plan else planning.make_plan(args.stack, args.root)
    if args.project and args.project != plan.get("gcp_project"):
        old = plan.get("gcp_project")
        plan = json.loads(json.dumps(plan).replace(f"projects/{old}/", f"projects/{args.project}/"))
        plan["gcp_project"] = args.project
    return plan, estate_from_plan(plan)


def resolve_target(args, estate: DeclaredEstate) -> str | None:
    """The emulator host (emulator target) or None (gcp); raises when the target cannot be used."""
    if args.target == "emulator":
        from pubsubguard.emulator import running_host

        host = running_host(args.root)
        os.environ["PUBSUB_EMULATOR_HOST"] = host
        return host
    if os.environ.get("PUBSUB_EMULATOR_HOST"):
        raise VerifyError("--target gcp: PUBSUB_EMULATOR_HOST is set, so clients would talk to an emulator; unset it")
    if not estate.probe_isolation and not args.allow_shared_subscriptions:
        raise VerifyError(
            f"--target gcp: stack {estate.stack!r} does not declare probe_isolation, so its production "
            "subscriptions would also receive the probe's messages; declare `probe_isolation: true` and "
            "deploy, or pass --allow-shared-subscriptions to accept that (docs/verification.md)"
        )
    return None


def default_drain_timeout(twin_specs) -> float:
    """The longest ack deadline of a probed twin + the expire margin + slack (see DRAIN_SLACK_S)."""
    deadlines = [t.ack_deadline_s for t in twin_specs if not t.drain] or [facts.ACK_DEADLINE_DEFAULT_S]
    return max(deadlines) + EXPIRE_MARGIN_S + DRAIN_SLACK_S


def report_dir(args) -> Path:
    return (args.report or Path("out") / args.stack / "report").resolve()


def fresh_evidence_dir(report: Path) -> Path:
    directory = report / "evidence"
    if directory.exists() and any(directory.iterdir()):
        if not (directory / "run.json").exists():
            raise VerifyError(f"--report {report}: {directory} exists and is not evidence of a run; choose another directory")
        shutil.rmtree(directory)  # a previous run's evidence in our own output directory
    (directory / "publishes").mkdir(parents=True)
    (directory / "deliveries").mkdir(parents=True)
    return directory


# -------------------------------------------------------------------------------- config check
def config_drift(plan: dict, estate: DeclaredEstate) -> list[dict]:
    """Every difference between the plan and what the target holds, as `config_drift` findings."""
    from pubsubguard import readback

    declared = readback.declared(plan)
    actual = readback.actual(declared)
    subs_of_topic: dict[str, list[str]] = {}
    for target in estate.subscriptions.values():
        subs_of_topic.setdefault(target.topic_path, []).append(target.name)
    by_path = {t.path: t.name for t in estate.subscriptions.values()}
    findings = []
    for diff in readback.differences(declared, actual):
        owners = [by_path[diff.path]] if diff.path in by_path else subs_of_topic.get(diff.path, [])
        if not owners:
            owners = [short_name(diff.path)]  # plumbing (dead-letter topics and drains): reported on its own name
        guarantee = GUARANTEE_OF_SETTING.get(diff.setting, "config")
        severity = "error" if guarantee != "config" else "advisory"
        for owner in owners:
            findings.append({
                "subscription": owner, "kind": CONFIG_DRIFT, "guarantee": guarantee, "severity": severity,
                "form": "missing" if diff.setting == "exists" else "differs",
                "key": None, "seq": None, "message_id": None,
                "drift": {"path": diff.path, "setting": diff.setting, "declared": diff.declared, "actual": diff.actual},
                "evidence": json.dumps([{"path": diff.path, "setting": diff.setting,
                                         "declared": diff.declared, "actual": diff.actual}], default=str),
            })
    return findings


# ------------------------------------------------------------------------------------ progress
class EvidenceTally:
    """Reads the flushed part files incrementally: what is published and what is settled per subscription."""

    def __init__(self, directory: Path, estate: DeclaredEstate, probed: list[str], run_id: str):
        self.directory = directory
        self.run_id = run_id
        self.topic_of = {name: estate.subscriptions[name].declared.topic for name in probed}
        self.seen: set[Path] = set()
        self.published: dict[str, set] = {}
        self.publish_rows = 0
        self.delivery_rows = 0
        self.settled: dict[str, set] = {name: set() for name in probed}

    def refresh(self) -> None:
        import pyarrow.parquet as pq

        for kind in ("publishes", "deliveries"):
            for path in sorted((self.directory / kind).glob("part-*.parquet")):
                if path in self.seen:
                    continue
                self.seen.add(path)
                rows = pq.read_table(path).to_pylist()
                if kind == "publishes":
                    self.publish_rows += len(rows)
                    for row in rows:
                        if row["status"] == "ok":
                            self.published.setdefault(row["topic"], set()).add((row["key"], row["seq"]))
                    continue
                self.delivery_rows += len(rows)
                for row in rows:
                    if row["probe_run"] != self.run_id or row["subscription"] not in self.settled:
                        continue
                    if row["kind"] == "dead_letter" or (
                        row["action"] in ("ack", "late_ack") and row["ack_result"] == "success"
                    ):
                        self.settled[row["subscription"]].add((row["key"], row["seq"]))

    def expected(self) -> int:
        return sum(len(self.published.get(topic, ())) for topic in self.topic_of.values())

    def unsettled(self) -> dict[str, int]:
        """Published messages not settled yet, per probed subscription (only those with any)."""
        out = {}
        for name, topic in self.topic_of.items():
            published = self.published.get(topic, set())
            missing = len(published - self.settled[name])
            if missing:
                out[name] = missing
        return out

    def done(self) -> int:
        return sum(
            len(self.settled[name] & self.published.get(topic, set())) for name, topic in self.topic_of.items()
        )


# ---------------------------------------------------------------------------------------- probe
def _install_signal_handlers() -> dict:
    def interrupt(signum, _frame):
        raise Interrupted(f"signal {signum}")

    saved = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            saved[sig] = signal.signal(sig, interrupt)
    return saved


def _restore_signal_handlers(saved: dict) -> None:
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def run_verify(args, spark=None) -> int:
    faults = parse_faults(args.faults)
    for name in ("keys", "messages_per_key", "subscribers", "drain_timeout"):
        if getattr(args, name) is not None:
            _positive(f"--{name.replace('_', '-')}", getattr(args, name))
    plan, estate = load_estate(args)
    emulator_host = resolve_target(args, estate)
    run_id = uuid.uuid4().hex
    report = report_dir(args)
    probed = [name for name, t in estate.subscriptions.items() if t.not_probed is None]
    if not probed:
        raise VerifyError(f"stack {estate.stack!r}: no pull subscription to probe (push/export ones are not probed)")
    twin_specs = plan_twins(estate, run_id)
    if args.drain_timeout is None:
        args.drain_timeout = default_drain_timeout(twin_specs)
    observations: list[str] = []
    if args.target == "emulator":
        observations.append(
            "endpoint pinning not exercised on this target: all traffic goes to the emulator host "
            f"{emulator_host}; the declared publisher/consumer endpoints are used only with --target gcp"
        )

    # Spark's JVM is launched (fork + exec) before this process opens any gRPC channel: launched
    # while gRPC's threads ran, it failed now and then ("Java gateway process exited").
    session = spark or _session(args.master)
    from google.cloud import pubsub_v1

    publisher = pubsub_v1.PublisherClient()
    subscriber = pubsub_v1.SubscriberClient()
    # The config check doubles as the reachability check: nothing is created before it answers.
    try:
        drift = config_drift(plan, estate)
    except UserError:
        raise
    except Exception as err:  # noqa: BLE001 - the target did not answer
        raise VerifyError(f"--target {args.target}: cannot read the estate back: {type(err).__name__}: {err}") from None
    missing = sorted({f["subscription"] for f in drift if f["form"] == "missing" and f["subscription"] in probed})
    if missing:
        raise VerifyError(
            f"--target {args.target}: declared subscriptions missing on the target: {', '.join(missing)} "
            "(apply the stack first: `pubsubguard apply --emulator`)"
        )

    evidence_dir = fresh_evidence_dir(report)
    tested = {name: t.not_probed for name, t in estate.subscriptions.items() if t.not_probed}
    parameters = {
        "stack": estate.stack, "project": estate.project, "faults": faults.as_dict(), "keys": args.keys,
        "messages_per_key": args.messages_per_key, "subscribers": args.subscribers,
        "drain_timeout_s": args.drain_timeout, "skew_us": args.skew_us, "master": args.master,
        "twins": {t.path: t.declared_name for t in twin_specs}, "config_drift": drift, "observations": observations,
    }
    info = evidence.RunInfo(run_id=run_id, target=args.target, subscriptions=estate.declared_subscriptions(),
                            parameters=parameters, tested=tested)
    info.write(evidence_dir)

    canary = filter_canary(publisher, subscriber, estate.project, run_id)
    if canary is not None:
        observations.append(canary)

    twins = Twins(run_id=run_id, specs=twin_specs, subscriber=subscriber)
    saved = _install_signal_handlers()
    stop_file = evidence_dir / "_stop"
    try:
        twins.create()
        parameters["twins_created_us"] = time.time_ns() // 1000
        probe_run = Probe(session, args, estate, faults, run_id, evidence_dir, emulator_host, twin_specs,
                          probed, stop_file, observations)
        probe_run.run()
    finally:
        stop_file.touch()
        session.sparkContext.cancelAllJobs()
        for ready in evidence_dir.glob(f"{READY_PREFIX}*"):
            ready.unlink(missing_ok=True)
        for notes in sorted(evidence_dir.glob(f"{NOTES_PREFIX}*.txt")):
            observations.extend(line for line in notes.read_text().splitlines() if line)
        observations.extend(client_log_summary(evidence_dir))
        left = twins.delete()
        if left:
            observations.append(f"could not delete probe twins {left}; run `pubsubguard verify --cleanup`")
        _restore_signal_handlers(saved)
        info.write(evidence_dir)  # observations so far, also when interrupted
        try:
            stop_file.unlink()
        except FileNotFoundError:
            pass
    return check_and_report(session, evidence_dir, report, not args.no_progress)


def _session(master: str):
    from validation.session import spark_session

    return spark_session(master)


def filter_canary(publisher, subscriber, project: str, run_id: str) -> str | None:
    """Does the target enforce subscription filters? Isolation rests on them; try on a private topic."""
    topic = f"projects/{project}/topics/pubsubguard-canary-{run_id[:8]}"
    subs = {
        "probe": (f"projects/{project}/subscriptions/pubsubguard-canary-probe-{run_id[:8]}", facts.probe_filter(run_id)),
        "production": (f"projects/{project}/subscriptions/pubsubguard-canary-prod-{run_id[:8]}", facts.PROBE_EXCLUSION_FILTER),
    }
    created = []
    try:
        publisher.create_topic(name=topic, timeout=30)
        created.append(("topic", topic))
        for path, filter_ in subs.values():
            subscriber.create_subscription(request={"name": path, "topic": topic, "filter": filter_}, timeout=30)
            created.append(("sub", path))
        publisher.publish(topic, b"canary", **{facts.PROBE_ATTRIBUTE: run_id}).result(timeout=30)
        publisher.publish(topic, b"canary").result(timeout=30)
        seen = {}
        for role, (path, _) in subs.items():
            got = 0
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline and got < 2:
                response = subscriber.pull(subscription=path, max_messages=10, timeout=5)
                got += len(response.received_messages)
                if response.received_messages:
                    subscriber.acknowledge(subscription=path, ack_ids=[m.ack_id for m in response.received_messages])
                elif got:
                    break
            seen[role] = got
        if seen["probe"] == 1 and seen["production"] == 1:
            return None
        return (
            f"subscription filters NOT enforced by this target: of one probe and one non-probe message, the "
            f"probe-only filter passed {seen['probe']} and the probe-excluding filter passed {seen['production']}; "
            "production subscriptions here also receive probe messages and twins receive foreign ones "
            "(isolation holds only where filters are enforced)"
        )
    except Exception as err:  # noqa: BLE001 - an observation, not a failure of the run
        return f"filter canary could not run: {type(err).__name__}: {err}"
    finally:
        for kind, path in reversed(created):
            try:
                if kind == "sub":
                    subscriber.delete_subscription(subscription=path, timeout=30)
                else:
                    publisher.delete_topic(topic=path, timeout=30)
            except Exception:  # noqa: BLE001
                pass


PUBLISH_JOB_GROUP = "pubsubguard-publish"


class Probe:
    """Runs the publisher job and the subscriber jobs concurrently and drains until settled or timeout."""

    def __init__(self, spark, args, estate, faults: Faults, run_id, evidence_dir: Path, emulator_host,
                 twin_specs, probed, stop_file: Path, observations: list[str]):
        self.spark = spark
        self.sc = spark.sparkContext
        self.args = args
        self.estate = estate
        self.faults = faults
        self.run_id = run_id
        self.evidence_dir = evidence_dir
        self.stop_file = stop_file
        self.observations = observations
        self.probed = probed
        self.keys = [f"key-{i:03d}" for i in range(args.keys)]
        topics = sorted({estate.subscriptions[name].declared.topic for name in probed})
        self.topics = [
            {"name": name, "path": estate.topics[name].path, "endpoint": estate.topics[name].publisher_endpoint}
            for name in topics
        ]
        self.poison = {
            t["name"]: sorted(poison_set(run_id, t["name"], self.keys, args.messages_per_key, faults.poison))
            for t in self.topics
        }
        self.base = {
            "run_id": run_id, "target": args.target, "emulator_host": emulator_host,
            "evidence_dir": str(evidence_dir), "flush_rows": FLUSH_ROWS, "flush_s": FLUSH_S,
        }
        dead_lettering = {name for name in probed if estate.subscriptions[name].declared.dead_lettering}
        self.twins = [
            {"path": t.path, "declared_name": t.declared_name, "ack_deadline_s": t.ack_deadline_s,
             "consumer_endpoint": t.consumer_endpoint, "dead_lettering": t.declared_name in dead_lettering}
            for t in twin_specs
        ]
        self.twin_to_declared = {short_name(t.path): t.declared_name for t in twin_specs}
        self.errors: list[BaseException] = []
        self.publish_group = f"{PUBLISH_JOB_GROUP}-{run_id}"
        self.publish_done = threading.Event()
        self.crashes = 0
        self.task_counter = 0
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []

    # -- jobs ------------------------------------------------------------------------------
    def _publish_job(self) -> None:
        from functools import partial

        from validation.probe import publish_partition

        spec = {**self.base, "topics": self.topics, "messages_per_key": self.args.messages_per_key,
                "poison": {k: [list(p) for p in v] for k, v in self.poison.items()},
                "ready_timeout_s": READY_TIMEOUT_S}
        slots = max(1, self.sc.defaultParallelism - 1)  # leave a slot for a subscriber during publishing
        try:
            self.sc.setJobGroup(self.publish_group, "pubsubguard probe: publish")
            self.sc.parallelize(self.keys, min(len(self.keys), slots)).mapPartitions(
                partial(publish_partition, spec)).collect()
        except BaseException as err:  # noqa: BLE001
            if not self.stop_file.exists():
                self.errors.append(err)
        finally:
            self.publish_done.set()

    def _subscriber_spec(self, crash_after: int | None) -> dict:
        with self.lock:
            task_id = f"sub-{self.task_counter}"
            self.task_counter += 1
        total = self.args.keys * self.args.messages_per_key * len(self.probed)
        return {**self.base, "task_id": task_id, "twins": self.twins, "twin_to_declared": self.twin_to_declared,
                "faults": self.faults.as_dict(), "stop_file": str(self.stop_file), "crash_after": crash_after,
                "end_time": time.time() + 600 + self.args.drain_timeout, "crash_hold": 3,
                "crash_prefetch": CRASH_PREFETCH, "expire_margin_s": EXPIRE_MARGIN_S, "expected": total}

    def _subscriber_job(self, spec: dict) -> None:
        from functools import partial

        from validation.probe import subscribe_partition

        try:
            self.sc.setJobDescription(f"pubsubguard probe: {spec['task_id']}")
            self.sc.parallelize([0], 1).mapPartitions(partial(subscribe_partition, spec)).collect()
        except BaseException as err:  # noqa: BLE001
            if self.stop_file.exists():
                return
            full = str(err) or type(err).__name__
            failure_file = self.evidence_dir / f"failure-{spec['task_id']}.txt"
            failure_file.write_text(full + "\n")
            text = _spark_cause(full)
            if spec["crash_after"] is not None:
                self.observations.append(f"subscriber task {spec['task_id']} crashed as injected (crash fault); "
                                         f"Spark reported: {text} (full text: {failure_file})")
            else:
                self.observations.append(f"subscriber task {spec['task_id']} failed unexpectedly: {text} "
                                         f"(full text: {failure_file})")
            replacement = self._subscriber_spec(None)
            self.observations.append(f"subscriber task {replacement['task_id']} started to replace {spec['task_id']}")
            self._start(self._subscriber_job, replacement)

    def _start(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        with self.lock:
            self.threads.append(thread)
        thread.start()

    def _wait_ready(self, task_id: str, timeout_s: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not (self.evidence_dir / f"{READY_PREFIX}{task_id}").exists():
            if time.monotonic() > deadline or self.errors:
                self.observations.append(f"subscriber task {task_id} was not reading within {timeout_s:.0f}s; "
                                         "the other subscriber tasks were started anyway")
                return
            time.sleep(0.05)

    def _wait_for_publisher_slot(self, timeout_s: float = 180.0) -> None:
        """Subscriber tasks hold their slot for the whole run: submitting them before the publisher's
        tasks are running could leave the publisher without a slot until they end."""
        tracker = self.sc.statusTracker()
        deadline = time.monotonic() + timeout_s
        while not self.publish_done.is_set():
            # This run's group only: a reused SparkContext still lists earlier runs' finished publish jobs.
            for job_id in tracker.getJobIdsForGroup(self.publish_group):
                job = tracker.getJobInfo(job_id)
                for stage_id in job.stageIds if job else ():
                    stage = tracker.getStageInfo(stage_id)
                    if stage and (stage.numActiveTasks > 0 or stage.numCompletedTasks > 0):
                        return
            if time.monotonic() > deadline:
                raise VerifyError(f"the publisher job got no Spark slot within {timeout_s:.0f}s "
                                  f"(master {self.sc.master}, default parallelism {self.sc.defaultParallelism})")
            time.sleep(0.1)

    # -- run -------------------------------------------------------------------------------
    def run(self) -> None:
        slots = self.sc.defaultParallelism
        if self.args.subscribers > slots:
            raise VerifyError(f"--subscribers {self.args.subscribers}: Spark master {self.sc.master} has {slots} task "
                              "slots and each subscriber task holds one for the whole run; the others would never "
                              f"start (use --subscribers {slots} or fewer, or a master with more slots)")
        total = self.args.keys * self.args.messages_per_key * len(self.probed)
        # The crashing task dies early (it starts before publishing, so its first deliveries come at
        # once) and its held messages come back one deadline later.
        crash_after = max(1, min(CRASH_AFTER_MAX, total // (self.args.subscribers * 4)))
        if self.faults.crash:
            _quiet_crash_logs(self.sc, True)
        try:
            self._run(total, crash_after)
        finally:
            if self.faults.crash:
                _quiet_crash_logs(self.sc, False)

    def _run(self, total: int, crash_after: int) -> None:
        self._start(self._publish_job)
        self._wait_for_publisher_slot()
        for index in range(self.args.subscribers):
            spec = self._subscriber_spec(crash_after if index < self.faults.crash else None)
            self._start(self._subscriber_job, spec)
            if spec["crash_after"] is not None:
                # The crashing task must have its slot (and be reading) before the others are submitted:
                # else another may take the slot beside the publisher and leave it nothing to hold.
                self._wait_ready(spec["task_id"])
        if self.faults.crash > self.args.subscribers:
            self.observations.append(f"crash={self.faults.crash} exceeds --subscribers {self.args.subscribers}: "
                                     f"{self.args.subscribers} crash(es) injected")
        tally = EvidenceTally(self.evidence_dir, self.estate, self.probed, self.run_id)
        published_target = len(self.keys) * self.args.messages_per_key * len(self.topics)
        with _progress(not self.args.no_progress) as progress:
            pub_bar = progress.add_task("publishing", total=published_target)
            drain_bar = progress.add_task("draining (settled per subscription)", total=None)
            drain_deadline = None
            while True:
                time.sleep(0.5)
                tally.refresh()
                progress.update(pub_bar, completed=tally.publish_rows)
                expected = tally.expected()
                progress.update(drain_bar, completed=tally.done(), total=expected or None)
                if self.errors:
                    raise VerifyError(f"publisher job failed: {str(self.errors[0]).splitlines()[0][:500]}")
                if self.publish_done.is_set():
                    if drain_deadline is None:
                        drain_deadline = time.monotonic() + self.args.drain_timeout
                    if tally.done() >= expected:
                        break
                    if time.monotonic() > drain_deadline:
                        per_sub = ", ".join(f"{name} {n}" for name, n in sorted(tally.unsettled().items()))
                        self.observations.append(
                            f"drain timeout ({self.args.drain_timeout:.0f}s) passed with {expected - tally.done()} of "
                            f"{expected} published messages not settled (acked with success or dead-lettered) per "
                            f"subscription: {per_sub}")
                        break
        self.stop_file.touch()
        for thread in list(self.threads):
            thread.join(timeout=30)


def client_log_summary(evidence_dir: Path) -> list[str]:
    """One observation per task whose client library logged warnings: the count and the commonest."""
    from collections import Counter

    out = []
    for path in sorted(evidence_dir.glob(f"{CLIENT_LOG_PREFIX}*.txt")):
        records = Counter(line.split(" for message ordering key:")[0][:160] for line in path.read_text().splitlines()
                          if line.startswith(("WARNING ", "ERROR ", "CRITICAL ")))
        if records:
            common = "; ".join(f"{text!r} x{n}" for text, n in records.most_common(3))
            out.append(f"the Pub/Sub client library in {path.stem[len(CLIENT_LOG_PREFIX):]} logged "
                       f"{sum(records.values())} warnings/errors (commonest: {common}); full text: {path}")
    return out


def _spark_cause(text: str) -> str:
    """The line of a Spark job failure that says why (not py4j's "An error occurred while calling ...")."""
    import re

    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        if "Python worker exited unexpectedly" in line:
            return "Python worker exited unexpectedly (crashed)"
    python_errors = [line for line in lines if re.match(r"^([a-z_][\w]*\.)+[A-Z]\w*: ", line)
                     and not line.startswith(("org.", "java.", "py4j.", "scala."))]
    if python_errors:
        return python_errors[-1][:300]
    for line in lines:
        if "Exception" in line and "An error occurred while calling" not in line:
            return line[:300]
    return (lines[0] if lines else "no message")[:300]


_saved_levels: dict[str, object] = {}


def _quiet_crash_logs(sc, quiet: bool) -> None:
    """Silence (or restore) Spark's ERROR lines for a task's death while crashes are injected."""
    try:
        jvm = sc._jvm
        log_manager = jvm.org.apache.logging.log4j.LogManager
        configurator = jvm.org.apache.logging.log4j.core.config.Configurator
        off = jvm.org.apache.logging.log4j.Level.OFF
        for name in CRASH_LOGGERS:
            if quiet:
                _saved_levels[name] = log_manager.getLogger(name).getLevel()
                configurator.setLevel(name, off)
            elif name in _saved_levels:
                configurator.setLevel(name, _saved_levels.pop(name))
    except Exception:  # noqa: BLE001 - a cluster without log4j 2 keeps its logs; nothing else depends on it
        pass


class _NoProgress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def add_task(self, *args, **kwargs):
        return 0

    def update(self, *args, **kwargs):
        pass


def _progress(enabled: bool):
    if not enabled:
        return _NoProgress()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                    transient=False)


# ------------------------------------------------------------------------------- check + report
def evidence_location(directory: Path) -> Path:
    directory = Path(directory)
    for candidate in (directory, directory / "evidence"):
        if (candidate / "run.json").exists():
            return candidate
    raise VerifyError(f"--from-evidence {directory}: no run.json here or in {directory / 'evidence'} "
                      "(expected the evidence directory of a verify run)")


def from_evidence(args, spark=None) -> int:
    evidence_dir = evidence_location(args.from_evidence)
    report = (args.report or evidence_dir.parent).resolve()
    session = spark or _session(args.master)
    return check_and_report(session, evidence_dir, report, not args.no_progress)


def check_and_report(spark, evidence_dir: Path, report: Path, terminal: bool = True) -> int:
    from validation import report as reporting

    from validation.verdict import judge_run

    info = evidence.RunInfo.read(evidence_dir)
    publishes, deliveries = reporting.read_evidence(spark, evidence_dir)
    # The checks, the figures and the plots all read the evidence: read its part files once.
    publishes, deliveries = publishes.cache(), deliveries.cache()
    try:
        result = reporting.build(judge_run(publishes, deliveries, info), info, evidence_dir, deliveries)
    finally:
        publishes.unpersist()
        deliveries.unpersist()
    reporting.write(result, report)
    if terminal:
        reporting.print_summary(result, report)
    else:
        print(f"report: {report / 'report.json'} verdict={result['verdict']}", file=sys.stderr)
    return result["exit_code"]


# ------------------------------------------------------------------------------------ cleanup
def run_cleanup(args) -> int:
    from google.cloud import pubsub_v1

    plan, estate = load_estate(args)
    resolve_target(args, estate)
    subscriber = pubsub_v1.SubscriberClient()
    topic_paths = [t.path for t in estate.topics.values()]
    topic_paths += [t.dead_letter_topic for t in estate.subscriptions.values() if t.dead_letter_topic]
    try:
        deleted = cleanup(subscriber, estate.project, topic_paths)
    except Exception as err:  # noqa: BLE001
        raise VerifyError(f"--cleanup: cannot list subscriptions of projects/{estate.project}: {err}") from None
    for path in deleted:
        print(f"deleted probe twin {path}")
    print(f"cleanup: {len(deleted)} probe twin(s) deleted from projects/{estate.project}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
