"""What the probe's Spark tasks share: the publishers partitioned by ordering key (`publisher`), the subscribers
with streaming pull (`subscriber`), how an ack ended (`acks`).

Both run inside executors (`mapPartitions`); their parameters are plain dicts built by
`pubsubguard.validation.driver`, so the functions pickle by reference to their modules (ship the package with
`--py-files`, see docs/verification.md). Every result is written as evidence (`pubsubguard.validation.evidence.records`)
by a `PartWriter`, which flushes a Parquet part file every `flush_rows` rows or `flush_s` seconds
(written under a temporary name, then renamed), so a crash loses at most the unflushed tail.

Publisher: one `PublisherClient(PublisherOptions(enable_message_ordering=True))` per task and endpoint,
pointed at the topic's declared publisher endpoint as the run maps it (`pubsubguard.validation.wire.endpoints`: on the
emulator and for loopback `--endpoint` mappings a recording listener, else Google's endpoint); each
message carries `probe_contract.PROBE_ATTRIBUTE=<run id>`, `key`, `seq`, `poison`. A failed publish on an
ordering key is recorded and the key resumed with `resume_publish`.

Subscriber: one streaming pull per twin subscription (through the declared consumer endpoint), lease
extension pinned to the declared ack deadline, `ack_with_response()` / `nack_with_response()` with the
result recorded for every delivery; on an ordered exactly-once subscription the probe sends its acks itself and
releases each message from the client once answered (`ordered_acks`: the library would hold the key behind an ack
the target refuses for now). Faults (`pubsubguard.validation.probe.faults`) decide nack / expire / ack; poison
messages are nacked on dead-lettering subscriptions. An expired delivery is `drop()`ped from the
client's lease management at once (its lease is not extended, it frees its flow-control slot and, on
an ordered subscription, its ordering key: holding it must not delay other messages *in our client*),
given the fault deadline by `ModifyAckDeadline` (`shorten_deadline`; the row records the deadline in
force), and acked past that deadline with a unary `Acknowledge` of the stale ack id (`late_ack`, the result
recorded). Messages carrying `CloudPubSubDeadLetterSource*` attributes are recorded as
`kind=dead_letter` for the source subscription. A task chosen to crash streams with a small prefetch
(`crash_prefetch` messages per twin, so a dead client holds a few messages, not the whole backlog),
holds a few deliveries without acking, flushes its evidence and ends its Python worker with
`os._exit`. A publisher task says it runs with `<evidence>/_publishing-<task>` (the driver then submits the
subscriber tasks); a subscriber task announces that its streams are open with `<evidence>/_ready-<task>`; every publisher
task waits for `ready_subscribers` of them (all the subscriber tasks the master has slots for beside
the publisher; up to `ready_timeout_s`) so publish->delivery latency does not include a subscriber's
start-up. `publish_time_us` is stamped before `publish()` is called, `result_time_us` when its result
arrives.

Tasks and driver share only the evidence location (`pubsubguard.core.storage`: a local directory, or an
object store URI when `--report` is one): parts, the readiness and stop flags (`storage.Marker`), each
task's notes and client log are files there, so tasks on other hosts than the driver need nothing else
in common with it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from pathlib import Path

import pyarrow as pa

from pubsubguard.core import storage

from ..evidence import layout
from ..wire import endpoints

DL_SOURCE_SUBSCRIPTION = "CloudPubSubDeadLetterSourceSubscription"
DL_SOURCE_DELIVERY_COUNT = "CloudPubSubDeadLetterSourceDeliveryCount"
CRASH_EXIT_CODE = 86
PAYLOAD = b"pubsubguard probe"
MODACK_WAIT_S = 5.0  # how long a held delivery's ModifyAckDeadline answer is waited for
UNARY_PULL_TIMEOUT_S = 2.0  # the crashing task's unary Pull: a call the target has not answered by then is cut
PULL_WORKERS = 32  # twins the crashing task pulls at once


def now_us() -> int:
    return time.time_ns() // 1000


# an evidence part file is written every FLUSH_ROWS rows or FLUSH_S seconds, whichever comes first
FLUSH_ROWS, FLUSH_S = 500, 1.0


class PartWriter:
    """Buffered Parquet part files: `<directory>/part-<prefix>-<n>.parquet`, flushed by size and by time, each in
    the bucketed layout the checks read without a shuffle (`pubsubguard.validation.evidence.layout`)."""

    def __init__(self, directory: Path, schema: pa.Schema, prefix: str, flush_rows: int = FLUSH_ROWS, flush_s: float = FLUSH_S):
        self.directory = directory if storage.is_remote(directory) else Path(directory)
        if isinstance(self.directory, Path):
            self.directory.mkdir(parents=True, exist_ok=True)
        self.schema = schema
        self.prefix = f"{prefix}-{uuid.uuid4().hex[:6]}"
        self.flush_rows = flush_rows
        self.rows: list[dict] = []
        self.parts = 0
        self.written = 0
        self.lock = threading.Lock()
        self._closed = threading.Event()
        self._timer = threading.Thread(target=self._tick, args=(flush_s,), daemon=True)
        self._timer.start()

    def add(self, row: dict) -> None:
        with self.lock:
            self.rows.append(row)
            if len(self.rows) >= self.flush_rows:
                self._flush_locked()

    def flush(self) -> None:
        with self.lock:
            self._flush_locked()

    def _flush_locked(self) -> None:
        if not self.rows:
            return
        table = pa.Table.from_pylist(self.rows, schema=self.schema)
        layout.write_part(table, storage.join(self.directory, f"part-{self.prefix}-{self.parts:05d}.parquet"))
        self.parts += 1
        self.written += len(self.rows)
        self.rows = []

    def _tick(self, interval: float) -> None:
        while not self._closed.wait(interval):
            self.flush()

    def close(self) -> None:
        self._closed.set()
        self.flush()


def use_target(emulator_host: str | None, storage_emulator_host: str | None) -> None:
    # Executors may have been started before the driver learned the emulator host (or the GCS API
    # server its evidence store is on: storage.EMULATOR_ENV, set on the driver).
    if emulator_host:
        os.environ["PUBSUB_EMULATOR_HOST"] = emulator_host
    if storage_emulator_host:
        os.environ[storage.EMULATOR_ENV] = storage_emulator_host
    endpoints.calm_grpc_waits()  # every task keeps streams or calls open: see there


def abandoned_retry(thread_name: str, error: BaseException) -> bool:
    """An exactly-once ack or modack retry of the client library (`Thread-RetryAcks`, `Thread-RetryModAcks`)
    that outlived its stream: closing the client does not stop those threads, and one still retrying dies
    with "Cannot invoke RPC on closed channel", or, once its stream's manager let go of its leaser, with an
    AssertionError in the dispatcher's `drop` (seen when a run was stopped mid-probe)."""
    return thread_name.startswith(("Thread-RetryAcks", "Thread-RetryModAcks")) and (
        (isinstance(error, ValueError) and "closed channel" in str(error)) or isinstance(error, AssertionError))


