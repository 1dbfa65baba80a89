"""The probe's publisher task (`publish_partition`): each key's messages in sequence, held to the drain's
in-flight bound (`Flow`) and to `--rate` (`Pace`), every publish result a row of the evidence."""

from __future__ import annotations

import collections
import os
import threading
import time

from pubsubguard.core import probe_contract, storage
from pubsubguard.policies import pubsub_facts as facts

from ..evidence import records
from ..wire import endpoints
from .clients import (
    FLUSH_ROWS, FLUSH_S, PAYLOAD, PUBLISHING_PREFIX, PartWriter, now_us, use_target, wait_for_subscribers,
)


IN_FLIGHT = 1000  # publishes a task leaves unanswered at most (the client's publish flow control blocks)


class Flow:
    """The adaptive bound (validation/probe/drain_clock.py `allowed_per_task`): the driver writes, every half second, how many
    messages each publisher task may have published (`<evidence>/_flow`); a task at its allowance waits for the
    target to settle what is in flight. Read at most every `poll_s` (a remote store: each read is a request);
    an allowance that does not move for `stuck_s` while the task waits is let go (the driver is gone or
    stalled), said in the task's notes."""

    def __init__(self, location: str | None, initial: int, poll_s: float = 0.2, stuck_s: float = 300.0):
        self.location, self.allowance, self.poll_s, self.stuck_s = location, max(1, initial), poll_s, stuck_s
        self.read_at = float("-inf")
        self.waited_s = 0.0
        self.let_go = False

    def _read(self) -> None:
        now = time.monotonic()
        if now - self.read_at < self.poll_s:
            return
        self.read_at = now
        try:
            self.allowance = int(storage.read_text(self.location).strip())
        except (OSError, ValueError):  # not written yet, or being replaced: the last one read holds
            pass

    def wait(self, sent: int) -> None:
        if self.location is None or self.let_go:
            return
        self._read()
        started = time.monotonic()
        while sent >= self.allowance:
            time.sleep(self.poll_s)
            self._read()
            if time.monotonic() - started > self.stuck_s:
                self.let_go = True
                break
        self.waited_s += time.monotonic() - started


class Pace:
    """`--rate`: one publish every 1/rate seconds of this task (its share of the run's rate), kept on a
    schedule from the first one, so a slow call is made up for and the achieved rate is the asked one
    unless the target (or the in-flight bound) is slower. None: as fast as the in-flight bound allows."""

    def __init__(self, rate: float | None):
        self.interval = 1.0 / rate if rate else 0.0
        self.start: float | None = None
        self.sent = 0

    def wait(self) -> None:
        if not self.interval:
            return
        now = time.monotonic()
        if self.start is None:
            self.start = now
        due = self.start + self.sent * self.interval
        if due > now:
            time.sleep(due - now)
        self.sent += 1


def publish_partition(spec: dict, keys) -> list[dict]:
    """Publish every topic's keyed workload for the keys of this partition; one summary row out."""
    use_target(spec.get("emulator_host"), spec.get("storage_emulator_host"))
    keys = list(keys)
    task = f"pub-{keys[0] if keys else 'none'}-{os.getpid()}"
    storage.Marker(storage.join(spec["evidence_dir"], f"{PUBLISHING_PREFIX}{task}")).set()
    writer = PartWriter(storage.join(spec["evidence_dir"], "publishes"), records.PUBLISH_SCHEMA, task,
                        spec.get("flush_rows", FLUSH_ROWS), spec.get("flush_s", FLUSH_S))
    wait_for_subscribers(spec["evidence_dir"], spec.get("ready_timeout_s", 0), spec.get("ready_subscribers", 1))
    results = _Results(spec["run_id"], task, writer)
    flow = Flow(spec.get("flow_file"), spec.get("flow_initial", IN_FLIGHT))
    clients: dict[str, object] = {}
    try:
        routes = _routes(spec, task, clients)
        pending = _publish(spec, keys, routes, results, Pace(spec.get("rate")), flow)
        for future in pending:
            try:
                future.result(timeout=spec.get("publish_timeout_s", 120))
            except Exception:  # noqa: BLE001 - recorded by the callback
                pass
    finally:
        for client in clients.values():
            client.stop()
        results.stop()
        writer.close()
    return [{"task": task, "keys": len(keys), **results.counts, "flow_waited_s": round(flow.waited_s, 1),
             "flow_let_go": flow.let_go}]


