"""The probe driver: from a resolved target to recorded evidence.

`probe(config, spark)` resolves the run (`probe_setup.resolve`: estate, target, twins, endpoints, fault
layer), checks the target's config (each difference a `config_drift` finding), runs the filter canary
(`canary`), creates the probe twins (isolation), runs the publisher job (partitioned by ordering key) and
the subscriber jobs (one Spark job per subscriber task, submitted from driver threads; a crashed task is
replaced) through `ProbeDriver`, with the conformance scenarios beside it (`conformance_beside`, with
`--conform`) and the checks warmed up during the drain (`warmup`); drains until every published message is
settled per subscription, or every unsettled one is provably stuck (`EvidenceTally.stuck`: nothing
recorded for one ack deadline + retry backoff + `STUCK_GRACE_S` since its last event), or
`--drain-timeout`, deletes the twins (also on SIGINT/SIGTERM) and seals the evidence. It returns the Spark
session, the evidence directory and the report directory for the checks.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

from pubsubguard.policies import pubsub_facts as facts

from pubsubguard.core import storage
from pubsubguard.core.declared import short_name
from pubsubguard.core.errors import UserError
from pubsubguard.core.state import caveats
from .probe import access
from .wire import endpoints, netem
from .evidence import records as evidence, seal
from . import run_setup as probe_setup
from .probe.canary import filter_canary
from .config import EXPIRE_MARGIN_S, RunConfig
from .conformance.beside import ConformanceBeside
from .probe.drain_clock import (
    FINAL_READ_QUIET_S,
    IN_FLIGHT_PAIRS,
    DrainClock,
    allowed_per_task,
    clock_sentence,
    final_read_bound_s,
    final_read_quiet_s,
)
from .footprint import Footprint
from .footprint import sentence as footprint_sentence
from .checks.drift import config_drift, missing_subscriptions
from pubsubguard.core.errors import VerifyError
from .failures import client_log_summary, quiet_crash_logs, spark_cause
from .probe.faults import poison_set
from .probe.twins import Twins, not_probed
from .probe.clients import CLIENT_STATE_PREFIX, FLUSH_ROWS, FLUSH_S, NOTES_PREFIX, PUBLISHING_PREFIX, READY_PREFIX
from .run_setup import ProbeSetup
from .probe.drain import EvidenceTally
from .probe.progress import progress_bars
from .session import spark_session
from .signals import interruptible
from .target import checked
from .warmup import WarmUp

# The drain stops waiting for a message this long after one ack deadline (+ retry backoff after a nack)
# since its last recorded event: the expire margin, an evidence flush and scheduling slack.
STUCK_GRACE_S = EXPIRE_MARGIN_S + FLUSH_S + 2.0
# A delivery received this long after the nack that gave a poison message its last attempt was already on
# its way, at least; longer when the subscription's messages took longer than that from publish to delivery just
# before the nack: a subscription whose latest delivery came no later has stopped delivering (`EvidenceTally.stalls`).
STALL_SLACK_S = 1.0
# While a stalled subscription is read by a StreamingPull the emulator serves every other one only every 10 s
# (conformance scenario ordered-dead-letter-spares-other-subscriptions): what the target owed another subscription
# from the stall until this long after the drain closed the stalled streams (+ the grace) was slowed by it.
SLOWED_PERIOD_S = 10.0
CRASH_PREFETCH = 5  # messages per twin a task chosen to crash pulls at a time (unary Pull)
CRASH_AFTER_MAX = 3  # it starts holding (not acking) after at most this many deliveries
READY_TIMEOUT_S = 60.0  # the publisher waits this long at most for a subscriber's open streams
WARM_UP_AFTER_S = 3.0  # the checks are warmed up this long after publishing ended (first deliveries done)
# A subscriber task ends by itself this long after it started at the latest (the stop flag ends it first):
# the drain's ceiling (drain.CEILING_MAX_S), its final read and the publishing before it fit well inside.
SUBSCRIBER_MAX_S = 3 * 3600.0
# A subscriber task streams every twin while they are at most this many; beyond, each twin is read by one task
# (`twins_of_task`). Each stream holds a consumer, a leaser, a heartbeater, a dispatcher and a callback pool in
# the task and two threads in the listener: at 100 topics (300 twins, 2 tasks) 600 streams held 2,811 threads in
# one task and the machine's load reached 836 on 2 cores (docs/performance.md, the 100-topic estate).
STREAMS_PER_TASK = 64
PUBLISH_JOB_GROUP = "pubsubguard-publish"  # + the run id: the Spark job group of its publisher job


def probe(config: RunConfig, spark=None, evidence_at: str | None = None, plan: dict | None = None):
    """Probe the target `config` names: (Spark session, evidence directory, report directory). The evidence
    is written under `<report>/evidence`, or at `evidence_at` (an object store URI every Spark task can
    reach: pubsubguard.validation.job for a `--report` URI). `plan`: the plan or state the command already
    read for `config` (None: read here)."""
    setup, receiver = probe_setup.resolve(config, plan)
    config, nemesis = setup.config, setup.nemesis

    # Spark's JVM is launched (fork + exec) before this process opens any gRPC channel: launched
    # while gRPC's threads ran, it failed now and then ("Java gateway process exited").
    session = spark or spark_session(config.master, log_dir=setup.report)
    endpoints.calm_grpc_waits()  # the listener forwards every stream of the run: see there
    link = netem.start_link(nemesis, setup.upstreams)  # packet faults (netem entries): None without
    try:
        # at most: every subscriber task streams every twin (up to STREAMS_PER_TASK twins; beyond, each twin has
        # one reader), and one more task's worth for a crashed task's replacement
        streams = len(setup.twin_specs) * (config.subscribers + 1)
        listeners = endpoints.Listeners(setup.upstreams, nemesis, dial=link.dial if link else None,
                                        streams=streams).start()
    except BaseException:
        netem.close_link(link)
        raise
    if receiver is not None:
        receiver.start()
    try:
        observations: list[str] = list(caveats(setup.everything.source))  # what the declared side leaves open
        return _probe(setup, session, listeners, receiver, observations, evidence_at)
    finally:
        if nemesis is not None:
            nemesis.stop()
        listeners.stop()
        netem.close_link(link)  # the namespace and its relays: nothing left, also when interrupted
        if receiver is not None:
            receiver.stop()


def _probe(setup: ProbeSetup, session, listeners, receiver, observations: list[str], evidence_at=None):
    config, everything, estate, run_id = setup.config, setup.everything, setup.estate, setup.run_id
    probed, twin_specs, run_identity = setup.probed, setup.twin_specs, setup.run_identity
    dialled = {**setup.mapping, **listeners.mapping}
    publisher = endpoints.publisher_client(facts.GLOBAL_ENDPOINT, dialled, "driver:admin")
    subscriber = endpoints.subscriber_client(facts.GLOBAL_ENDPOINT, dialled, "driver:admin")
    unobserved = sorted(probe_setup.run_endpoints(estate, probed, twin_specs) - set(listeners.listeners))
    if unobserved:
        observations.append(
            f"endpoint pinning not observable for {', '.join(unobserved)}: their traffic goes to Google over TLS; "
            "map them to loopback stand-ins with --endpoint REGION=HOST:PORT to observe it")
    permissions = access.check_permissions(publisher, subscriber,
                                           access.needed_permissions(estate, probed, twin_specs))
    failed = [a for a in permissions if a.result == "error"]
    if failed:
        raise VerifyError(f"--target {config.target}: cannot test the run's permissions (testIamPermissions on "
                          f"{failed[0].resource}: {failed[0].detail})")
    missing = [a for a in permissions if a.result == "missing"]
    if missing:
        raise VerifyError(
            f"--target {config.target}: the run's identity ({run_identity}) lacks permissions: "
            + "; ".join(f"{short_name(a.resource)}: {a.detail}" for a in missing))
    unanswered = [a for a in permissions if a.result == "not answered"]
    if unanswered:
        observations.append(
            f"the target did not answer testIamPermissions on {len(unanswered)} of {len(permissions)} resources "
            f"({unanswered[0].detail.split(':')[0]}): the run's own permissions were not tested")
    # The config check doubles as the reachability check: nothing is created before it answers.
    try:
        drift = config_drift(everything, estate, publisher, subscriber)
    except UserError:
        raise
    except Exception as err:  # noqa: BLE001 - the target did not answer
        raise VerifyError(f"--target {config.target}: cannot read the estate back: {type(err).__name__}: {err}") from None
    missing = [name for name in missing_subscriptions(drift) if name in probed]
    if missing:
        raise VerifyError(
            f"--target {config.target}: declared subscriptions missing on the target: {', '.join(missing)} "
            "(apply the stack first: `pubsubguard apply --emulator`)"
        )

    evidence_dir = probe_setup.fresh_evidence_dir(setup.report, evidence_at)
    tested = {name: not_probed(t, setup.push_url) for name, t in estate.subscriptions.items() if not_probed(t, setup.push_url)}
    parameters = {
        "stack": estate.stack, "project": estate.project, "faults": setup.faults.as_dict(), "keys": config.keys,
        "messages_per_key": config.messages_per_key, "subscribers": config.subscribers,
        "drain_timeout_s": config.drain_timeout, "rate": config.rate, "fault_deadline_s": config.fault_deadline, "skew_us": config.skew_us, "master": session.sparkContext.master,
        "twins": {t.path: t.declared_name for t in twin_specs}, "config_drift": drift, "observations": observations,
        "identity": run_identity, "endpoints": probe_setup.endpoint_record(estate, probed, twin_specs, setup.mapping, listeners),
        "iam": [a.as_dict() for a in permissions],
        "declared_source": everything.source,  # what drift and the guarantees were judged against
        "evidence_dir": str(evidence_dir),  # where it was written (a re-check elsewhere names its own in the text)
    }
    info = evidence.RunInfo(run_id=run_id, target=config.target, subscriptions=[checked(s) for s in estate.subscriptions.values()],
                            parameters=parameters, tested=tested)
    info.write(evidence_dir)

    canary = filter_canary(publisher, subscriber, estate.project, run_id)
    if canary is not None:
        observations.append(canary)

    twins = Twins(run_id=run_id, specs=twin_specs, subscriber=subscriber, service_agent=estate.service_agent,
                  consumer=lambda endpoint: endpoints.subscriber_client(endpoint, dialled, "driver:backlog"))
    stop_file = storage.Marker(storage.join(evidence_dir, "_stop"))
    scenarios = None
    ended = False
    with interruptible():
        try:
            if config.conform:
                scenarios = ConformanceBeside(config.target, estate, setup.emulator_host, setup.report)
            twins.create()
            parameters["twins_created_us"] = time.time_ns() // 1000
            parameters["twins_seek"] = twins.seeks  # each twin seeked to the run's start (repeatable rehearsals)
            observations.extend(twins.unseeked())
            driver = ProbeDriver(session, setup, evidence_dir, stop_file, observations, dialled, receiver, listeners)
            try:
                driver.run()
            finally:
                parameters["drain"] = driver.drain
            if scenarios is not None:
                parameters["conformance"] = scenarios.result()
                note = scenarios.library_note()
                if note:
                    observations.append(note)
                scenarios = None
            ended = True
        finally:
            if scenarios is not None:  # the probe failed or was interrupted: end them, delete their resources
                scenarios.stop()
            stop_file.set()
            session.sparkContext.cancelAllJobs()
            for marker in storage.names(evidence_dir, READY_PREFIX) + storage.names(evidence_dir, PUBLISHING_PREFIX):
                storage.delete(storage.join(evidence_dir, marker))
            for notes in storage.names(evidence_dir, NOTES_PREFIX):
                text = storage.read_text(storage.join(evidence_dir, notes))
                observations.extend(line for line in text.splitlines() if line)
            observations.extend(client_log_summary(evidence_dir))
            left = twins.delete()
            if left:
                observations.append(f"could not delete probe twins {left}; run `pubsubguard verify --cleanup`")
            parameters["iam"] += twins.iam
            if any(a["result"] == "not answered" for a in twins.iam):
                observations.append("the target did not answer setIamPolicy/getIamPolicy: the probe twins' "
                                    "service agent grant was requested but not applied (docs/emulator.md: no IAM)")
            parameters["endpoints"]["traffic"] = listeners.rows()
            if setup.nemesis is not None:
                parameters["nemesis"] = setup.nemesis.as_dict()  # every fault applied, a row each
                setup.nemesis.write_accepted(evidence_dir, run_id)  # ids only the layer saw: publish rows
            info.write(evidence_dir)  # observations so far, also when interrupted
            _jobs_ended(session)  # a cancelled task writes nothing after the seal
            if not ended:  # interrupted: a cancelled task's worker may still write its last part on its way out
                _writes_ended(evidence_dir)
            try:  # last: what the run recorded, fixed (pubsubguard.validation.evidence.seal)
                seal.seal(evidence_dir, run_id)
            except Exception as err:  # noqa: BLE001 - never instead of the run's own error: the check says unsealed
                print(f"verify: the evidence could not be sealed ({type(err).__name__}: {err}); it is judged as "
                      "unsealed", file=sys.stderr)
            stop_file.clear()
            storage.delete(storage.join(evidence_dir, "_heal"))
            storage.delete(storage.join(evidence_dir, "_flow"))
            storage.delete(storage.join(evidence_dir, "_close"))
    return session, evidence_dir, setup.report


def _writes_ended(evidence_dir, quiet_s: float = 1.5, timeout_s: float = 30.0) -> None:
    """Wait (at most `timeout_s`) until the evidence's files have not changed for `quiet_s`: a job is over for
    Spark before its cancelled tasks' Python workers have written their last part (seen under load: two
    parts landed after the seal of a run ended by SIGTERM, and the re-check refused them as extra)."""
    def state():
        names = seal.sealable(evidence_dir)
        if storage.is_remote(evidence_dir):
            return names
        return [(name, os.path.getsize(storage.join(evidence_dir, *name.split("/")))) for name in names]

    deadline, last, since = time.monotonic() + timeout_s, None, time.monotonic()
    while time.monotonic() < deadline:
        try:
            now = state()
        except OSError:  # a file renamed or removed while listed: still changing
            now = None
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            return
        time.sleep(0.25)


def _jobs_ended(session, timeout_s: float = 30.0) -> None:
    """Wait (at most `timeout_s`) until the session runs no job: the probe's cancelled tasks have ended."""
    tracker = session.sparkContext.statusTracker()
    deadline = time.monotonic() + timeout_s
    while tracker.getActiveJobsIds() and time.monotonic() < deadline:
        time.sleep(0.2)


