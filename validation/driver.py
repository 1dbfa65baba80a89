"""The probe driver: from a resolved target to recorded evidence.

`probe(config, spark)` checks the target's config (each difference a `config_drift` finding), runs the
filter canary, creates the probe twins (isolation), runs the publisher job (partitioned by ordering
key) and the subscriber jobs (one Spark job per subscriber task, submitted from driver threads; a
crashed task is replaced) through `ProbeDriver`, drains until every published message is settled
per subscription, or every unsettled one is provably stuck (`EvidenceTally.stuck`: nothing recorded for
one ack deadline + retry backoff + `STUCK_GRACE_S` since its last event), or `--drain-timeout`, and
deletes the twins (also on SIGINT/SIGTERM). It returns
the Spark session, the evidence directory and the report directory for the checks.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

from pubsubguard.policies import pubsub_facts as facts

from pubsubguard.core import probe_contract

from pubsubguard.core import storage
from pubsubguard.core.errors import UserError
from pubsubguard.validation import access, endpoints, evidence, locks, netem, seal, upstream
from pubsubguard.validation.config import DEFAULT_FAULT_DEADLINE_S, DRAIN_SLACK_S, EXPIRE_MARGIN_S, RunConfig
from pubsubguard.core.declared import PUSH, short_name
from pubsubguard.core.state import caveats
from pubsubguard.validation.drift import config_drift, missing_subscriptions
from pubsubguard.validation.failures import VerifyError, client_log_summary, quiet_crash_logs, spark_cause
from pubsubguard.validation.faults import Faults, parse_faults, poison_set
from pubsubguard.validation.isolation import Twins, not_probed, plan_twins
from pubsubguard.validation.probe import FLUSH_ROWS, FLUSH_S, NOTES_PREFIX, READY_PREFIX
from pubsubguard.validation.progress import EvidenceTally, progress_bars
from pubsubguard.validation.session import spark_session
from pubsubguard.validation.signals import interruptible
from pubsubguard.validation.target import checked, declared_estate, resolve_target

# The drain stops waiting for a message this long after one ack deadline (+ retry backoff after a nack)
# since its last recorded event: the expire margin, an evidence flush and scheduling slack.
STUCK_GRACE_S = EXPIRE_MARGIN_S + FLUSH_S + 2.0
CRASH_PREFETCH = 5  # messages per twin a task chosen to crash pulls at a time (unary Pull)
CRASH_AFTER_MAX = 3  # it starts holding (not acking) after at most this many deliveries
READY_TIMEOUT_S = 60.0  # the publisher waits this long at most for a subscriber's open streams
REHEARSAL_AFTER_S = 3.0  # the checks are rehearsed this long after publishing ended (first deliveries done)
PUBLISH_JOB_GROUP = "pubsubguard-publish"  # + the run id: the Spark job group of its publisher job


def _positive(name: str, value: float) -> None:
    if value <= 0:
        raise VerifyError(f"{name}: expected a positive number, got {value}")


def held_deadline_s(twin, fault_deadline_s: float | None) -> float:
    """How long a delivery the faults hold stays out: the fault deadline (set by ModifyAckDeadline, see
    `pubsubguard.validation.probe`), never more than the twin's own; a push twin's own (a push has no ack id to modify)."""
    if twin.push_endpoint or not fault_deadline_s:
        return twin.ack_deadline_s
    return min(twin.ack_deadline_s, fault_deadline_s)


def default_drain_timeout(twin_specs, fault_deadline_s: float | None = DEFAULT_FAULT_DEADLINE_S) -> float:
    """What a target keeping the documented semantics needs to settle every message under the faults, plus
    slack: the longest time a held delivery stays out (`held_deadline_s`) + the expire margin + the longest
    retry backoff (a nack's redelivery) + DRAIN_SLACK_S (dead-lettering's repeated attempts, scheduling).
    A target that keeps a message longer (e.g. until the subscription's own deadline after rejecting its
    ack) leaves it unsettled at the drain's end: `inconclusive`, with the reason in the observations."""
    backoff = max((t.retry_max_backoff_s or 0.0 for t in twin_specs if not t.drain), default=0.0)
    return longest_hold_s(twin_specs, fault_deadline_s) + EXPIRE_MARGIN_S + backoff + DRAIN_SLACK_S


