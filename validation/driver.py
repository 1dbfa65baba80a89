"""The probe driver: from a resolved target to recorded evidence.

`probe_target(config, spark)` resolves the run (`run_setup.resolve`: estate, target, twins, endpoints, fault
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

import os
import sys
import threading
import time
from pathlib import Path

from pubsubguard.core import storage
from pubsubguard.core.declared import short_name
from pubsubguard.core.errors import UserError, VerifyError
from pubsubguard.core.state import caveats
from pubsubguard.policies import pubsub_facts as facts

from . import run_setup
from .checks.drift import config_drift, missing_subscriptions
from .client_logs import client_log_summary
from .config import EXPIRE_MARGIN_S, RunConfig
from .conformance.beside import ConformanceBeside
from .draining import DrainSteps
from .evidence import records, seal
from .failures import quiet_crash_logs, spark_cause
from .footprint import Footprint, sentence as footprint_sentence
from .probe import access
from .probe.canary import filter_canary
from .probe.clients import FLUSH_ROWS, FLUSH_S, NOTES_PREFIX, PUBLISHING_PREFIX, READY_PREFIX
from .probe.drain import EvidenceTally
from .probe.drain_clock import IN_FLIGHT_PAIRS
from .probe.faults import poison_set
from .probe.subscriber import SubscriberSpec
from .probe.twins import TwinSpec, Twins, not_probed
from .run_setup import ProbeSetup
from .session import spark_session
from .signals import interruptible
from .target import checked
from .warmup import WarmUp
from .wire import endpoints, netem
from .wire.listeners import Listeners

CRASH_PREFETCH = 5  # messages per twin a task chosen to crash pulls at a time (unary Pull)
CRASH_AFTER_MAX = 3  # it starts holding (not acking) after at most this many deliveries
READY_TIMEOUT_S = 60.0  # the publisher waits this long at most for a subscriber's open streams
# A subscriber task ends by itself this long after it started at the latest (the stop flag ends it first):
# the drain's ceiling (drain.CEILING_MAX_S), its final read and the publishing before it fit well inside.
SUBSCRIBER_MAX_S = 3 * 3600.0
# A subscriber task streams every twin while they are at most this many; beyond, each twin is read by one task
# (`twins_of_task`). Each stream holds a consumer, a leaser, a heartbeater, a dispatcher and a callback pool in
# the task and two threads in the listener: at 100 topics (300 twins, 2 tasks) 600 streams held 2,811 threads in
# one task and the machine's load reached 836 on 2 cores (docs/performance.md, the 100-topic estate).
STREAMS_PER_TASK = 64
PUBLISH_JOB_GROUP = "pubsubguard-publish"  # + the run id: the Spark job group of its publisher job


def probe_target(config: RunConfig, spark=None, evidence_at: str | None = None, plan: dict | None = None):
    """Probe the target `config` names: (Spark session, evidence directory, report directory). The evidence
    is written under `<report>/evidence`, or at `evidence_at` (an object store URI every Spark task can
    reach: pubsubguard.validation.job for a `--report` URI). `plan`: the plan or state the command already
    read for `config` (None: read here)."""
    setup, receiver = run_setup.resolve(config, plan)
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
        listeners = Listeners(setup.upstreams, nemesis, dial=link.dial if link else None,
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
    config, estate, run_id, twin_specs = setup.config, setup.estate, setup.run_id, setup.twin_specs
    dialled = {**setup.mapping, **listeners.mapping}
    publisher = endpoints.publisher_client(facts.GLOBAL_ENDPOINT, dialled, "driver:admin")
    subscriber = endpoints.subscriber_client(facts.GLOBAL_ENDPOINT, dialled, "driver:admin")
    permissions, drift = _preflight(setup, listeners, publisher, subscriber, observations)

    evidence_dir = run_setup.fresh_evidence_dir(setup.report, evidence_at)
    parameters = _parameters(setup, session, listeners, permissions, drift, observations, evidence_dir)
    tested = {name: not_probed(t, setup.push_url) for name, t in estate.subscriptions.items() if not_probed(t, setup.push_url)}
    info = records.RunInfo(run_id=run_id, target=config.target, subscriptions=[checked(s) for s in estate.subscriptions.values()],
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
                scenarios = ConformanceBeside(config.target, estate, setup.emulator_host, setup.report,
                                              apart=config.conform_apart)
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
            _close(setup, session, info, evidence_dir, stop_file, twins, listeners, observations, ended)
    return session, evidence_dir, setup.report


def _preflight(setup: ProbeSetup, listeners, publisher, subscriber, observations: list[str]):
    """Before anything is created: the run's permissions tested and the estate read back (the config check
    doubles as the reachability check); VerifyError when either refuses the run. (permissions, drift)."""
    config, everything, estate = setup.config, setup.everything, setup.estate
    probed, twin_specs, run_identity = setup.probed, setup.twin_specs, setup.run_identity
    unobserved = sorted(run_setup.run_endpoints(estate, probed, twin_specs) - set(listeners.listeners))
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
    return permissions, drift


def _parameters(setup: ProbeSetup, session, listeners, permissions, drift, observations: list[str],
                evidence_dir) -> dict:
    """run.json's parameters: what the run was asked and what it found before probing (`observations` is the
    run's own list, extended as the run goes)."""
    config, everything, estate = setup.config, setup.everything, setup.estate
    probed, twin_specs = setup.probed, setup.twin_specs
    return {
        "stack": estate.stack, "project": estate.project, "faults": config.faults.as_dict(), "keys": config.keys,
        "messages_per_key": config.messages_per_key, "subscribers": config.subscribers,
        "drain_timeout_s": config.drain_timeout, "rate": config.rate, "fault_deadline_s": config.fault_deadline, "skew_us": config.skew_us, "master": session.sparkContext.master,
        "twins": {t.path: t.declared_name for t in twin_specs}, "config_drift": drift, "observations": observations,
        "identity": setup.run_identity, "endpoints": run_setup.endpoint_record(estate, probed, twin_specs, setup.mapping, listeners),
        "iam": [a.as_dict() for a in permissions],
        "declared_source": everything.source,  # what drift and the guarantees were judged against
        "evidence_dir": str(evidence_dir),  # where it was written (a re-check elsewhere names its own in the text)
    }


