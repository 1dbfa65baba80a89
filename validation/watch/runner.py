"""`pubsubguard watch`'s run: the probe kept running, the streaming checks beside it, until it is stopped.

`watch(options)` resolves the run as verify does (`run_setup.resolve`: the estate, the target, the twins, the
endpoint map, the fault layer), with the run id its `--out` directory remembers; starts the metrics server,
the streaming query (`stream.start`, resuming from the checkpoint), the twins (adopting those a crashed watch
left, with what they hold) and the probe (`WatchDriver`: the publisher job at `--rate` from a reserved block
of seqs, the subscriber jobs). Every window the driver writes a clock row (the watermark moves on when nothing
else is written), keeps the evidence to `--keep` seconds and samples the footprint once a minute.

A stop (SIGINT, SIGTERM, `--duration`) ends the publisher first, then waits until the watermark passed the last
publish plus the longest horizon, so every message it published is decided; then the subscribers, the query
and the twins go, and the last window's line is said again. A second signal skips the wait (what was not
decided is said). Exit code: 1 when a window of this run found an error, else 0.

The target is checked every tick, running and stopping (`reachable.TargetCheck`): once it has not answered for
`reachable.GONE_AFTER_S` the watch stops as it does on a signal, without the wait, and ends with exit 2 in one
line naming the target. While the target does not answer, or after a second signal, every step of the stop is
short: the tasks are given `QUICK_STOP_S` to end by themselves, then cancelled, and the twins' deletes are retried
that long at most.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pyarrow as pa

from pubsubguard.core import storage
from pubsubguard.core.errors import UserError
from pubsubguard.core.state import caveats
from pubsubguard.policies import pubsub_facts as facts

from .. import footprint, run_setup
from ..checks import run as batch
from ..checks.wording import counted
from ..config import RunConfig
from ..driver import ProbeDriver, twins_of_task
from ..evidence import locks, records
from ..probe.clients import PUBLISHING_PREFIX, READY_PREFIX
from ..probe.twins import DELETE_PATIENCE_S, Twins, not_probed
from ..session import spark_session
from ..target import checked
from ..wire import endpoints, netem
from ..wire.listeners import Listeners
from . import DEFAULT_KEEP_S, DEFAULT_RATE, DEFAULT_WINDOW_S, horizon, judge, outdir, report, stream
from .conformance import FindingCauses, WatchConformance, stalls_after
from .metrics import WatchMetrics
from .reachable import GONE_AFTER_S, REMOTE_GONE_AFTER_S, TargetCheck, TargetGone
from .sink import WindowSink, print_line

SUBSCRIBER_YEARS_S = 10 * 365 * 86400.0  # a watch's subscriber task runs until the stop flag
# A stop gives the probe's tasks STOP_WAIT_S in all to end by themselves (their last evidence written), a conformance
# run CONFORMANCE_WAIT_S, and retries a twin's delete for twins.DELETE_PATIENCE_S; when the target does not answer or a
# second signal came, QUICK_STOP_S each. Tasks still going then are cancelled, and end within CANCELLED_WAIT_S (Spark
# ends their Python workers).
STOP_WAIT_S = 30.0
CONFORMANCE_WAIT_S = 90.0
QUICK_STOP_S = 3.0
CANCELLED_WAIT_S = 10.0


@dataclass(frozen=True)
class WatchOptions:
    """What `pubsubguard watch` was asked, parsed once (pubsubguard/commands/watch.py)."""

    run: RunConfig  # the probe's options as verify reads them (target, endpoint, faults, nemesis, master, keys)
    out: Path
    rate: float = DEFAULT_RATE
    window_s: float = DEFAULT_WINDOW_S
    horizon_s: float | None = None
    keep_s: float = DEFAULT_KEEP_S
    metrics_port: int = 9464
    duration_s: float | None = None
    plan: dict | None = None
    no_progress: bool = False
    conform_every_s: float | None = 3600.0  # the conformance scenarios at start, then this often; 0: never


class Stop:
    """SIGINT/SIGTERM and --duration as a flag the main loop polls; a signal once the stop began (a second signal,
    or the first after --duration ended the run) asks to hurry."""

    def __init__(self, duration_s: float | None):
        self.event, self.hurry = threading.Event(), threading.Event()
        self.duration_s, self.deadline = duration_s, None
        self.why = ""
        self.saved = {}

    def begin(self) -> None:
        """--duration counts from now: the probe's start (the twins, the query and the scenarios' first run
        before it are not the run the user asked to last that long)."""
        self.deadline = time.monotonic() + self.duration_s if self.duration_s else None

    def __enter__(self) -> "Stop":
        def handler(signum, _frame):
            if self.event.is_set():
                self.hurry.set()
            self.why = self.why or signal.Signals(signum).name
            self.event.set()

        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self.saved[sig] = signal.signal(sig, handler)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self.saved.items():
            signal.signal(sig, handler)

    def asked(self) -> bool:
        if self.deadline is not None and time.monotonic() >= self.deadline and not self.event.is_set():
            self.why = "--duration"
            self.event.set()
        return self.event.is_set()


class WatchDriver(ProbeDriver):
    """The verify probe's driver, kept running: the same publisher and subscriber tasks (a crashed subscriber
    task is replaced as in verify), the publisher from a reserved seq block at a steady rate until its own
    stop flag, the subscribers until the run's."""

    subscriber_max_s = SUBSCRIBER_YEARS_S

    def __init__(self, *args, seq_start: int, publish_stop: storage.Marker, **kwargs):
        super().__init__(*args, **kwargs)
        self.seq_start, self.publish_stop = seq_start, publish_stop
        self.subscribe_group = f"pubsubguard-watch-subscribe-{self.run_id}"  # the subscriber jobs' Spark job group
        self.publish_partitions = 1  # a canary: one steady publisher
        self.ready_subscribers = max(1, min(self.config.subscribers, self.sc.defaultParallelism - 1))

    def _publish_job(self) -> None:
        from functools import partial

        from ..probe.publisher import publish_partition

        spec = {**self.base, "topics": self.topics, "messages_per_key": outdir.SEQ_BLOCK, "seq_start": self.seq_start,
                "stop_file": self.publish_stop.location, "poison": {}, "misroute": self.faults.misroute,
                "ready_timeout_s": 60.0, "ready_subscribers": self.ready_subscribers,
                "rate": self.config.rate * len(self.topics)}  # --rate is per topic
        try:
            self.sc.setJobGroup(self.publish_group, "pubsubguard watch: publish")
            self.publish_summary = self.sc.parallelize(self.keys, 1).mapPartitions(partial(publish_partition, spec)).collect()
        except BaseException as err:  # noqa: BLE001
            if not (self.stop_file.is_set() or self.publish_stop.is_set()):
                self.errors.append(err)
        finally:
            self.publish_done.set()

    def _subscriber_job(self, spec) -> None:
        self.sc.setJobGroup(self.subscribe_group, f"pubsubguard watch: {spec.task_id}")  # cancelled by `stop`
        super()._subscriber_job(spec)

    def start(self) -> None:
        self._start_push()
        self._start(self._publish_job)
        self._wait_for_publisher_slot()
        for index in range(self.config.subscribers):
            self._start(self._subscriber_job, self._subscriber_spec(None, twins_of_task(self.twins, index,
                                                                                        self.config.subscribers)))

    def stop(self, wait_s: float = STOP_WAIT_S) -> None:
        """The publisher and the subscriber tasks told to end; they end by themselves, their last evidence written.
        Those still going after `wait_s` in all are cancelled (Spark ends their Python workers): with the target
        gone a task waits minutes on its client's retries (the publisher on every publish still unanswered)."""
        self.publish_stop.set()
        self.stop_file.set()
        deadline = time.monotonic() + wait_s
        for thread in list(self.threads):
            thread.join(timeout=max(0.0, deadline - time.monotonic()))
        if any(thread.is_alive() for thread in self.threads):
            for group in (self.publish_group, self.subscribe_group):
                self.sc.cancelJobGroup(group)
            deadline = time.monotonic() + CANCELLED_WAIT_S
            for thread in list(self.threads):
                thread.join(timeout=max(0.0, deadline - time.monotonic()))
        if self.push is not None:
            self.receiver.answer = None
            self.push.close()