def longest_hold_s(twin_specs, fault_deadline_s: float | None) -> float:
    """The longest a delivery the faults hold stays out, over the probed twins (`held_deadline_s`)."""
    return max((held_deadline_s(t, fault_deadline_s) for t in twin_specs if not t.drain),
               default=facts.ACK_DEADLINE_DEFAULT_S)


def report_dir(config: RunConfig, stack: str) -> Path:
    """--report (a local directory here: pubsubguard.validation.job stages a URI), else out/<stack>/report."""
    return (config.report or Path("out") / stack / "report").resolve()


def fresh_evidence_dir(report: Path, at: str | None = None) -> Path | str:
    """`<report>/evidence` (or `at`, an object store URI), emptied of a previous run's evidence; a
    directory holding anything else is refused."""
    directory = at or report / "evidence"
    if storage.files(directory):
        if not storage.exists(storage.join(directory, "run.json")):
            raise VerifyError(f"--report {storage.parent(directory)}: {directory} exists and is not evidence of a run; "
                              "choose another directory")
        storage.delete_tree(directory)  # a previous run's evidence in our own output directory
    if not storage.is_remote(directory):
        (directory / "publishes").mkdir(parents=True, exist_ok=True)
        (directory / "deliveries").mkdir(parents=True, exist_ok=True)
    return directory


@dataclass(frozen=True)
class ProbeSetup:
    """What `probe` resolved before anything is created on the target: the run's configuration (its drain
    timeout decided), the declared estate (all of it, and as the stack declares it), the target, the
    subscriptions probed and their twins, the endpoint map and the run's identity."""

    config: RunConfig
    everything: object  # pubsubguard.core.declared.Estate
    estate: object
    emulator_host: str | None
    run_id: str
    report: Path
    probed: tuple[str, ...]
    twin_specs: tuple
    faults: Faults
    mapping: dict
    run_identity: str
    push_url: str | None
    nemesis: object = None  # pubsubguard.validation.nemesis.Nemesis: the fault layer's schedule (None: none)


def probe(config: RunConfig, spark=None, evidence_at: str | None = None):
    """Probe the target `config` names: (Spark session, evidence directory, report directory). The evidence
    is written under `<report>/evidence`, or at `evidence_at` (an object store URI every Spark task can
    reach: pubsubguard.validation.job for a `--report` URI)."""
    faults = parse_faults(config.faults)
    for name in ("keys", "messages_per_key", "subscribers", "drain_timeout"):
        if getattr(config, name) is not None:
            _positive(f"--{name.replace('_', '-')}", getattr(config, name))
    everything, estate = declared_estate(config)
    emulator_host = resolve_target(config, estate)
    run_id = uuid.uuid4().hex
    report = report_dir(config, estate.stack)
    locks.acquire(report, "--report")  # one run per report directory (released by the caller's locks.scope)
    receiver, push_url = push_receiver(config)
    probed = tuple(name for name, t in estate.subscriptions.items() if not_probed(t, push_url) is None)
    if not probed:
        raise VerifyError(f"stack {estate.stack!r}: no pull or push subscription to probe (export ones are not probed)")
    twin_specs = tuple(plan_twins(estate, run_id, push_url))
    if config.drain_timeout is None:
        config = config.but(drain_timeout=default_drain_timeout(twin_specs, config.fault_deadline))
    mapping = endpoints.parse_endpoint_map(config.endpoint)
    used = run_endpoints(estate, probed, twin_specs)
    upstreams = endpoints.observable_upstreams(used, mapping, emulator_host)
    if config.nemesis is not None:  # the fault layer: every endpoint through a listener (TLS onward to Google)
        upstreams = upstream.layer_upstreams(used, mapping, upstreams)
    all_loopback = all(endpoints.is_loopback(mapping.get(e) or emulator_host or e) for e in used)
    if config.target == "gcp" and not all_loopback:
        access.check_credentials()
    nemesis = fault_layer(config, estate, probed, twin_specs, run_id, set(upstreams) == used)
    setup = ProbeSetup(config=config, everything=everything, estate=estate, emulator_host=emulator_host,
                       run_id=run_id, report=report, probed=probed, twin_specs=twin_specs, faults=faults,
                       mapping=mapping, run_identity=access.identity(config.target, all_loopback), push_url=push_url,
                       nemesis=nemesis)

    # Spark's JVM is launched (fork + exec) before this process opens any gRPC channel: launched
    # while gRPC's threads ran, it failed now and then ("Java gateway process exited").
    session = spark or spark_session(config.master, log_dir=report)
    link = netem.start_link(nemesis, upstreams)  # packet faults (netem entries): None without
    try:
        listeners = endpoints.Listeners(upstreams, nemesis, dial=link.dial if link else None).start()
    except BaseException:
        netem.close_link(link)
        raise
    if receiver is not None:
        receiver.start()
    try:
        observations: list[str] = list(caveats(everything.source))  # what the declared side leaves open
        return _probe(setup, session, listeners, receiver, observations, evidence_at)
    finally:
        if nemesis is not None:
            nemesis.stop()
        listeners.stop()
        netem.close_link(link)  # the namespace and its relays: nothing left, also when interrupted
        if receiver is not None:
            receiver.stop()