def _close(setup: ProbeSetup, session, info, evidence_dir, stop_file, twins, listeners, observations: list[str],
           ended: bool) -> None:
    """The run's end, also when it failed or was interrupted (`ended` False): its tasks stopped, what they
    noted gathered, the twins deleted, run.json written with all of it, and the evidence sealed."""
    parameters, run_id = info.parameters, setup.run_id
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


def twins_of_task(twins: list[TwinSpec], index: int, subscribers: int, bound: int = STREAMS_PER_TASK) -> list[TwinSpec]:
    """The twins subscriber task `index` (of `subscribers`) streams: all of them while they are at most
    `bound`, so every twin has competing subscriber clients; beyond, every `subscribers`-th from `index` on,
    so each twin is read by exactly one task and the tasks' shares differ by one at most."""
    if len(twins) <= bound or subscribers <= 1:
        return list(twins)
    return list(twins[index % subscribers::subscribers])


class ProbeDriver(DrainSteps):
    """Runs the publisher job and the subscriber jobs concurrently and drains until settled or timeout."""

    subscriber_max_s = SUBSCRIBER_MAX_S  # a subscriber task ends by itself this long after it started

    def __init__(self, spark, setup: ProbeSetup, evidence_dir: Path | str, stop_file: storage.Marker,
                 observations: list[str], dialled: dict[str, str], receiver=None, listeners=None):
        config, estate, run_id = setup.config, setup.estate, setup.run_id
        emulator_host, twin_specs, probed = setup.emulator_host, setup.twin_specs, setup.probed
        self.nemesis = setup.nemesis
        self.listeners = listeners  # Listeners: where StreamingPull calls are seen to end
        self.spark = spark
        self.sc = spark.sparkContext
        self.config = config
        self.estate = estate
        self.faults = config.faults
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
        self._workload(setup)
        self.dialled = dialled
        self.emulator_host = emulator_host
        self.storage_emulator_host = os.environ.get(storage.EMULATOR_ENV) if storage.is_remote(evidence_dir) else None
        self.base = {
            "run_id": run_id, "target": config.target, "emulator_host": emulator_host,
            "evidence_dir": str(evidence_dir), "flush_rows": FLUSH_ROWS, "flush_s": FLUSH_S, "endpoints": dialled,
            "storage_emulator_host": self.storage_emulator_host, "fault_deadline_s": config.fault_deadline,
        }  # what every publisher task is handed (a subscriber task's is its `SubscriberSpec`)
        # the twins the tasks read, as they are (`TwinSpec`, a frozen value the tasks are handed): pull and push
        self.twins = [t for t in twin_specs if not t.push_endpoint]
        self.push_twins = [t for t in twin_specs if t.push_endpoint]
        self.receiver = receiver
        self.push = None
        self.twin_to_declared = {short_name(t.path): t.declared_name for t in twin_specs}
        self.errors: list[BaseException] = []
        self.publish_group = f"{PUBLISH_JOB_GROUP}-{run_id}"
        self.publish_done = threading.Event()
        self.publish_summary: list[dict] = []  # one row per publisher task (probe.publisher.publish_partition)
        self.drain_started_us: int | None = None  # when publishing ended
        self.crashes = 0
        self.task_counter = 0
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        self.drain = {"ended": "not_reached", "unsettled": {}}  # how the drain ended (report parameters)
        self._share_slots()

    def _workload(self, setup: ProbeSetup) -> None:
        """What is published: the ordering keys, the probed topics (where each is published) and the messages
        of each published as poison (the `poison` fault, the same draw in every task)."""
        config, estate = setup.config, setup.estate
        self.keys = [f"key-{i:03d}" for i in range(config.keys)]
        topics = sorted({estate.subscriptions[name].topic for name in setup.probed})
        self.topics = [
            {"name": name, "path": estate.topics[name].path, "endpoint": estate.topics[name].publisher_endpoint}
            for name in topics
        ]
        self.poison = {
            t["name"]: sorted(poison_set(setup.run_id, t["name"], self.keys, config.messages_per_key,
                                         config.faults.poison))
            for t in self.topics
        }
        # message-subscription pairs per published message (the probed subscriptions of its topic), on average
        topic_subs = [estate.subscriptions[name].topic for name in setup.probed]
        self.pairs_per_message = len(topic_subs) / max(1, len(set(topic_subs)))

    def _share_slots(self) -> None:
        """Publisher tasks take the Spark task slots the subscriber tasks leave (at least one); each waits until
        every subscriber task that has a slot beside them is reading, so no message waits for a reader to start."""
        slots, subscribers = self.sc.defaultParallelism, self.config.subscribers
        self.publish_partitions = max(1, min(len(self.keys), slots - subscribers))
        self.ready_subscribers = max(1, min(subscribers, slots - self.publish_partitions))
        if self.ready_subscribers < subscribers:
            self.observations.append(
                f"only {self.ready_subscribers} of {subscribers} subscriber tasks could read before the first "
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

    def _subscriber_spec(self, crash_after: int | None, twins, task_id: str | None = None) -> SubscriberSpec:
        """A subscriber task's spec, the one place one is built; `twins`: those it reads (its share, `twins_of_task`;
        a replacement reads what the task it replaces read); `task_id` None: the next `sub-N`."""
        if task_id is None:
            with self.lock:
                task_id = f"sub-{self.task_counter}"
                self.task_counter += 1
        return SubscriberSpec(
            run_id=self.run_id, task_id=task_id, evidence_dir=str(self.evidence_dir), twins=tuple(twins),
            twin_to_declared=self.twin_to_declared, faults=self.faults, crash_after=crash_after,
            crash_prefetch=CRASH_PREFETCH, end_time=time.time() + self.subscriber_max_s,
            stop_file=self.stop_file.location, heal_file=self.heal_file.location, close_file=self.close_file,
            fault_deadline_s=self.config.fault_deadline, expire_margin_s=EXPIRE_MARGIN_S, flush_rows=FLUSH_ROWS,
            flush_s=FLUSH_S, endpoints=self.dialled, emulator_host=self.emulator_host,
            storage_emulator_host=self.storage_emulator_host)

    def _subscriber_job(self, spec: SubscriberSpec) -> None:
        from functools import partial

        from .probe.subscriber import subscribe_partition

        try:
            self.sc.setJobDescription(f"pubsubguard probe: {spec.task_id}")
            self.sc.parallelize([0], 1).mapPartitions(partial(subscribe_partition, spec)).collect()
        except BaseException as err:  # noqa: BLE001
            if self.stop_file.is_set():
                return
            full = str(err) or type(err).__name__
            failure_file = storage.join(self.evidence_dir, f"failure-{spec.task_id}.txt")
            storage.write_text(failure_file, full + "\n")
            text = spark_cause(full)
            if spec.crash_after is not None:
                self.observations.append(f"subscriber task {spec.task_id} crashed as injected (crash fault); "
                                         f"Spark reported: {text} (full text: {failure_file})")
            else:
                self.observations.append(f"subscriber task {spec.task_id} failed unexpectedly: {text} "
                                         f"(full text: {failure_file})")
            replacement = self._subscriber_spec(None, spec.twins)
            self.observations.append(f"subscriber task {replacement.task_id} started to replace {spec.task_id}")
            self._start(self._subscriber_job, replacement)

    def _start_push(self) -> None:
        """The push twins' subscriber answers the receiver's pushes from now on (pubsubguard.validation.probe.push)."""
        from .probe.push import PushSubscriber

        if not self.push_twins:
            return
        self.push = PushSubscriber(self._subscriber_spec(None, self.push_twins, task_id="push"))
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
            self._run(crash_after)
        finally:
            if self.push is not None:
                self.receiver.answer = None
                self.push.close()
            if self.faults.crash:
                quiet_crash_logs(self.sc, False)

    def _run(self, crash_after: int) -> None:
        footprint = Footprint().start()
        try:
            self._run_jobs(crash_after)
        finally:
            samples = footprint.stop()
            self.drain["footprint"] = samples
            said = footprint_sentence(samples)
            if said:
                self.observations.append(said)

    def _run_jobs(self, crash_after: int) -> None:
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
            if spec.crash_after is not None:
                # The crashing task must have its slot (and be reading) before the others are submitted:
                # else another may take the slot beside the publisher and leave it nothing to hold.
                self._wait_ready(spec.task_id)
        if self.faults.crash > self.config.subscribers:
            self.observations.append(f"crash={self.faults.crash} exceeds --subscribers {self.config.subscribers}: "
                                     f"{self.config.subscribers} crash(es) injected")
        topic_of = {name: self.estate.subscriptions[name].topic for name in self.probed}
        declared = {t.declared_name: t for t in self.twins + self.push_twins}
        deadline_us = {name: int(declared[name].ack_deadline_s * 1e6) for name in self.probed}
        # a push twin's nack is an HTTP error, redelivered on the service's own push schedule: pull twins only
        tally = EvidenceTally(self.evidence_dir, topic_of, self.run_id,
                              {name: declared[name].retry_max_backoff_s or 0.0 for name in self.probed},
                              frozenset(t.declared_name for t in self.twins if t.dead_lettering))
        published_target = len(self.keys) * self.config.messages_per_key * len(self.topics)
        warm_up = WarmUp(self.spark, self.evidence_dir, self.run_id)
        try:
            self._drain(tally, deadline_us, published_target, warm_up)
        finally:
            warm_up.stop()
        self.stop_file.set()
        for thread in list(self.threads):
            thread.join(timeout=30)