def twins_of_task(twins: list[dict], index: int, subscribers: int, bound: int = STREAMS_PER_TASK) -> list[dict]:
    """The twins subscriber task `index` (of `subscribers`) streams: all of them while they are at most
    `bound`, so every twin has competing subscriber clients; beyond, every `subscribers`-th from `index` on,
    so each twin is read by exactly one task and the tasks' shares differ by one at most."""
    if len(twins) <= bound or subscribers <= 1:
        return list(twins)
    return list(twins[index % subscribers::subscribers])


class ProbeDriver:
    """Runs the publisher job and the subscriber jobs concurrently and drains until settled or timeout."""

    def __init__(self, spark, setup: ProbeSetup, evidence_dir: Path | str, stop_file: storage.Marker,
                 observations: list[str], dialled: dict[str, str], receiver=None, listeners=None):
        config, estate, faults, run_id = setup.config, setup.estate, setup.faults, setup.run_id
        emulator_host, twin_specs, probed = setup.emulator_host, setup.twin_specs, setup.probed
        self.nemesis = setup.nemesis
        self.listeners = listeners  # endpoints.Listeners: where StreamingPull calls are seen to end
        self.spark = spark
        self.sc = spark.sparkContext
        self.config = config
        self.estate = estate
        self.faults = faults
        self.run_id = run_id
        self.evidence_dir = evidence_dir
        self.stop_file = stop_file
        self.heal_file = storage.Marker(storage.join(evidence_dir, "_heal"))  # the drain's final read began
        self.stream_ends_before_heal: dict[str, int] | None = None  # the final read's own stream resets left out
        self.flow_file = storage.join(evidence_dir, "_flow")  # the publishers' allowance (drain.allowed_per_task)
        self.close_file = storage.join(evidence_dir, "_close")  # twins whose streams the subscriber tasks close
        self.closed_at_us: dict[str, int] = {}  # a subscription whose streams the drain closed -> when
        self.drain_base_s = setup.drain_base_s
        self.observations = observations
        self.probed = probed
        self.twin_specs = twin_specs
        self.keys = [f"key-{i:03d}" for i in range(config.keys)]
        topics = sorted({estate.subscriptions[name].topic for name in probed})
        self.topics = [
            {"name": name, "path": estate.topics[name].path, "endpoint": estate.topics[name].publisher_endpoint}
            for name in topics
        ]
        self.poison = {
            t["name"]: sorted(poison_set(run_id, t["name"], self.keys, config.messages_per_key, faults.poison))
            for t in self.topics
        }
        self.base = {
            "run_id": run_id, "target": config.target, "emulator_host": emulator_host,
            "evidence_dir": str(evidence_dir), "flush_rows": FLUSH_ROWS, "flush_s": FLUSH_S, "endpoints": dialled,
            "storage_emulator_host": os.environ.get(storage.EMULATOR_ENV) if storage.is_remote(evidence_dir) else None,
            "fault_deadline_s": config.fault_deadline,
        }
        dead_lettering = {name for name in probed if estate.subscriptions[name].dead_lettering}
        self.twins = [
            {"path": t.path, "declared_name": t.declared_name, "ack_deadline_s": t.ack_deadline_s,
             "retry_max_backoff_s": t.retry_max_backoff_s,
             "consumer_endpoint": t.consumer_endpoint, "dead_lettering": t.declared_name in dead_lettering,
             "ordered": t.ordering}
            for t in twin_specs
        ]
        pushed = {t.path for t in twin_specs if t.push_endpoint}
        self.push_twins = [t for t in self.twins if t["path"] in pushed]
        self.twins = [t for t in self.twins if t["path"] not in pushed]
        self.receiver = receiver
        self.push = None
        self.twin_to_declared = {short_name(t.path): t.declared_name for t in twin_specs}
        self.errors: list[BaseException] = []
        self.publish_group = f"{PUBLISH_JOB_GROUP}-{run_id}"
        self.publish_done = threading.Event()
        self.publish_summary: list[dict] = []
        self.drain_started_us: int | None = None  # when publishing ended  # one row per publisher task (probe.publish_partition)
        self.crashes = 0
        self.task_counter = 0
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        self.drain = {"ended": "not_reached", "unsettled": {}}  # how the drain ended (report parameters)
        # Publisher tasks take the slots the subscriber tasks leave (at least one); each waits until every
        # subscriber task that has a slot beside them is reading, so no message waits for a reader to start.
        slots = self.sc.defaultParallelism
        self.publish_partitions = max(1, min(len(self.keys), slots - config.subscribers))
        # message-subscription pairs per published message (the probed subscriptions of its topic), on average
        topic_subs = [estate.subscriptions[name].topic for name in probed]
        self.pairs_per_message = len(topic_subs) / max(1, len(set(topic_subs)))
        self.ready_subscribers = max(1, min(config.subscribers, slots - self.publish_partitions))
        if self.ready_subscribers < config.subscribers:
            observations.append(
                f"only {self.ready_subscribers} of {config.subscribers} subscriber tasks could read before the first "
                f"publish (Spark master {self.sc.master} has {slots} task slots, {self.publish_partitions} taken by "
                "the publisher): deliveries to the others include their start-up in the latency")

    # -- jobs ------------------------------------------------------------------------------
    def _publish_job(self) -> None:
        from functools import partial

        from .probe.publisher import publish_partition

        spec = {**self.base, "topics": self.topics, "messages_per_key": self.config.messages_per_key,
                "poison": {k: [list(p) for p in v] for k, v in self.poison.items()}, "misroute": self.faults.misroute,
                "ready_timeout_s": READY_TIMEOUT_S, "ready_subscribers": self.ready_subscribers,
                "rate": self.config.rate / self.publish_partitions if self.config.rate else None,
                "flow_file": self.flow_file,
                "flow_initial": int(IN_FLIGHT_PAIRS / self.pairs_per_message / self.publish_partitions)}
        try:
            self.sc.setJobGroup(self.publish_group, "pubsubguard probe: publish")
            self.publish_summary = self.sc.parallelize(self.keys, self.publish_partitions).mapPartitions(
                partial(publish_partition, spec)).collect()
        except BaseException as err:  # noqa: BLE001
            if not self.stop_file.is_set():
                self.errors.append(err)
        finally:
            self.publish_done.set()

    def _subscriber_spec(self, crash_after: int | None, twins: list[dict]) -> dict:
        """A subscriber task's spec; `twins`: those it reads (its share, `twins_of_task`; a replacement reads
        what the task it replaces read)."""
        with self.lock:
            task_id = f"sub-{self.task_counter}"
            self.task_counter += 1
        total = self.config.keys * self.config.messages_per_key * len(self.probed)
        return {**self.base, "task_id": task_id, "twins": twins, "twin_to_declared": self.twin_to_declared,
                "faults": self.faults.as_dict(), "stop_file": self.stop_file.location, "crash_after": crash_after,
                "end_time": time.time() + SUBSCRIBER_MAX_S, "heal_file": self.heal_file.location,
                "close_file": self.close_file, "crash_hold": 3,
                "crash_prefetch": CRASH_PREFETCH, "expire_margin_s": EXPIRE_MARGIN_S, "expected": total}

    def _subscriber_job(self, spec: dict) -> None:
        from functools import partial

        from .probe.subscriber import subscribe_partition

        try:
            self.sc.setJobDescription(f"pubsubguard probe: {spec['task_id']}")
            self.sc.parallelize([0], 1).mapPartitions(partial(subscribe_partition, spec)).collect()
        except BaseException as err:  # noqa: BLE001
            if self.stop_file.is_set():
                return
            full = str(err) or type(err).__name__
            failure_file = storage.join(self.evidence_dir, f"failure-{spec['task_id']}.txt")
            storage.write_text(failure_file, full + "\n")
            text = spark_cause(full)
            if spec["crash_after"] is not None:
                self.observations.append(f"subscriber task {spec['task_id']} crashed as injected (crash fault); "
                                         f"Spark reported: {text} (full text: {failure_file})")
            else:
                self.observations.append(f"subscriber task {spec['task_id']} failed unexpectedly: {text} "
                                         f"(full text: {failure_file})")
            replacement = self._subscriber_spec(None, spec["twins"])
            self.observations.append(f"subscriber task {replacement['task_id']} started to replace {spec['task_id']}")
            self._start(self._subscriber_job, replacement)

    def _start_push(self) -> None:
        """The push twins' subscriber answers the receiver's pushes from now on (pubsubguard.validation.probe.push)."""
        from .probe.push import PushSubscriber

        if not self.push_twins:
            return
        spec = {**self.base, "task_id": "push", "twins": self.push_twins, "twin_to_declared": self.twin_to_declared,
                "faults": self.faults.as_dict(), "crash_after": None, "expire_margin_s": EXPIRE_MARGIN_S}
        self.push = PushSubscriber(spec)
        self.receiver.answer = self.push.answer
        if not self.twins:
            self.push.ready()  # no pull task will say it reads: the publisher need not wait

    def _start(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        with self.lock:
            self.threads.append(thread)
        thread.start()

    def _wait_ready(self, task_id: str, timeout_s: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        ready = storage.Marker(storage.join(self.evidence_dir, f"{READY_PREFIX}{task_id}"), poll_s=0.25)
        while not ready.is_set():
            if time.monotonic() > deadline or self.errors:
                self.observations.append(f"subscriber task {task_id} was not reading within {timeout_s:.0f}s; "
                                         "the other subscriber tasks were started anyway")
                return
            time.sleep(0.05)

    def _wait_for_publisher_slot(self, timeout_s: float = 180.0) -> None:
        """Subscriber tasks hold their slot for the whole run: submitting them before the publisher's
        tasks are running could leave the publisher without a slot until they end. A publisher task says it
        runs with `<evidence>/_publishing-<task>` (probe.PUBLISHING_PREFIX), not Spark's status tracker: the
        store it reads sees a task that started right after its stage only at the next flush, an executor
        heartbeat (10 s) later at worst (benchmarks/spark_status_lag.py: seen 0.8-8.6 s after a job was submitted;
        a main job's first publish came 13-17 s after the twins instead of 3-4 s, docs/performance.md)."""
        deadline = time.monotonic() + timeout_s
        interval = 0.25 if storage.is_remote(self.evidence_dir) else 0.05  # each look at a remote store is a request
        while not self.publish_done.is_set():
            if storage.names(self.evidence_dir, PUBLISHING_PREFIX):
                return
            if time.monotonic() > deadline:
                raise VerifyError(f"the publisher job got no Spark slot within {timeout_s:.0f}s "
                                  f"(master {self.sc.master}, default parallelism {self.sc.defaultParallelism})")
            time.sleep(interval)

    def _free_slot(self) -> bool:
        """A task slot the subscriber tasks (and the publisher, once done) leave free."""
        tracker = self.sc.statusTracker()
        running = sum(stage.numActiveTasks for stage in (tracker.getStageInfo(s) for s in tracker.getActiveStageIds())
                      if stage is not None)
        return running < self.sc.defaultParallelism

    def _late_acks_within_s(self) -> float:
        """How long after the last publish every late ack of the expire fault has been sent and flushed: a
        delivery is held only within one (fault) deadline of its publish (pubsubguard.validation.probe.clients), for that
        deadline + the expire margin. 0 without the expire fault."""
        if not self.faults.expire:
            return 0.0
        return 2 * probe_setup.longest_hold_s(self.twin_specs, self.config.fault_deadline) + EXPIRE_MARGIN_S + FLUSH_S + 1.0

    def _planted_due(self) -> float:
        """The fault layer may still owe a planted effect until then (a lied ack's redelivery): monotonic time."""
        return self.nemesis.quiet_after if self.nemesis is not None else 0.0

    def _dead_lettering(self) -> set[str]:
        """The probed subscriptions with a dead-letter policy (their poison messages are nacked on every delivery)."""
        return {t["declared_name"] for t in self.twins + self.push_twins if t.get("dead_lettering")}

    def _unsettled_drain(self, tally: EvidenceTally, ended: str, unsettled: dict[str, int]) -> dict:
        """How the drain ended, with its unsettled messages told apart: the poison ones of a dead-lettering
        subscription (only forwarding settles them) and the subscriptions that delivered nothing after a poison
        message's last attempt (`stalled`; `_stall_text` says each)."""
        dead_lettering = self._dead_lettering()
        limits = {name: self.estate.subscriptions[name].max_delivery_attempts for name in sorted(dead_lettering)}
        stalled = self._stalls(tally, limits)
        since = min((stall["since_us"] for stall in stalled.values()), default=None)
        # the target was slowed until one serving period after the last stalled subscription's streams were closed
        # (+ grace); a stall whose streams were never closed slowed it to the end. What it owed and the reading (it
        # ends now) could have seen after that, never delivered, the slowing does not explain
        closes = [self.closed_at_us.get(name) for name in stalled]
        slowed_until = None if not closes or None in closes else \
            max(closes) + int((SLOWED_PERIOD_S + STUCK_GRACE_S) * 1e6)
        # streams the fault layer reset (kill_stream, partition): the last reset per subscription
        # streams reset: by the fault layer (kill_stream, partition), or seen by the listeners to end other than
        # OK (the target or the client library reset them), the subscriptions whose streams the drain closed aside
        twin_of = self._declared_of_twin()
        resets: dict[str, int] = {}
        ends = self.stream_ends_before_heal
        if ends is None:
            ends = self.listeners.stream_ends() if self.listeners is not None else {}
        for path, at in ends.items():
            name = twin_of.get(path)
            if name is not None and name not in self.closed:
                resets[name] = max(resets.get(name, 0), at)
        # a reset stream of an unordered subscription may hold any of its messages; counted only when the drain found
        # them stuck (a drain cut at its ceiling left them still moving)
        unordered = frozenset(t["declared_name"] for t in self.twins if not t["ordered"]) \
            if ended != "ceiling" else frozenset()
        lost_replies: dict[str, dict[str, list[int]]] = {}  # Acknowledge replies the layer dropped, by message id
        for row in (self.nemesis.as_dict()["applied"] if self.nemesis is not None else ()):
            if row["kind"] in ("kill_stream", "partition") and row["rpc"] == "StreamingPull" and row["subscription"] \
                    and not row["detail"].startswith("NOT applied"):
                resets[row["subscription"]] = max(resets.get(row["subscription"], 0), row["time_us"])
            if row["kind"] == "lose_response" and row["rpc"] == "Acknowledge" and row["subscription"]:
                for message_id in row["message_ids"]:
                    lost_replies.setdefault(row["subscription"], {}).setdefault(message_id, []).append(row["entry"])
        return {"ended": ended, "unsettled": unsettled, "unsettled_poison": tally.unsettled_poison(dead_lettering),
                "stalled": stalled,
                "after_stall": tally.after_stall(since, set(stalled), slowed_until, time.time_ns() // 1000) if since else {},
                "after_stream_reset": tally.silent_keys(resets, unordered), "after_lost_reply": tally.after_lost_replies(lost_replies),
                # a drain cut at its ceiling left them still moving: only a stuck one says the target delivers them no more
                "after_backoff_stop": tally.after_backoff_stop(frozenset(
                    t["declared_name"] for t in self.twins + self.push_twins if not t["ordered"])) if ended != "ceiling" else {}}

    @property
    def closed(self) -> set[str]:
        """The subscriptions whose streams the drain closed (`_close_stalled`)."""
        return set(self.closed_at_us)

    def _declared_of_twin(self) -> dict[str, str]:
        """A pulled twin's path -> the declared subscription it stands for."""
        return {t["path"]: t["declared_name"] for t in self.twins}

    def _stalls(self, tally: EvidenceTally, limits: dict[str, int]) -> dict[str, dict]:
        """`EvidenceTally.stalls` of the subscriptions in `limits`, with the run's slack and the target's failures."""
        return tally.stalls(limits, int(STALL_SLACK_S * 1e6), self._target_failures())

    def _target_failures(self) -> dict[str, list[int]]:
        """Probed subscription -> when each StreamingPull of its twins ended UNKNOWN, as the listeners saw (the
        target failed it), sorted; empty without listeners."""
        if self.listeners is None:
            return {}
        twin_of = self._declared_of_twin()
        out: dict[str, list[int]] = {}
        for path, times in self.listeners.target_failures().items():
            if path in twin_of:
                out.setdefault(twin_of[path], []).extend(times)
        return {name: sorted(times) for name, times in out.items()}

    @staticmethod
    def _stall_text(tally: EvidenceTally, drain: dict) -> list[str]:
        """One observation per stalled subscription, and one per other subscription with unsettled messages
        whose latest event came after the first stall."""
        start_us = min(tally.published_us.values(), default=0)

        def at(us: int) -> str:
            return f"+{(us - start_us) / 1e6:.1f}s"

        lines = [f"{name} stopped delivering at {at(stall['since_us'])} (its latest delivery: "
                 f"{at(stall['last_delivery_us'])}, what was on its way then arriving within "
                 f"{stall['on_way_us'] / 1e6:.1f} s, its messages' latest latency just before; the target failed its "
                 f"StreamingPulls {stall['target_failures']} times after), when {stall['key']} seq {stall['seq']} "
                 f"(poison) was nacked on "
                 f"delivery attempt {stall['attempt']} (max_delivery_attempts {stall['max_delivery_attempts']}): of its "
                 f"unsettled messages, {stall['unsettled']} are not poison"
                 for name, stall in sorted(drain["stalled"].items())]
        lines += [f"{name}: {late['messages']} unsettled messages ({late['poison']} poison) had their latest event, or "
                  f"the next delivery owed them, after {at(late['since_us'])}, when a subscription stopped delivering"
                  + (f", and the drain ended before the target, no longer slowed from {at(late['until_us'])} (one "
                     f"{SLOWED_PERIOD_S:g} s serving period + grace after the drain closed the stalled streams), could "
                     "deliver them" if late["until_us"] is not None else "")
                  + f"; {name} had {late['deliveries']} deliveries from then on"
                  + (f", the latest at {at(late['last_delivery_us'])}" if late["deliveries"] else "")
                  + (f"; {late['owed_later']} more were owed a delivery the drain waited for after that, when "
                     "nothing slowed the target any more, and never got it: the stall does not explain them"
                     if late["owed_later"] else "")
                  for name, late in sorted(drain["after_stall"].items())]
        lines += [f"{name}: nothing of {len(silent['keys'])} keys with unsettled messages ({', '.join(silent['keys'][:8])}"
                  f"{', ...' if len(silent['keys']) > 8 else ''}) was delivered after its streams were last reset "
                  f"({at(silent['reset_us'])}: by the fault layer, or a StreamingPull seen by the listeners to end other "
                  f"than OK): {silent['messages']} messages (not poison)"
                  for name, silent in sorted(drain["after_stream_reset"].items()) if not silent.get("unordered")]
        lines += [f"{name} (unordered): {silent['messages']} unsettled messages (not poison, on {len(silent['keys'])} "
                  f"keys) were stuck when the drain ended, and its streams had been reset (the last at "
                  f"{at(silent['reset_us'])}: by the fault layer, or a StreamingPull seen by the listeners to end other "
                  "than OK): a target that still dispatches to a reset stream holds them there"
                  for name, silent in sorted(drain["after_stream_reset"].items()) if silent.get("unordered")]
        return lines

    @staticmethod
    def _unsettled_text(tally: EvidenceTally, counts: dict[str, int]) -> str:
        """`orders-ordered 4 (ack: invalid_ack_id 3, expire: none 1), ...`"""
        parts = []
        for name, n in sorted(counts.items()):
            outcomes = ", ".join(f"{what} {k}" for what, k in tally.unsettled_outcomes(name).items())
            parts.append(f"{name} {n} ({outcomes})")
        return "; ".join(parts)

    # -- run -------------------------------------------------------------------------------
    def run(self) -> None:
        slots = self.sc.defaultParallelism
        if self.config.subscribers > slots:
            raise VerifyError(f"--subscribers {self.config.subscribers}: Spark master {self.sc.master} has {slots} task "
                              "slots and each subscriber task holds one for the whole run; the others would never "
                              f"start (use --subscribers {slots} or fewer, or a master with more slots)")
        total = self.config.keys * self.config.messages_per_key * len(self.probed)
        # The crashing task dies early (it starts before publishing, so its first deliveries come at
        # once) and its held messages come back one deadline later.
        crash_after = max(1, min(CRASH_AFTER_MAX, total // (self.config.subscribers * 4)))
        if self.faults.crash:
            quiet_crash_logs(self.sc, True)
        try:
            self._start_push()
            self._run(total, crash_after)
        finally:
            if self.push is not None:
                self.receiver.answer = None
                self.push.close()
            if self.faults.crash:
                quiet_crash_logs(self.sc, False)

    def _run(self, total: int, crash_after: int) -> None:
        footprint = Footprint().start()
        try:
            self._run_jobs(total, crash_after)
        finally:
            samples = footprint.stop()
            self.drain["footprint"] = samples
            said = footprint_sentence(samples)
            if said:
                self.observations.append(said)

    def _run_jobs(self, total: int, crash_after: int) -> None:
        if self.nemesis is not None:
            self.nemesis.start()  # the clock of the schedule's time selectors
        self._start(self._publish_job)
        self._wait_for_publisher_slot()
        shared = len(twins_of_task(self.twins, 0, self.config.subscribers)) == len(self.twins)
        if not shared:
            self.observations.append(
                f"each of the {len(self.twins)} pull twins is read by one of the {self.config.subscribers} subscriber "
                f"tasks (dealt in turn), not by all of them: a task streams every twin only up to {STREAMS_PER_TASK} "
                "twins (validation/driver.py STREAMS_PER_TASK), so competing subscriber clients are not exercised "
                "on these subscriptions")
        for index in range(self.config.subscribers):
            spec = self._subscriber_spec(crash_after if index < self.faults.crash else None,
                                         twins_of_task(self.twins, index, self.config.subscribers))
            self._start(self._subscriber_job, spec)
            if spec["crash_after"] is not None:
                # The crashing task must have its slot (and be reading) before the others are submitted:
                # else another may take the slot beside the publisher and leave it nothing to hold.
                self._wait_ready(spec["task_id"])
        if self.faults.crash > self.config.subscribers:
            self.observations.append(f"crash={self.faults.crash} exceeds --subscribers {self.config.subscribers}: "
                                     f"{self.config.subscribers} crash(es) injected")
        topic_of = {name: self.estate.subscriptions[name].topic for name in self.probed}
        declared = {t["declared_name"]: t for t in self.twins + self.push_twins}
        deadline_us = {name: int(declared[name]["ack_deadline_s"] * 1e6) for name in self.probed}
        # a push twin's nack is an HTTP error, redelivered on the service's own push schedule: pull twins only
        tally = EvidenceTally(self.evidence_dir, topic_of, self.run_id,
                              {name: declared[name]["retry_max_backoff_s"] or 0.0 for name in self.probed},
                              frozenset(t["declared_name"] for t in self.twins if t.get("dead_lettering")))
        published_target = len(self.keys) * self.config.messages_per_key * len(self.topics)
        warm_up = WarmUp(self.spark, self.evidence_dir, self.run_id)
        try:
            self._drain(tally, deadline_us, published_target, warm_up)
        finally:
            warm_up.stop()
        self.stop_file.set()
        for thread in list(self.threads):
            thread.join(timeout=30)

    def _drain(self, tally: EvidenceTally, deadline_us: dict, published_target: int, warm_up: WarmUp) -> None:
        """Drain until settled, provably stuck on every unsettled subscription, or the ceiling
        (`validation/probe/drain_clock.py`); then, unless settled, the healed final read."""
        # a derived ceiling leaves the stuck rule time to decide: a never-delivered message is stuck one declared
        # ack deadline (+ backoff + grace) after its publish, and its subscription one window after its progress
        backoff = {t["declared_name"]: t["retry_max_backoff_s"] or 0.0 for t in self.twins + self.push_twins}
        floor = max((deadline_us[name] / 1e6 + backoff.get(name, 0.0) + 2 * STUCK_GRACE_S for name in self.probed),
                    default=0.0)
        clock = DrainClock(self._windows_s(), self.drain_base_s, self.config.drain_timeout, floor_s=round(floor, 1))
        with progress_bars(not self.config.no_progress) as progress:
            pub_bar = progress.add_task("publishing", total=published_target)
            drain_bar = progress.add_task("draining (settled per subscription)", total=None)
            ticks = 0
            while True:
                time.sleep(0.5)
                tally.refresh()
                progress.update(pub_bar, completed=tally.publish_rows)
                expected = tally.expected()
                progress.update(drain_bar, completed=tally.done(), total=expected or None)
                if self.errors:
                    raise VerifyError(f"publisher job failed: {str(self.errors[0]).splitlines()[0][:500]}")
                now = time.monotonic()
                ticks += 1
                if ticks % 4 == 0 and self._dead_lettering():
                    self._close_stalled(tally, clock)
                if not self.publish_done.is_set():
                    clock.observe(tally, now)
                    overdue = tally.stuck(time.time_ns() // 1000, int(STUCK_GRACE_S * 1e6), deadline_us)
                    self._flow(allowed_per_task(tally, clock, now, self.pairs_per_message, self.publish_partitions,
                                                overdue=overdue))
                    continue
                if clock.started is None:
                    self.drain_started_us = time.time_ns() // 1000
                    clock.begin(tally, now, min(tally.published_us.values(), default=None), time.time_ns() // 1000)
                    late_acks_done = now + self._late_acks_within_s()
                    warm_up_at = now + WARM_UP_AFTER_S
                clock.observe(tally, now)
                if warm_up.thread is None and now >= warm_up_at and warm_up.possible() and self._free_slot():
                    warm_up.start()
                planted_due = now >= self._planted_due()  # a planted effect is always waited for
                if tally.done() >= expected:
                    # every message settled; deliveries the expire fault holds may still await their late ack
                    if now >= late_acks_done and planted_due:
                        ended = "settled"
                        break
                    continue
                unsettled = tally.unsettled()
                stuck = tally.stuck(time.time_ns() // 1000, int(STUCK_GRACE_S * 1e6), deadline_us)
                # nothing reads a subscription whose streams the drain closed (it stalled): what it has not
                # settled yet stays so, stuck from the close, not one ack deadline after its last event
                closed = {name: unsettled[name] for name in sorted(self.closed) if name in unsettled}
                stuck.update(closed)
                ended = clock.end(now, unsettled, stuck) if planted_due else None
                if ended == "stuck":
                    on_closed = (f" (on {', '.join(closed)}: since the drain closed its streams)" if closed else "")
                    why = ("provably stuck -- no delivery, ack or dead-letter for one ack deadline (+ retry backoff "
                           "after a nack; a poison message nacked on a dead-lettering subscription: the backoff alone) "
                           f"+ {STUCK_GRACE_S:.0f}s since their last recorded event{on_closed}, and no "
                           "progress on their subscription for its window" if stuck == unsettled else
                           f"their subscriptions stopped -- no message delivered for the first time and none settled "
                           f"for its window -- when the ceiling ({clock.ceiling:.0f}s) passed")
                    self.observations.append(
                        f"drain ended: {expected - tally.done()} of {expected} published messages not settled (acked "
                        f"with success or dead-lettered) and {why} -- per subscription (and how their latest delivery "
                        f"ended): {self._unsettled_text(tally, unsettled)}")
                    break
                if ended == "ceiling":
                    moving = sorted(name for name in unsettled if not clock.stopped(name, now))
                    self.observations.append(
                        f"drain ceiling ({clock.ceiling:.0f}s) passed with {expected - tally.done()} of {expected} "
                        f"published messages not settled (acked with success or dead-lettered); still making progress: "
                        f"{', '.join(moving) or 'none'}; per subscription (and how their latest delivery ended): "
                        f"{self._unsettled_text(tally, unsettled)}; those never delivered are counted unsettled, not "
                        "lost (no final read proved them lost)")
                    break
            self.drain = {"clock": clock.record(time.monotonic(), ended, tally)}
            if ended == "stuck":
                final = self._final_read(tally, progress, drain_bar, deadline_us)
                proven = final["ended"] in ("quiet", "settled", "closed")
            else:
                final, proven = None, False
            unsettled = tally.unsettled()
            self.drain.update(self._unsettled_drain(tally, ended, unsettled))
            self.drain["clock"]["publish_flow"] = {
                "in_flight_pairs": IN_FLIGHT_PAIRS, "rate": self.config.rate,
                "waited_s": round(sum(r.get("flow_waited_s", 0.0) for r in self.publish_summary), 1),
                "let_go": sum(1 for r in self.publish_summary if r.get("flow_let_go"))}
            self.drain["final_read"] = final
            # a final read through a stream the client library had paused, or on which it held messages it never
            # handed to the probe, proves nothing of that subscription
            held = self._held_in_client(unsettled) if final else {}
            self.drain["held_in_client"] = held
            # subscriptions whose never-delivered messages no final read proved lost: unsettled, never `lost`
            self.drain["unproven"] = sorted(held) if proven else sorted(unsettled)
            self.drain["cut"] = {name: tally.never_delivered(name) for name in self.drain["unproven"]
                                 if name not in held and tally.never_delivered(name)}
            self.observations.append(clock_sentence(self.drain))
            self.observations.extend(self._stall_text(tally, self.drain))

    def _held_in_client(self, unsettled: dict[str, int]) -> dict[str, dict]:
        """The unsettled subscriptions whose stream the final read kept (ordered ones) and on which the client
        library, when the final read began, held messages it never handed to the probe or had paused the stream
        by its flow control (`<evidence>/client-state-<task>.json`, per task): their final read proves nothing;
        said in one observation each."""
        held: dict[str, dict] = {}
        for file in storage.names(self.evidence_dir, CLIENT_STATE_PREFIX):
            task = file[len(CLIENT_STATE_PREFIX):].removesuffix(".json")
            try:
                states = json.loads(storage.read_text(storage.join(self.evidence_dir, file)) or "{}")
            except (OSError, ValueError):
                continue
            for name, state in states.items():
                if name not in unsettled or state.get("reopened") or not (
                        state["leased"] or state["on_hold"] or state["paused"]):
                    continue
                entry = held.setdefault(name, {"leased": 0, "on_hold": 0, "paused_tasks": [], "tasks": []})
                entry["leased"] += state["leased"]
                entry["on_hold"] += state["on_hold"]
                entry["tasks"].append(task)
                if state["paused"]:
                    entry["paused_tasks"].append(task)
        for name, entry in sorted(held.items()):
            paused = (f"; its flow control had paused the stream of {', '.join(entry['paused_tasks'])}"
                      if entry["paused_tasks"] else "")
            self.observations.append(
                f"final read of {name}: when it began, the probe's client library held {entry['leased']:,} leased "
                f"messages ({entry['on_hold']:,} behind an earlier message of their ordering key) it never handed to "
                f"the probe{paused}, and an ordered stream is kept for the final read: of its {unsettled[name]:,} "
                "unsettled messages, those no earlier cause takes are form held_in_client, none `lost`")
        return held

    def _windows_s(self) -> dict[str, float]:
        """Per probed subscription: how long it may make no progress before it counts as stopped (its longest
        hold + the retry backoff after a nack + STUCK_GRACE_S)."""
        out = {}
        for spec in self.twin_specs:
            if spec.drain:
                continue
            hold = probe_setup.held_deadline_s(spec, self.config.fault_deadline) + EXPIRE_MARGIN_S
            window = hold + (spec.retry_max_backoff_s or 0.0) + STUCK_GRACE_S
            out[spec.declared_name] = max(out.get(spec.declared_name, 0.0), window)
        return out

    def _close_stalled(self, tally: EvidenceTally, clock: DrainClock | None) -> set[str]:
        """The ordered dead-lettering subscriptions that stopped delivering after a poison message's last attempt
        (`EvidenceTally.stalls`) and made no progress for their window (`clock`; None: stalled is enough):
        their streams are closed (`<evidence>/_close`, read by the subscriber tasks), said once each. While
        such a subscription is read by a StreamingPull, the emulator serves every other subscription only every
        10 s (conformance scenario ordered-dead-letter-spares-other-subscriptions); what it stopped delivering it
        does not deliver later (ordered-dead-letter-keeps-delivering), so nothing of it is lost by closing. An
        unordered subscription is never closed: no scenario says what it would spare, and its final read reads
        it on fresh streams."""
        limits = {name: self.estate.subscriptions[name].max_delivery_attempts for name in sorted(self._dead_lettering())
                  if self.estate.subscriptions[name].ordering}
        now = time.monotonic()
        stalled = {name for name in self._stalls(tally, limits)
                   if clock is None or clock.stopped(name, now)}
        new = stalled - self.closed
        if new:
            self.closed_at_us.update({name: time.time_ns() // 1000 for name in new})
            storage.write_text(self.close_file, json.dumps(sorted(t["path"] for t in self.twins
                                                                  if t["declared_name"] in self.closed)))
            start_us = min(tally.published_us.values(), default=0)
            self.observations.append(
                f"closed the streams of {', '.join(sorted(new))} at +{(time.time_ns() // 1000 - start_us) / 1e6:.1f}s: "
                "it delivered nothing after a poison message's last delivery attempt and made no progress since; "
                "while a stalled subscription is read by a StreamingPull the emulator serves every other one only "
                "every 10 s (conformance scenario ordered-dead-letter-spares-other-subscriptions)")
        return stalled

    def _flow(self, allowed: int) -> None:
        """The publisher tasks' allowance (`drain.allowed_per_task`), for them to read (`probe.Flow`)."""
        try:
            storage.write_text(self.flow_file, f"{allowed}\n")
        except OSError as err:  # the publishers keep the last allowance they read; said once
            if f"flow: {err}" not in self.observations:
                self.observations.append(f"flow: could not write {self.flow_file}: {err}")

    def _final_read(self, tally: EvidenceTally, progress, drain_bar, deadline_us: dict) -> dict:
        """The healed final read: no fault from here on (the fault layer heals, the subscriber tasks and the push
        receiver settle every delivery); read for at least one ack deadline (+ margin and grace) of every
        subscription with never-delivered messages -- any lease the target still holds on them runs out and they
        must come back -- and until the target delivers nothing for FINAL_READ_QUIET_S (at most
        `final_read_bound_s`), or everything settled."""
        # every subscription that stopped delivering after a poison message's last attempt has its streams closed
        # for the final read (while read by a StreamingPull, a stalled one slows every other on the emulator)
        stalled = self._close_stalled(tally, None)
        # the streams the final read itself cancels and opens anew are no reset of the target's
        self.stream_ends_before_heal = self.listeners.stream_ends() if self.listeners is not None else {}
        reading = [name for name in tally.unsettled() if name not in stalled]
        if self.nemesis is not None:
            self.nemesis.heal()
        self.heal_file.set()
        if self.push is not None:
            self.push.healed = True
        started, started_us = time.monotonic(), time.time_ns() // 1000
        rows_before, settled_before = tally.delivery_rows, tally.done()
        # at least until every unsettled message's next delivery came due (+ grace) -- a rejected ack or a nack
        # leaves the message with the target until its deadline (+ backoff) -- and one ack deadline (+ margin and
        # grace) of every subscription with never-delivered messages: any lease still held on them runs out
        latest_due = tally.latest_due_us(reading, deadline_us)
        lease_s = round(max([(latest_due - started_us) / 1e6 + STUCK_GRACE_S if latest_due else 0.0] + [
            deadline_us[name] / 1e6 + EXPIRE_MARGIN_S + STUCK_GRACE_S for name in reading if tally.never_delivered(name)]
            + [0.0]), 1)
        # nothing to read when every unsettled subscription stalled and has its streams closed: the healed tasks
        # only settle what the target still sends (redeliveries of settled messages) until it is quiet for
        # FINAL_READ_QUIET_S before they stop
        quiet_s = final_read_quiet_s(tally.delivery_gap_us(since_us=self.drain_started_us)) if reading \
            else FINAL_READ_QUIET_S
        bound = final_read_bound_s(self._windows_s(), lease_s) + quiet_s
        last_rows, quiet_since, ended = tally.delivery_rows, started, "bound"
        while time.monotonic() - started < bound:
            time.sleep(0.5)
            tally.refresh()
            progress.update(drain_bar, completed=tally.done())
            if tally.done() >= tally.expected():
                ended = "settled"
                break
            if tally.delivery_rows != last_rows:
                last_rows, quiet_since = tally.delivery_rows, time.monotonic()
            elif time.monotonic() - quiet_since >= quiet_s and time.monotonic() - started >= lease_s:
                ended = "quiet" if reading else "closed"
                break
        return {"started_us": started_us, "ended_us": time.time_ns() // 1000, "ended": ended,
                "seconds": round(time.monotonic() - started, 1), "lease_s": lease_s, "bound_s": bound,
                "quiet_s": quiet_s, "closed": sorted(stalled), "deliveries": tally.delivery_rows - rows_before,
                "settled": tally.done() - settled_before}