def fault_layer(config: RunConfig, estate, probed, twin_specs, run_id: str, observable: bool):
    """The fault layer's `Nemesis` for `--nemesis FILE` (None without): its entries must name probed
    subscriptions (or their dead-letter drains) and topics, and every endpoint of the run must pass a
    loopback listener (the layer is the listeners)."""
    from pubsubguard.validation.nemesis import Nemesis, ScheduleError, load_schedule

    if config.nemesis is None:
        return None
    schedule = load_schedule(config.nemesis)
    if not observable:
        raise ScheduleError(f"--nemesis {config.nemesis}: the fault layer runs in the probe's loopback listeners and "
                            "an endpoint of this run has none (validation/upstream.py layer_upstreams)")
    packets, support = netem.probe_support()  # packet faults (netem entries): root, iproute2, the kernel's
    netem.refuse_unsupported(schedule, packets, support)
    print(f"verify: {netem.availability_line(packets, support)}")
    topics = {estate.topics[estate.subscriptions[name].topic].path: estate.subscriptions[name].topic for name in probed}
    schedule.check_names({t.declared_name for t in twin_specs}, set(topics.values()))
    return Nemesis(schedule, twins={t.path: t.declared_name for t in twin_specs}, topics=topics,
                   seed=schedule.seed or run_id, deadlines={t.path: t.ack_deadline_s for t in twin_specs},
                   skew_s=config.skew_us / 1e6, packet_faults=netem.availability_line(packets, support),
                   packet_support=support)


def push_receiver(config: RunConfig):
    """(the probe's push receiver, bound but not started; the URL push twins push to) or (None, None):
    on the emulator a loopback receiver it reaches directly, on Google Cloud the `--push-receiver` URL
    that forwards to the receiver's loopback port `--push-port`."""
    from pubsubguard.core.emulator import PushReceiver

    url = config.push_receiver
    if config.target == "emulator":
        receiver = PushReceiver(0, keep=1)
        return receiver, f"http://{receiver.host}"
    if url:
        try:
            return PushReceiver(config.push_port, keep=1), url
        except OSError as err:
            raise VerifyError(f"--push-port {config.push_port}: cannot listen on loopback: {err.strerror}") from None
    return None, None


def run_endpoints(estate, probed: list[str], twin_specs) -> set[str]:
    """Every endpoint the run's clients use: the probed topics' publisher endpoints, the twins' consumer
    endpoints and the global one (admin calls; the misroute fault)."""
    topics = {estate.subscriptions[name].topic for name in probed}
    return ({estate.topics[name].publisher_endpoint for name in topics} | {t.consumer_endpoint for t in twin_specs}
            | {facts.GLOBAL_ENDPOINT})