@dataclass
class Footprints:
    """The watch's footprint once a minute (report.json `footprint`): memory, threads, open files, checkpoint."""

    out: Path
    samples: list = field(default_factory=list)
    last: float = 0.0

    def sample(self, query) -> None:
        now = time.time()
        if now - self.last < 60 and self.samples:
            return
        self.last = now
        progress = query.lastProgress or {}
        self.samples.append({
            "at": datetime.fromtimestamp(now).isoformat(timespec="seconds"), **footprint.sample(),
            "children_rss_mib": round(_children_rss() / 2**20, 1),  # Spark's JVM and its Python workers
            "checkpoint_mib": round(_size(self.out / "checkpoint") / 2**20, 2),
            "evidence_mib": round(_size(self.out / "evidence") / 2**20, 2),
            "state_rows": sum(op.get("numRowsTotal", 0) for op in progress.get("stateOperators", [])),
            "state_mib": round(sum(op.get("memoryUsedBytes", 0) for op in progress.get("stateOperators", [])) / 2**20, 2),
        })
        self.samples = self.samples[-24 * 60:]


def _children_rss() -> int:
    """Resident bytes of this process's descendants (from /proc; 0 where there is none)."""
    parent: dict[int, int] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            parent[int(entry)] = int(fields[1])
            rss[int(entry)] = int(fields[21]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            continue
    mine, frontier = set(), {os.getpid()}
    while frontier:
        frontier = {pid for pid, ppid in parent.items() if ppid in frontier and pid not in mine}
        mine |= frontier
    return sum(rss[pid] for pid in mine)


def _size(path: Path) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def prune_evidence(evidence: Path, keep_s: float) -> int:
    """Part files older than `keep_s` (the query read them windows ago) removed; how many."""
    cutoff = time.time() - keep_s
    removed = 0
    for part in ("publishes", "deliveries", "clock"):
        for entry in os.scandir(evidence / part) if (evidence / part).exists() else ():
            if entry.name.startswith("part-") and entry.stat().st_mtime < cutoff:
                os.unlink(entry.path)
                removed += 1
    return removed


def write_clock(evidence: Path, seq: int) -> None:
    storage.write_parquet(pa.table({"t": pa.array([time.time_ns() // 1000], pa.int64())}),
                          evidence / "clock" / f"part-clock-{os.getpid()}-{seq:08d}.parquet")


def watch(options: WatchOptions) -> int:
    config = options.run
    from ..target import declared_estate

    _, estate = declared_estate(config, options.plan)
    directory = outdir.WatchDir.open(options.out, estate.stack, estate.project)
    locks.acquire(directory.path, "--out")
    with locks.scope():
        return _watch(options, directory)


def _watch(options: WatchOptions, directory: outdir.WatchDir) -> int:
    config = options.run.but(report=directory.path)
    setup, receiver = run_setup.resolve(config, options.plan, run_id=directory.manifest.run_id, lock=False,
                                        command="watch")
    config, estate = setup.config, setup.estate
    horizons = horizon.horizons(setup.twin_specs, setup.probed, options.horizon_s)
    subscriptions = [checked(estate.subscriptions[name]) for name in setup.probed]
    topic_of = {s.name: s.topic for s in subscriptions}
    metrics = WatchMetrics(estate.stack, directory.manifest.pubsubguard,
                           {s.name: {"topic": s.topic, "ack_deadline_s": s.ack_deadline_s, "horizon_s": horizons[s.name],
                                     "guarantees": []} for s in subscriptions},
                           sorted(set(topic_of.values()))).start(options.metrics_port)
    try:
        session = spark_session(config.master, app_name="pubsubguard-watch", log_dir=directory.path)
        endpoints.calm_grpc_waits()
        link = netem.start_link(setup.nemesis, setup.upstreams)
        try:
            listeners = Listeners(setup.upstreams, setup.nemesis, dial=link.dial if link else None,
                                            streams=len(setup.twin_specs) * (config.subscribers + 1)).start()
            if receiver is not None:
                receiver.start()
            try:
                return _run(options, directory, setup, session, listeners, receiver, horizons, subscriptions,
                            topic_of, metrics)
            finally:
                if setup.nemesis is not None:
                    setup.nemesis.stop()
                listeners.stop()
                if receiver is not None:
                    receiver.stop()
        finally:
            netem.close_link(link)
    finally:
        metrics.close()


def _run(options, directory, setup, session, listeners, receiver, horizons, subscriptions, topic_of, metrics) -> int:
    """The watch itself, once its servers run: the evidence and the run's record, the scenarios, the rolling report
    and the window sink, the twins; then the ticks until a stop, the wait for the horizons, and the stop in order."""
    config, estate, run_id = setup.config, setup.estate, setup.run_id
    dialled = {**setup.mapping, **listeners.mapping}
    evidence = directory.evidence
    _begin_evidence(options, directory, setup, subscriptions, horizons)
    observations = list(caveats(setup.everything.source))
    flush_s = min(5.0, max(0.5, options.window_s / 4))
    held = config.faults.expire > 0 or config.faults.nack > 0  # a held delivery's row is written when it is let go
    hold_s = run_setup.longest_hold_s(setup.twin_specs, config.fault_deadline) if held else 0.0
    delay_s = stream.watermark_delay_s(hold_s, flush_s, options.window_s)
    footprints = Footprints(directory.path)
    planted = (lambda: setup.nemesis.as_dict().get("applied", [])) if setup.nemesis else (lambda: [])
    conformance = _conformance(options, directory, setup, subscriptions)
    causes = FindingCauses(conformance, planted, subscriptions, started_us=time.time_ns() // 1000)
    page = report.RollingReport(directory.path, estate.stack, run_id, horizons, delay_s, footprints,
                                conformance=lambda: conformance.summary() if conformance is not None else None)
    sink = WindowSink(directory.path, subscriptions, topic_of, horizons, metrics, planted=planted,
                      window_s=options.window_s, show=print_line, report=page.write, explain=causes)
    twins = Twins(run_id=run_id, specs=list(setup.twin_specs), service_agent=estate.service_agent,
                  subscriber=endpoints.subscriber_client(facts.GLOBAL_ENDPOINT, dialled, "driver:admin"),
                  consumer=lambda endpoint: endpoints.subscriber_client(endpoint, dialled, "driver:backlog"))
    alive = _target_check(setup, directory)
    directory.manifest.starts += 1
    crashed = directory.begin(unwritten_s=2 * flush_s + 10.0)
    if crashed:
        print("watch: the last watch on this --out did not stop (a crash): resuming from its checkpoint; its twins are "
              "reused with what they hold", flush=True)
    topics = sorted({s.topic for s in subscriptions})
    seq_start = directory.reserve_seqs(topics, [f"key-{i:03d}" for i in range(config.keys)])
    judge_config = judge.JudgeConfig(subscriptions=batch._config(subscriptions),
                                     horizon_us=tuple(int(horizons[s.name] * 1e6) for s in subscriptions),
                                     skew_us=config.skew_us,
                                     unrecorded=judge.unrecorded_ranges(directory.manifest.unrecorded, subscriptions),
                                     crash_windows=tuple(tuple(w) for w in directory.manifest.crash_windows))
    publish_stop = storage.Marker(evidence / "_stop_publishing")
    stop_file = storage.Marker(evidence / "_stop")
    resumed = "resumed from its checkpoint" if directory.resumed else "new"
    print(f"watch: stack {estate.stack}, {len(subscriptions)} subscriptions probed at {options.rate:g} msg/s per topic, "
          f"windows of {options.window_s:g} s, horizons {', '.join(f'{n} {h:g} s' for n, h in horizons.items())}; "
          f"metrics at {metrics.url}; {directory.path} ({resumed}; run {run_id[:8]}, seqs from {seq_start})", flush=True)
    for said in observations:
        print(f"watch: observed: {said}", flush=True)
    gone: TargetGone | None = None
    with Stop(options.duration_s) as stop:
        query = stream.start(session, evidence, directory.checkpoint, subscriptions, judge_config, delay_s,
                             options.window_s, sink)
        driver = None
        try:
            twins.create(reuse=True)
            if twins.reused:
                print(f"watch: reused {len(twins.reused)} probe twins a stopped watch left, with what they hold", flush=True)
                if crashed:  # the crashed process's streams of them ended with it, unannounced
                    causes.reset.update(spec.declared_name for spec in setup.twin_specs if spec.path in twins.reused)
            if conformance is not None:
                conformance.start(directory.manifest.conformance_run)
            driver = WatchDriver(session, setup, evidence, stop_file, observations, dialled, receiver, listeners,
                                 seq_start=seq_start, publish_stop=publish_stop)
            driver.base["flush_s"] = flush_s
            if setup.nemesis is not None:
                setup.nemesis.start()
            driver.start()
            stop.begin()
            ticks = 0
            while not stop.asked():
                _check(query, driver)
                alive.check()
                sink.progress(query.recentProgress, delay_s)
                write_clock(evidence, ticks)
                ticks += 1
                footprints.sample(query)
                prune_evidence(evidence, max(options.keep_s, 3 * options.window_s + delay_s))
                stop.event.wait(min(options.window_s, 5.0))
            print(f"watch: stopping ({stop.why}): publishing ended; deciding what was published, within the horizons",
                  flush=True)
            publish_stop.set()
            _decide_published(query, sink, evidence, max(horizons.values()) + delay_s, options.window_s, stop,
                              ticks, alive)
        except TargetGone as err:
            gone = err
            print("watch: stopping (the target stopped answering): not waiting for the horizons", flush=True)
        finally:
            quick = gone is not None or alive.failing or stop.hurry.is_set()  # nothing more comes, or asked to hurry
            if conformance is not None:
                conformance.stop(QUICK_STOP_S if quick else CONFORMANCE_WAIT_S)
            if driver is not None:
                driver.stop(QUICK_STOP_S if quick else STOP_WAIT_S)
            else:
                stop_file.set()
            _stop_query(query)
            sink.progress(query.recentProgress, delay_s)
            left = twins.delete(QUICK_STOP_S if quick else DELETE_PATIENCE_S)
            if left:
                print(f"watch: could not delete probe twins {left}; run `pubsubguard verify --cleanup`", flush=True)
            if twins.unanswered is not None and gone is None:  # gone at the stop, before the checks could tell
                alive.failed(twins.unanswered)
                gone = alive.gone()
            for marker in (publish_stop, stop_file):
                marker.clear()
            for name in storage.names(evidence, READY_PREFIX) + storage.names(evidence, PUBLISHING_PREFIX):
                storage.delete(storage.join(evidence, name))
    directory.end()
    page.write(sink, final=True)
    _say_totals(directory, sink.totals)
    if gone is not None:
        raise gone
    return 1 if sink.totals.errors else 0


def _begin_evidence(options, directory: outdir.WatchDir, setup, subscriptions, horizons) -> None:
    """The evidence folder made ready for this process: its parts, no flag a crashed watch left (stop, readiness),
    and the run's record (`RunInfo`) with the watch's parameters."""
    evidence, estate = directory.evidence, setup.estate
    for part in ("publishes", "deliveries", "clock"):
        (evidence / part).mkdir(parents=True, exist_ok=True)
    for marker in list(evidence.glob("_*")):
        marker.unlink()
    tested = {name: why for name, t in estate.subscriptions.items() if (why := not_probed(t, setup.push_url))}
    records.RunInfo(run_id=setup.run_id, target=setup.config.target, subscriptions=subscriptions,
                    parameters={"stack": estate.stack, "project": estate.project, "watch": True,
                                "horizons_s": horizons, "rate": options.rate, "window_s": options.window_s},
                    tested=tested).write(evidence)


def _conformance(options, directory: outdir.WatchDir, setup, subscriptions) -> WatchConformance | None:
    """The scenarios beside the watch (None with `--conform-every 0`); the run they are on is remembered in
    watch.json, so a restarted watch deletes what a crashed one's run made."""
    if options.conform_every_s == 0:
        return None
    config, estate = setup.config, setup.estate

    def remember(run_id: str | None) -> None:
        directory.manifest.conformance_run = run_id
        directory.save()

    return WatchConformance(config.target, estate.project, getattr(estate, "project_number", None),
                            setup.emulator_host if config.target == "emulator" else None, directory.path,
                            options.conform_every_s, frozenset(s.name for s in subscriptions if s.ordering),
                            show=lambda line: print(line, flush=True), on_run_id=remember,
                            stall_possible=bool(stalls_after(subscriptions)))


def _say_totals(directory: outdir.WatchDir, totals) -> None:
    """The last two lines: the last window again, and what the windows of this process found."""
    print(f"watch: last window: {totals.last_line or 'no window was judged'}", flush=True)
    broken = ", ".join(sorted(totals.broken))
    print(f"watch: {totals.windows} windows judged; "
          + (f"BROKEN: {broken} ({totals.errors_said()}; {directory.path / 'findings.jsonl'})" if totals.errors
             else "every decided guarantee held")
          + (f"; {counted(totals.late_rows, 'evidence row')} came behind the watermark, not judged" if totals.late_rows
             else "") + f"; report: {directory.path / 'report.html'}", flush=True)


def _target_check(setup, directory: outdir.WatchDir) -> TargetCheck:
    """The target's check: a client of its own dialling the target itself (the emulator, or what the global endpoint
    is mapped to, else Google), past the listeners and the fault layer, reading the first twin. A target on this
    machine is gone after GONE_AFTER_S unanswered; Google's endpoint after REMOTE_GONE_AFTER_S (a short outage is
    the target's behaviour, which the canary is there to see)."""
    address = setup.mapping.get(facts.GLOBAL_ENDPOINT) or setup.emulator_host or facts.GLOBAL_ENDPOINT
    where = f"the emulator at {address}" if address == setup.emulator_host else f"the target at {address}"
    client = endpoints.subscriber_client(facts.GLOBAL_ENDPOINT, {facts.GLOBAL_ENDPOINT: address}, "driver:reachable")
    return TargetCheck(client, setup.twin_specs[0].path, where,
                       kept=f"{directory.path / 'findings.jsonl'} and {directory.path / 'report.html'}",
                       gone_after_s=GONE_AFTER_S if endpoints.is_loopback(address) else REMOTE_GONE_AFTER_S)


def _check(query, driver) -> None:
    if query.exception() is not None:
        raise UserError(f"the streaming checks stopped: {str(query.exception()).splitlines()[0][:300]}")
    if driver.errors:
        err = driver.errors[0]
        raise UserError(f"the probe failed: {type(err).__name__}: {str(err).splitlines()[0][:300] if str(err) else ''}")


def _decide_published(query, sink, evidence: Path, wait_s: float, window_s: float, stop: Stop, ticks: int,
                      alive: TargetCheck) -> None:
    """Keep the clock going until the watermark passed the last publish plus the longest horizon and two more
    windows were judged, so every message published was decided (a second signal ends the wait; a target that
    stopped answering ends it with TargetGone: nothing it holds comes any more)."""
    deadline = time.monotonic() + wait_s + 4 * window_s + 60
    target_us = time.time_ns() // 1000 + int(wait_s * 1e6)
    last: int | None = None  # once the watermark passed: the window to wait for (until the deadline, moved)
    while time.monotonic() < deadline and not stop.hurry.is_set():
        if query.exception() is not None:
            return
        alive.check()
        if last is not None:
            if sink.wait_for_window(last, timeout_s=min(2.0, max(0.0, deadline - time.monotonic()))):
                return
            continue
        write_clock(evidence, ticks)
        ticks += 1
        watermark = ((query.lastProgress or {}).get("eventTime") or {}).get("watermark")
        if watermark and datetime.fromisoformat(watermark.replace("Z", "+00:00")).timestamp() * 1e6 >= target_us:
            last, deadline = sink.judged() + 2, time.monotonic() + 3 * window_s + 30
            continue
        stop.hurry.wait(min(window_s, 2.0))
    if last is not None and not stop.hurry.is_set():
        return  # the watermark passed; the two windows did not come within their own wait
    why = "a signal during the wait" if stop.hurry.is_set() else "the wait's ceiling"
    print(f"watch: stopped before every published message was decided ({why}); the next watch on this --out decides "
          "them", flush=True)


def _stop_query(query) -> None:
    """Stop the query between windows where it can (a stop in the middle of one is replayed on resume)."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (query.status or {}).get("isTriggerActive"):
        time.sleep(0.2)
    try:
        query.stop()
    except Exception:  # noqa: BLE001 - already stopped with its own error, said by _check
        pass