class _Results:
    """The task's publish results, made rows of the evidence. The client runs done callbacks on the thread
    that commits the next batch of an ordering key: they only stamp and queue the result (`add`); this
    recorder's thread makes the rows and writes the parts."""

    def __init__(self, run_id: str, task: str, writer: PartWriter):
        self.run_id, self.task, self.writer = run_id, task, writer
        self.counts = {"ok": 0, "error": 0}
        self.queue: collections.deque = collections.deque()
        self.publishing = threading.Event()
        self.publishing.set()
        self.thread = threading.Thread(target=self._record, daemon=True)
        self.thread.start()

    def add(self, fut, topic_name: str, key: str, seq: int, is_poison: bool, sent_us: int) -> None:
        self.queue.append((fut, topic_name, key, seq, is_poison, sent_us, now_us()))

    def stop(self) -> None:
        """Once every client has stopped: the queue written out."""
        self.publishing.clear()
        self.thread.join(timeout=60)

    def _record(self) -> None:
        while self.publishing.is_set() or self.queue:
            while self.queue:
                fut, topic_name, key, seq, is_poison, sent_us, result_us = self.queue.popleft()
                row = {"run_id": self.run_id, "topic": topic_name, "key": key, "seq": seq, "poison": is_poison,
                       "publish_time_us": sent_us, "result_time_us": result_us, "publisher_task": self.task}
                error = fut.exception()
                if error is None:
                    row.update(message_id=fut.result(), status="ok", error=None)
                else:
                    row.update(message_id=None, status="error", error=f"{type(error).__name__}: {error}")
                self.counts[row["status"]] += 1
                self.writer.add(row)
            time.sleep(0.05)


def _routes(spec: dict, task: str, clients: dict) -> list[tuple]:
    """Per topic: (topic, its publisher client, its poison (key, seq)); one client per endpoint, kept in
    `clients` (the caller stops them)."""
    from google.cloud.pubsub_v1.types import LimitExceededBehavior, PublisherOptions, PublishFlowControl

    routes = []
    for topic in spec["topics"]:
        # The misroute fault: a publisher misconfigured onto the global endpoint (endpoint_pinning).
        endpoint = facts.GLOBAL_ENDPOINT if spec.get("misroute") else topic["endpoint"]
        if endpoint not in clients:
            clients[endpoint] = endpoints.publisher_client(
                endpoint, spec.get("endpoints", {}), f"{task}:publisher",
                publisher_options=PublisherOptions(
                    enable_message_ordering=True,
                    # at most this many publishes unanswered: the task waits (BLOCK) rather than queue the
                    # whole workload in the client
                    flow_control=PublishFlowControl(message_limit=spec.get("in_flight", IN_FLIGHT),
                                                    limit_exceeded_behavior=LimitExceededBehavior.BLOCK)),
            )
        routes.append((topic, clients[endpoint], {tuple(p) for p in spec["poison"].get(topic["name"], [])}))
    return routes


def _publish(spec: dict, keys: list, routes: list, results: _Results, pace: Pace, flow: Flow) -> list:
    """Every message of the workload published; their futures. Seq by seq across every topic and key: each
    (topic, key) still in order, and under a --rate or the in-flight bound every topic's subscriptions get
    traffic all along (topic by topic, the last topic of a 20-minute soak got nothing for its first 13 minutes)."""
    pending = []
    sent = 0
    first = spec.get("seq_start", 0)  # pubsubguard watch: seqs continue past what an earlier run reserved
    stop = storage.Marker(spec["stop_file"]) if spec.get("stop_file") else None  # watch: publishes until told
    for seq in range(first, first + spec["messages_per_key"]):
        if stop is not None:
            pending = [f for f in pending if not f.done()]  # hours of publishing: only the unanswered are held
        for topic, client, poison in routes:
            for key in keys:
                if stop is not None and stop.is_set():
                    return pending
                flow.wait(sent)
                pace.wait()
                sent += 1
                is_poison = (key, seq) in poison
                sent_us = now_us()  # before the call: the server may deliver before its ack comes back
                future = client.publish(
                    topic["path"], PAYLOAD, ordering_key=key,
                    **{probe_contract.PROBE_ATTRIBUTE: spec["run_id"], "key": key, "seq": str(seq),
                       "poison": "1" if is_poison else "0"},
                )

                def done(fut, topic=topic, key=key, seq=seq, is_poison=is_poison, client=client, sent_us=sent_us):
                    results.add(fut, topic["name"], key, seq, is_poison, sent_us)
                    if fut.exception() is not None:
                        # An ordered key stays paused after a failure until resumed (docs/pubsub-facts.md, Ordering).
                        client.resume_publish(topic["path"], key)

                future.add_done_callback(done)
                pending.append(future)
    return pending