def endpoint_record(estate, probed: list[str], twin_specs, mapping: dict, listeners) -> dict:
    """run.json `parameters.endpoints`: what each declared topic/subscription must use, what the
    endpoints map to, which were observed (the traffic is added when the run ends)."""
    topics = sorted({estate.subscriptions[name].topic for name in probed})
    return {
        "mapping": mapping,
        "dialled": {**mapping, **listeners.mapping},
        "observed": bool(listeners.listeners),
        "observed_endpoints": sorted(listeners.listeners),
        "declared": {
            "topics": {name: {"path": estate.topics[name].path, "endpoint": estate.topics[name].publisher_endpoint}
                       for name in topics},
            "subscriptions": {
                name: {"endpoint": estate.subscriptions[name].consumer_endpoint,
                       "twins": [t.path for t in twin_specs if t.declared_name == name]}
                for name in probed if estate.subscriptions[name].delivery != PUSH  # pushed: no consumer client
            },
        },
        "traffic": [],
    }


def _probe(setup: ProbeSetup, session, listeners, receiver, observations: list[str], evidence_at=None):
    config, everything, estate, run_id = setup.config, setup.everything, setup.estate, setup.run_id
    probed, twin_specs, run_identity = setup.probed, setup.twin_specs, setup.run_identity
    dialled = {**setup.mapping, **listeners.mapping}
    publisher = endpoints.publisher_client(facts.GLOBAL_ENDPOINT, dialled, "driver:admin")
    subscriber = endpoints.subscriber_client(facts.GLOBAL_ENDPOINT, dialled, "driver:admin")
    unobserved = sorted(run_endpoints(estate, probed, twin_specs) - set(listeners.listeners))
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

    evidence_dir = fresh_evidence_dir(setup.report, evidence_at)
    tested = {name: not_probed(t, setup.push_url) for name, t in estate.subscriptions.items() if not_probed(t, setup.push_url)}
    parameters = {
        "stack": estate.stack, "project": estate.project, "faults": setup.faults.as_dict(), "keys": config.keys,
        "messages_per_key": config.messages_per_key, "subscribers": config.subscribers,
        "drain_timeout_s": config.drain_timeout, "fault_deadline_s": config.fault_deadline, "skew_us": config.skew_us, "master": session.sparkContext.master,
        "twins": {t.path: t.declared_name for t in twin_specs}, "config_drift": drift, "observations": observations,
        "identity": run_identity, "endpoints": endpoint_record(estate, probed, twin_specs, setup.mapping, listeners),
        "iam": [a.as_dict() for a in permissions],
        "declared_source": everything.source,  # what drift and the guarantees were judged against
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
                scenarios = Conformance(config.target, estate, setup.emulator_host, setup.report)
            twins.create()
            parameters["twins_created_us"] = time.time_ns() // 1000
            parameters["twins_seek"] = twins.seeks  # each twin seeked to the run's start (repeatable rehearsals)
            observations.extend(twins.unseeked())
            driver = ProbeDriver(session, setup, evidence_dir, stop_file, observations, dialled, receiver)
            try:
                driver.run()
            finally:
                parameters["drain"] = driver.drain
            if scenarios is not None:
                parameters["conformance"] = scenarios.result()
                scenarios = None
            ended = True
        finally:
            if scenarios is not None:  # the probe failed or was interrupted: end them, delete their resources
                scenarios.stop()
            stop_file.set()
            session.sparkContext.cancelAllJobs()
            for ready in storage.names(evidence_dir, READY_PREFIX):
                storage.delete(storage.join(evidence_dir, ready))
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
            try:  # last: what the run recorded, fixed (pubsubguard.validation.seal)
                seal.seal(evidence_dir, run_id)
            except Exception as err:  # noqa: BLE001 - never instead of the run's own error: the check says unsealed
                print(f"verify: the evidence could not be sealed ({type(err).__name__}: {err}); it is judged as "
                      "unsealed", file=sys.stderr)
            stop_file.clear()
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


class Conformance:
    """The conformance scenarios on the probe's target, started before the probe and run beside it, each on
    its own throwaway topic and subscription (they never touch the estate or the twins): the drain's wait
    for deadlines covers theirs. `result()` waits for them and writes `<report>/conformance.json`; it
    returns what the report needs of them (run id, summary, each scenario's id, behaviour, result,
    detail). `stop()` (interrupted run) ends them at their next call and deletes what they created."""

    def __init__(self, target: str, estate, emulator_host, report: Path):
        from pubsubguard.validation import conformance

        self.report = report
        self.doc: dict | None = None
        self.error: BaseException | None = None
        self.halt = threading.Event()
        endpoint = emulator_host if target == "emulator" else None
        print(f"verify: conformance scenarios on {target}{f' {endpoint}' if endpoint else ''}, started "
              "before the probe and run beside it on their own throwaway resources", flush=True)

        def run() -> None:
            try:
                self.doc = conformance.conform(target, estate.project, endpoint=endpoint,
                                               project_number=getattr(estate, "project_number", None), stop=self.halt)
            except BaseException as err:  # noqa: BLE001 - raised in result()
                self.error = err

        self.thread = threading.Thread(target=run, name="conformance", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.halt.set()
        self.thread.join(timeout=60)

    def result(self) -> dict:
        import json

        self.thread.join()
        if self.error is not None:
            raise VerifyError(f"conformance scenarios failed: {type(self.error).__name__}: {self.error}")
        doc = self.doc
        self.report.mkdir(parents=True, exist_ok=True)
        (self.report / "conformance.json").write_text(json.dumps(doc, indent=2) + "\n")
        return {"run_id": doc["run_id"], "started": doc["started"], "duration_s": doc["duration_s"],
                "summary": doc["summary"], "file": "conformance.json",
                "scenarios": [{k: item[k] for k in ("id", "behaviour", "source", "result", "detail")}
                              for item in doc["scenarios"]]}


def filter_canary(publisher, subscriber, project: str, run_id: str) -> str | None:
    """Does the target enforce subscription filters? Isolation rests on them; try on a private topic."""
    topic = f"projects/{project}/topics/pubsubguard-canary-{run_id[:8]}"
    subs = {
        "probe": (f"projects/{project}/subscriptions/pubsubguard-canary-probe-{run_id[:8]}", probe_contract.probe_filter(run_id)),
        "production": (f"projects/{project}/subscriptions/pubsubguard-canary-prod-{run_id[:8]}", probe_contract.PROBE_EXCLUSION_FILTER),
    }
    created = []
    try:
        publisher.create_topic(name=topic, timeout=30)
        created.append(("topic", topic))
        for path, filter_ in subs.values():
            subscriber.create_subscription(request={"name": path, "topic": topic, "filter": filter_}, timeout=30)
            created.append(("sub", path))
        publisher.publish(topic, b"canary", **{probe_contract.PROBE_ATTRIBUTE: run_id}).result(timeout=30)
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


class Rehearsal:
    """The checks and the report, run once on the evidence flushed so far while the drain waits out
    deadlines, and thrown away: the JVM compiles the checks' queries and the plots' code is loaded then,
    so the real run after the drain takes a third of the time (measured: 18 s cold, 7 s warm on the main
    job's evidence). Its Spark jobs run in a job group of their own, on a task slot the subscriber tasks
    leave free (none free: no rehearsal), and are cancelled when the drain ends; its result is never
    shown or kept."""

    def __init__(self, spark, evidence_dir: Path | str, run_id: str):
        self.spark, self.evidence_dir = spark, evidence_dir
        self.group = f"pubsubguard-rehearsal-{run_id}"
        self.thread: threading.Thread | None = None
        self._possible: bool | None = None

    def possible(self) -> bool:
        """Spark reads the evidence where it is (a URI its Hadoop has no connector for is copied, or read
        through the driver, for the real checks: rehearsing would move it twice)."""
        if self._possible is None:
            self._possible = storage.hadoop_can_read(self.spark, self.evidence_dir)
        return self._possible

    def start(self) -> None:
        def rehearse() -> None:
            from pubsubguard.validation import document
            from pubsubguard.validation import report as reporting

            self.spark.sparkContext.setJobGroup(self.group, "pubsubguard: checks rehearsed during the drain")
            try:
                reporting.render_html(document.of_evidence(self.spark, self.evidence_dir, keep_sorted_input=False))
            except Exception:  # noqa: BLE001 - a warm-up: cancelled, or it fails again (and is reported) for real
                pass

        self.thread = threading.Thread(target=rehearse, name="rehearsal", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        if self.thread is None:
            return
        self.spark.sparkContext.cancelJobGroup(self.group)
        self.thread.join(timeout=60)  # matplotlib's pyplot is not thread-safe: the real report waits for it


class ProbeDriver:
    """Runs the publisher job and the subscriber jobs concurrently and drains until settled or timeout."""

    def __init__(self, spark, setup: ProbeSetup, evidence_dir: Path | str, stop_file: storage.Marker,
                 observations: list[str], dialled: dict[str, str], receiver=None):
        config, estate, faults, run_id = setup.config, setup.estate, setup.faults, setup.run_id
        emulator_host, twin_specs, probed = setup.emulator_host, setup.twin_specs, setup.probed
        self.nemesis = setup.nemesis
        self.spark = spark
        self.sc = spark.sparkContext
        self.config = config
        self.estate = estate
        self.faults = faults
        self.run_id = run_id
        self.evidence_dir = evidence_dir
        self.stop_file = stop_file
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
             "consumer_endpoint": t.consumer_endpoint, "dead_lettering": t.declared_name in dead_lettering}
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
        self.crashes = 0
        self.task_counter = 0
        self.lock = threading.Lock()
        self.threads: list[threading.Thread] = []
        self.drain = {"ended": "not_reached", "unsettled": {}}  # how the drain ended (report parameters)
        # Publisher tasks take the slots the subscriber tasks leave (at least one); each waits until every
        # subscriber task that has a slot beside them is reading, so no message waits for a reader to start.
        slots = self.sc.defaultParallelism
        self.publish_partitions = max(1, min(len(self.keys), slots - config.subscribers))
        self.ready_subscribers = max(1, min(config.subscribers, slots - self.publish_partitions))
        if self.ready_subscribers < config.subscribers:
            observations.append(
                f"only {self.ready_subscribers} of {config.subscribers} subscriber tasks could read before the first "
                f"publish (Spark master {self.sc.master} has {slots} task slots, {self.publish_partitions} taken by "
                "the publisher): deliveries to the others include their start-up in the latency")

    # -- jobs ------------------------------------------------------------------------------
    def _publish_job(self) -> None:
        from functools import partial

        from pubsubguard.validation.probe import publish_partition

        spec = {**self.base, "topics": self.topics, "messages_per_key": self.config.messages_per_key,
                "poison": {k: [list(p) for p in v] for k, v in self.poison.items()}, "misroute": self.faults.misroute,
                "ready_timeout_s": READY_TIMEOUT_S, "ready_subscribers": self.ready_subscribers}
        try:
            self.sc.setJobGroup(self.publish_group, "pubsubguard probe: publish")
            self.sc.parallelize(self.keys, self.publish_partitions).mapPartitions(
                partial(publish_partition, spec)).collect()
        except BaseException as err:  # noqa: BLE001
            if not self.stop_file.is_set():
                self.errors.append(err)
        finally:
            self.publish_done.set()

    def _subscriber_spec(self, crash_after: int | None) -> dict:
        with self.lock:
            task_id = f"sub-{self.task_counter}"
            self.task_counter += 1
        total = self.config.keys * self.config.messages_per_key * len(self.probed)
        return {**self.base, "task_id": task_id, "twins": self.twins, "twin_to_declared": self.twin_to_declared,
                "faults": self.faults.as_dict(), "stop_file": self.stop_file.location, "crash_after": crash_after,
                "end_time": time.time() + 600 + self.config.drain_timeout, "crash_hold": 3,
                "crash_prefetch": CRASH_PREFETCH, "expire_margin_s": EXPIRE_MARGIN_S, "expected": total}

    def _subscriber_job(self, spec: dict) -> None:
        from functools import partial

        from pubsubguard.validation.probe import subscribe_partition

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
            replacement = self._subscriber_spec(None)
            self.observations.append(f"subscriber task {replacement['task_id']} started to replace {spec['task_id']}")
            self._start(self._subscriber_job, replacement)

    def _start_push(self) -> None:
        """The push twins' subscriber answers the receiver's pushes from now on (pubsubguard.validation.push)."""
        from pubsubguard.validation.push import PushSubscriber

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

    def _free_slot(self) -> bool:
        """A task slot the subscriber tasks (and the publisher, once done) leave free."""
        tracker = self.sc.statusTracker()
        running = sum(stage.numActiveTasks for stage in (tracker.getStageInfo(s) for s in tracker.getActiveStageIds())
                      if stage is not None)
        return running < self.sc.defaultParallelism

    def _late_acks_within_s(self) -> float:
        """How long after the last publish every late ack of the expire fault has been sent and flushed: a
        delivery is held only within one (fault) deadline of its publish (pubsubguard.validation.probe), for that
        deadline + the expire margin. 0 without the expire fault."""
        if not self.faults.expire:
            return 0.0
        return 2 * longest_hold_s(self.twin_specs, self.config.fault_deadline) + EXPIRE_MARGIN_S + FLUSH_S + 1.0

    def _planted_due(self) -> float:
        """The fault layer may still owe a planted effect until then (a lied ack's redelivery): monotonic time."""
        return self.nemesis.quiet_after if self.nemesis is not None else 0.0

    def _dead_lettering(self) -> set[str]:
        """The probed subscriptions with a dead-letter policy (their poison messages are nacked on every delivery)."""
        return {t["declared_name"] for t in self.twins + self.push_twins if t.get("dead_lettering")}

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
        if self.nemesis is not None:
            self.nemesis.start()  # the clock of the schedule's time selectors
        self._start(self._publish_job)
        self._wait_for_publisher_slot()
        for index in range(self.config.subscribers):
            spec = self._subscriber_spec(crash_after if index < self.faults.crash else None)
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
        tally = EvidenceTally(self.evidence_dir, topic_of, self.run_id,
                              {name: declared[name]["retry_max_backoff_s"] or 0.0 for name in self.probed})
        published_target = len(self.keys) * self.config.messages_per_key * len(self.topics)
        rehearsal = Rehearsal(self.spark, self.evidence_dir, self.run_id)
        try:
            self._drain(tally, deadline_us, published_target, rehearsal)
        finally:
            rehearsal.stop()
        self.stop_file.set()
        for thread in list(self.threads):
            thread.join(timeout=30)

    def _drain(self, tally: EvidenceTally, deadline_us: dict, published_target: int, rehearsal: Rehearsal) -> None:
        with progress_bars(not self.config.no_progress) as progress:
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
                        drain_deadline = time.monotonic() + self.config.drain_timeout
                        late_acks_done = time.monotonic() + self._late_acks_within_s()
                        rehearse_at = time.monotonic() + REHEARSAL_AFTER_S
                    if rehearsal.thread is None and time.monotonic() >= rehearse_at and rehearsal.possible() and self._free_slot():
                        rehearsal.start()
                    if tally.done() >= expected:
                        # every message settled; deliveries the expire fault holds may still await their late ack
                        if time.monotonic() >= min(max(late_acks_done, self._planted_due()), drain_deadline):
                            self.drain = {"ended": "settled", "unsettled": {}}
                            break
                        continue
                    unsettled = tally.unsettled()
                    stuck = tally.stuck(time.time_ns() // 1000, int(STUCK_GRACE_S * 1e6), deadline_us)
                    if stuck == unsettled and time.monotonic() >= self._planted_due():
                        per_sub = self._unsettled_text(tally, stuck)
                        self.drain = {"ended": "stuck", "unsettled": stuck,
                                      "unsettled_poison": tally.unsettled_poison(self._dead_lettering())}
                        self.observations.append(
                            f"drain ended: {expected - tally.done()} of {expected} published messages not settled "
                            f"(acked with success or dead-lettered) and provably stuck -- no delivery, ack or "
                            f"dead-letter for one ack deadline (+ retry backoff after a nack) + {STUCK_GRACE_S:.0f}s "
                            f"since their last recorded event -- per subscription (and how their latest delivery "
                            f"ended): {per_sub}")
                        break
                    if time.monotonic() > drain_deadline:
                        self.drain = {"ended": "timeout", "unsettled": unsettled,
                                      "unsettled_poison": tally.unsettled_poison(self._dead_lettering())}
                        per_sub = self._unsettled_text(tally, unsettled)
                        self.observations.append(
                            f"drain timeout ({self.config.drain_timeout:.0f}s) passed with {expected - tally.done()} of "
                            f"{expected} published messages not settled (acked with success or dead-lettered) per "
                            f"subscription (and how their latest delivery ended): {per_sub}")
                        break

