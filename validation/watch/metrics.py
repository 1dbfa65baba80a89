"""The watch's metrics in Prometheus' text format, at `http://HOST:PORT/metrics` (`--metrics-port`).

`WatchMetrics` owns its registry (never prometheus-client's global one, so two in one process never collide)
and serves it from a daemon thread between `start()` and `close()`. Labels carry bounded sets only: the
declared subscriptions and topics, the findings' vocabulary, the guarantees; never a key, seq or message id.
The alerting rules that read these series are `alerts.yml` beside this file; docs/watch.md says what each
series means.

Every subscription's `pubsubguard_findings_total` series exist from the start at 0, one per finding kind of
the vocabulary (`checks.findings.FINDING_KINDS`) and severity, so that `increase()` sees the first finding
(a series that appears at 1 has no earlier sample to increase from). A kind outside the vocabulary is taken
by `finding()` (its series then starts at its first finding). A counter starts again at 0 when the watch
restarts; Prometheus reads that as a reset, and findings.jsonl is where every finding is written once.
"""

from __future__ import annotations

import errno
import threading
import time
from typing import Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from pubsubguard.core.errors import UserError
from ..checks import findings as vocabulary

DEFAULT_HOST = "127.0.0.1"
# Pub/Sub's delivery latencies (publish to delivery): milliseconds on a healthy subscription, up to the ack
# deadline (10 s .. 600 s) and beyond for a redelivery. Each subscription's declared ack deadline is added as
# a boundary, so that the p99 the latency alert compares with it is exact at the deadline (more than 1% of
# the deliveries above it, or not).
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0,
                   600.0)


class _Registry(CollectorRegistry):
    """A registry without the `_created` series prometheus-client adds beside each counter and histogram
    (their creation times: as many series again, read by no rule; a restart shows as a counter reset)."""

    def collect(self):
        for family in super().collect():
            if family.type in ("counter", "histogram"):
                family.samples = [s for s in family.samples if not s.name.endswith("_created")]
            yield family


