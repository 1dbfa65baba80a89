"""A probe run's setup: what `driver.probe_target` resolves before anything is created on the target.

`resolve(config)` decides the declared estate, the target, the subscriptions probed and their twins, the
drain timeout, the endpoint map and its observable upstreams, the fault layer (`--nemesis`) and the push
receiver, into a frozen `ProbeSetup`; `fresh_evidence_dir` empties the report's evidence directory of a
previous run; `endpoint_record` is what run.json records of the endpoints. The drain's timing rules
(`default_drain_timeout`, `held_deadline_s`, `longest_hold_s`) are decided here and read by the driver.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from pathlib import Path

from pubsubguard.core import storage
from pubsubguard.core.declared import PUSH
from pubsubguard.core.errors import VerifyError
from pubsubguard.policies import pubsub_facts as facts

from .config import DEFAULT_FAULT_DEADLINE_S, DRAIN_SLACK_S, EXPIRE_MARGIN_S, RunConfig
from .evidence import locks
from .probe import access
from .probe.twins import not_probed, plan_twins
from .target import declared_estate, resolve_target
from .wire import endpoints, netem, upstream


def _positive(name: str, value: float) -> None:
    if value <= 0:
        raise VerifyError(f"{name}: expected a positive number, got {value}")


def held_deadline_s(twin, fault_deadline_s: float | None) -> float:
    """How long a delivery the faults hold stays out: the fault deadline (set by ModifyAckDeadline, see
    `pubsubguard.validation.probe.clients`), never more than the twin's own; a push twin's own (a push has no ack id to modify)."""
    if twin.push_endpoint or not fault_deadline_s:
        return twin.ack_deadline_s
    return min(twin.ack_deadline_s, fault_deadline_s)


def default_drain_timeout(twin_specs, fault_deadline_s: float | None = DEFAULT_FAULT_DEADLINE_S) -> float:
    """What a target keeping the documented semantics needs to settle every message under the faults, plus
    slack (the base of the drain's ceiling, `validation/probe/drain_clock.py`, to which the time the measured rate needs
    for the backlog is added): the longest time a held delivery stays out (`held_deadline_s`) + the expire margin + the longest
    retry backoff (a nack's redelivery) + DRAIN_SLACK_S (dead-lettering's repeated attempts, scheduling).
    A target that keeps a message longer (e.g. until the subscription's own deadline after rejecting its
    ack) leaves it unsettled at the drain's end: `inconclusive`, with the reason in the observations."""
    backoff = max((t.retry_max_backoff_s or 0.0 for t in twin_specs if not t.is_dead_letter_drain), default=0.0)
    return longest_hold_s(twin_specs, fault_deadline_s) + EXPIRE_MARGIN_S + backoff + DRAIN_SLACK_S


def longest_hold_s(twin_specs, fault_deadline_s: float | None) -> float:
    """The longest a delivery the faults hold stays out, over the probed twins (`held_deadline_s`)."""
    return max((held_deadline_s(t, fault_deadline_s) for t in twin_specs if not t.is_dead_letter_drain),
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
    subscriptions probed and their twins, the endpoint map (and the upstreams of the listeners that observe
    them) and the run's identity."""

    config: RunConfig
    everything: object  # pubsubguard.core.declared.Estate
    estate: object
    emulator_host: str | None
    run_id: str
    report: Path
    probed: tuple[str, ...]
    twin_specs: tuple
    mapping: dict
    run_identity: str
    push_url: str | None
    drain_base_s: float = 0.0  # the faults' own timing (`default_drain_timeout`): the drain ceiling's base
    nemesis: object = None  # pubsubguard.validation.wire.nemesis.Nemesis: the fault layer's schedule (None: none)
    upstreams: dict = field(default_factory=dict)  # observable endpoint -> the host its listener forwards to


def resolve(config: RunConfig, plan: dict | None = None, run_id: str | None = None,
            lock: bool = True, command: str = "verify") -> tuple[ProbeSetup, object]:
    """What a probe run is about, decided before anything is created on the target: (`ProbeSetup`, the push
    receiver bound but not started, or None). Takes the run's report directory (`locks.acquire`, released by
    the caller's `locks.scope`). `plan`: the plan or state the command already read for `config`
    (`target.declared_estate`; None: read here). `run_id`: the run's id (`pubsubguard watch` resuming: the
    one its checkpoint names; None: a new one); `lock` False: the caller holds its own directory's lock;
    `command`: the name its lines go under."""
    for name in ("keys", "messages_per_key", "subscribers", "drain_timeout"):
        if getattr(config, name) is not None:
            _positive(f"--{name.replace('_', '-')}", getattr(config, name))
    everything, estate = declared_estate(config, plan)
    emulator_host = resolve_target(config, estate)
    run_id = run_id or uuid.uuid4().hex
    report = report_dir(config, estate.stack)
    if lock:
        locks.acquire(report, "--report")  # one run per report directory (released by the caller's locks.scope)
    receiver, push_url = push_receiver(config)
    probed = tuple(name for name, t in estate.subscriptions.items() if not_probed(t, push_url) is None)
    if not probed:
        raise VerifyError(f"stack {estate.stack!r}: no pull or push subscription to probe (export ones are not probed)")
    twin_specs = tuple(plan_twins(estate, run_id, push_url))
    mapping = config.endpoint
    used = run_endpoints(estate, probed, twin_specs)
    upstreams = endpoints.observable_upstreams(used, mapping, emulator_host)
    if config.nemesis is not None:  # the fault layer: every endpoint through a listener (TLS onward to Google)
        upstreams = upstream.layer_upstreams(used, mapping, upstreams)
    all_loopback = all(endpoints.is_loopback(mapping.get(e) or emulator_host or e) for e in used)
    if config.target == "gcp" and not all_loopback:
        access.check_credentials()
    nemesis = fault_layer(config, estate, probed, twin_specs, run_id, set(upstreams) == used, command)
    setup = ProbeSetup(config=config, everything=everything, estate=estate, emulator_host=emulator_host,
                       drain_base_s=default_drain_timeout(twin_specs, config.fault_deadline),
                       run_id=run_id, report=report, probed=probed, twin_specs=twin_specs,
                       mapping=mapping, run_identity=access.identity(config.target, all_loopback), push_url=push_url,
                       nemesis=nemesis, upstreams=upstreams)
    return setup, receiver


def fault_layer(config: RunConfig, estate, probed, twin_specs, run_id: str, observable: bool,
                command: str = "verify"):
    """The fault layer's `Nemesis` for `--nemesis FILE` (None without): its entries must name probed
    subscriptions (or their dead-letter drains) and topics, and every endpoint of the run must pass a
    loopback listener (the layer is the listeners)."""
    from .wire.nemesis import Nemesis
    from .wire.schedule import ScheduleError

    schedule = config.nemesis
    if schedule is None:
        return None
    if not observable:
        raise ScheduleError(f"--nemesis {schedule.source}: the fault layer runs in the probe's loopback listeners and "
                            "an endpoint of this run has none (validation/wire/upstream.py layer_upstreams)")
    packets, support = netem.probe_support()  # packet faults (netem entries): root, iproute2, the kernel's
    netem.refuse_unsupported(schedule, packets, support)
    print(f"{command}: {netem.availability_line(packets, support)}")
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
    from pubsubguard.core.push_receiver import PushReceiver

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
                for name in probed if estate.subscriptions[name].delivery_type != PUSH  # pushed: no consumer client
            },
        },
        "traffic": [],
    }