def log_abandoned_ack_retries() -> None:
    """Log a retry thread's death after its stream closed (`abandoned_retry`) as the client library's warning
    (the probe's client log, counted in the report) instead of a traceback on the terminal; other threads'
    errors keep the default hook."""

    default = threading.excepthook

    def hook(args) -> None:
        if args.thread is not None and abandoned_retry(args.thread.name, args.exc_value):
            logging.getLogger("google.cloud.pubsub_v1").warning(
                "an ack retry was abandoned when its stream or client closed: %r", args.exc_value)
            return
        default(args)

    if getattr(threading.excepthook, "__name__", "") != "hook":
        threading.excepthook = hook


READY_PREFIX = "_ready-"
# <evidence>/_publishing-<task>: a publisher task is running (holds its Spark slot); the driver submits the
# subscriber tasks after it (Spark's status tracker can say so up to an executor heartbeat, 10 s, late)
PUBLISHING_PREFIX = "_publishing-"
CLIENT_LOG_PREFIX = "client-log-"  # <evidence>/client-log-<task>.txt: the client library's warnings
CLIENT_STATE_PREFIX = "client-state-"  # <evidence>/client-state-<task>.json: what the client library held at the final read
NOTES_PREFIX = "notes-"  # <evidence>/notes-<task>.txt: what a task saw the target do, one line each (report)


def wait_for_subscribers(evidence_dir: Path | str, timeout_s: float, count: int = 1) -> bool:
    """Wait until `count` subscriber tasks have their streams open (or the timeout): True when they have."""
    deadline = time.monotonic() + timeout_s
    interval = 0.25 if storage.is_remote(evidence_dir) else 0.05  # each look at a remote store is a request
    while True:
        if len(storage.names(evidence_dir, READY_PREFIX)) >= count:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)