class WatchMetrics:
    """The watch's metrics: `subscriptions` maps each probed subscription to `{"topic", "ack_deadline_s",
    "horizon_s", "guarantees"}` (the guarantees it tests), `topics` names the topics it publishes to."""

    def __init__(self, stack: str, version: str, subscriptions: dict[str, dict], topics: list[str]):
        self.subscriptions = dict(subscriptions)
        self.topics = tuple(topics)
        self.registry = _Registry(auto_describe=True)
        self._server = None
        self._thread = None
        self.host = DEFAULT_HOST
        self.port: int | None = None
        reg = self.registry
        self._findings = Counter(
            "pubsubguard_findings", "Findings decided by the watch's windows (findings.jsonl has each one).",
            ("subscription", "kind", "severity"), registry=reg)
        self._holds = Gauge(
            "pubsubguard_guarantee_holds",
            "1 when the last window's verdict says the guarantee holds, 0 when broken; absent when not tested "
            "or inconclusive.", ("subscription", "guarantee"), registry=reg)
        self._published = Counter(
            "pubsubguard_messages_published", "Probe messages published (acknowledged by Pub/Sub).", ("topic",),
            registry=reg)
        self._delivered = Counter(
            "pubsubguard_messages_delivered", "Probe messages delivered to the watch's subscriber.",
            ("subscription",), registry=reg)
        self._unsettled = Gauge(
            "pubsubguard_unsettled_messages",
            "Messages published but not yet settled (delivered and acked, or dead-lettered) at the last window.",
            ("subscription",), registry=reg)
        deadlines = {float(spec["ack_deadline_s"]) for spec in self.subscriptions.values()}
        self.buckets = tuple(sorted(set(LATENCY_BUCKETS) | deadlines))
        self._latency = Histogram(
            "pubsubguard_delivery_latency_seconds", "Time from a probe message's publish to its delivery.",
            ("subscription",), buckets=self.buckets, registry=reg)
        self._late_rows = Counter(
            "pubsubguard_late_evidence_rows",
            "Evidence rows that reached the streaming checks behind their watermark and were not judged.",
            registry=reg)
        self._window_end = self._window_length = None  # absent until the first window (window())
        self._window_lock = threading.Lock()
        ack_deadline = Gauge(
            "pubsubguard_ack_deadline_seconds", "The subscription's declared ack deadline.", ("subscription",),
            registry=reg)
        horizon = Gauge(
            "pubsubguard_delivery_horizon_seconds",
            "How long the watch waits for a message before it is a `lost` finding (past_horizon).",
            ("subscription",), registry=reg)
        info = Gauge("pubsubguard_watch_info", "The watch's stack and pubsubguard version (always 1).",
                     ("stack", "version"), registry=reg)
        self._start_time = Gauge("pubsubguard_watch_start_time_seconds", "When the watch started (Unix time).",
                                 registry=reg)
        info.labels(stack=stack, version=version).set(1)
        for name, spec in self.subscriptions.items():
            ack_deadline.labels(subscription=name).set(float(spec["ack_deadline_s"]))
            horizon.labels(subscription=name).set(float(spec["horizon_s"]))
            self._delivered.labels(subscription=name)
            self._latency.labels(subscription=name)
            for kind in vocabulary.FINDING_KINDS:
                for severity in vocabulary.SEVERITIES:
                    self._findings.labels(subscription=name, kind=kind, severity=severity)
        for topic in self.topics:
            self._published.labels(topic=topic)

    # -- the server -------------------------------------------------------------------------------------------
    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/metrics"

    def start(self, port: int = 0, host: str = DEFAULT_HOST) -> WatchMetrics:
        """Serve /metrics on host:port (0: a free port; `.port` says which); a port in use is a UserError."""
        if self._server is not None:
            raise RuntimeError("WatchMetrics.start: already serving at " + self.url)
        self._start_time.set(time.time())
        try:
            self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        except OSError as err:
            what = "already in use" if err.errno == errno.EADDRINUSE else "cannot be served"
            raise UserError(f"--metrics-port {port}: {what} on {host} ({err.strerror or err})") from None
        self.host, self.port = host, self._server.server_address[1]
        return self

    def close(self) -> None:
        """Stop serving and free the port (idempotent)."""
        server, thread, self._server, self._thread = self._server, self._thread, None, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)

    def __enter__(self) -> WatchMetrics:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- what the watch records -------------------------------------------------------------------------------
    def published(self, topic: str, n: int = 1) -> None:
        self._published.labels(topic=self._known(topic, self.topics, "topic")).inc(n)

    def delivered(self, subscription: str, n: int = 1) -> None:
        self._delivered.labels(subscription=self._subscription(subscription)).inc(n)

    def latencies(self, subscription: str, seconds: Iterable[float]) -> None:
        child = self._latency.labels(subscription=self._subscription(subscription))
        for value in seconds:
            child.observe(value)

    def finding(self, subscription: str, kind: str, severity: str) -> None:
        """One finding decided (any kind: the vocabulary's are there from the start at 0)."""
        self._known(severity, vocabulary.SEVERITIES, "severity")
        self._findings.labels(subscription=self._subscription(subscription), kind=kind, severity=severity).inc()

    def guarantee(self, subscription: str, guarantee: str, status: str) -> None:
        """The last window's status of a guarantee: holds -> 1, violated -> 0, inconclusive or not_tested ->
        the series is removed (no verdict is not a verdict)."""
        self._known(status, vocabulary.GUARANTEE_STATUSES, "guarantee status")
        tested = self.subscriptions[self._subscription(subscription)].get("guarantees", ())
        self._known(guarantee, (*vocabulary.GUARANTEES, *tested), "guarantee")
        if status in ("holds", "violated"):
            self._holds.labels(subscription=subscription, guarantee=guarantee).set(1 if status == "holds" else 0)
            return
        try:
            self._holds.remove(subscription, guarantee)
        except KeyError:  # never set: nothing to remove
            pass

    def unsettled(self, subscription: str, n: int) -> None:
        self._unsettled.labels(subscription=self._subscription(subscription)).set(n)

    def late_rows(self, n: int) -> None:
        self._late_rows.inc(n)

    def window(self, end_ts: float, length_s: float) -> None:
        """A window was judged: it ended at `end_ts` (Unix time) and lasted `length_s`. Both series appear with
        the first window (a gauge at 0 before it would say a window ended in 1970: PubSubCanaryStalled reads
        their absence instead)."""
        with self._window_lock:
            if self._window_end is None:
                self._window_length = Gauge(
                    "pubsubguard_window_seconds", "The length of the last judged window.", registry=self.registry)
                self._window_end = Gauge(
                    "pubsubguard_window_end_timestamp_seconds", "When the last judged window ended (Unix time).",
                    registry=self.registry)
            self._window_length.set(length_s)
            self._window_end.set(end_ts)

    def _subscription(self, name: str) -> str:
        return self._known(name, self.subscriptions, "subscription")

    @staticmethod
    def _known(value: str, allowed, what: str) -> str:
        if value not in allowed:
            raise ValueError(f"WatchMetrics: unknown {what} {value!r} (labels carry the declared values only)")
        return value
