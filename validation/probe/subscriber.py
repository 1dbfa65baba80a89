"""The probe's subscriber task (`subscribe_partition`, `ProbeSubscriber`): streams on its twins, the fault plan
per delivery, every delivery a row of the evidence; the task chosen to crash reads by unary Pull instead
(`unary_pull`) and dies holding deliveries. The client library's log is kept per task (`client_log`). What a task
is handed is a `SubscriberSpec`, a frozen value read by its fields' names."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from dataclasses import dataclass, field

from pubsubguard.core import probe_contract, storage

from ..evidence import records
from ..wire import endpoints
from .acks import error_reason, failed_batch_mates, future_ack_result, unary_ack_result
from .client_log import ClientLog
from .clients import (
    CLIENT_LOG_PREFIX, CLIENT_STATE_PREFIX, CRASH_EXIT_CODE, DL_SOURCE_DELIVERY_COUNT, DL_SOURCE_SUBSCRIPTION,
    FLUSH_ROWS, FLUSH_S, MODACK_WAIT_S, NOTES_PREFIX, PartWriter, READY_PREFIX,
    log_abandoned_ack_retries, now_us, use_target,
)
from .faults import DeliveryCounts, Faults, delivery_action
from .ordered_acks import OrderedAcks, held_by_the_library
from .twins import TwinSpec
from .unary_pull import pull_rounds
from .unkeyed import subscribe_unkeyed


@dataclass(frozen=True)
class SubscriberSpec:
    """What one subscriber task is handed (`validation.driver.ProbeDriver._subscriber_spec` builds it; pickled to
    its Spark task as it is), read by its fields' names: the twins it reads, the faults it plants, where it writes,
    the driver's markers it watches and when it ends. The push twins' subscriber (`probe.push`) is handed one too
    and reads its twins, faults and margins only."""

    run_id: str
    task_id: str
    evidence_dir: str
    twins: tuple[TwinSpec, ...]
    twin_to_declared: dict[str, str]  # a twin's short name -> the declared subscription (or drain) it stands for
    faults: Faults
    crash_after: int | None = None  # deliveries before the crash starts; None: no crash
    crash_hold: int = 3  # the crashing task dies once it holds this many deliveries (or 3 s after its first)
    crash_prefetch: int = 1  # messages per twin the crashing task pulls at a time
    end_time: float | None = None  # time.time() at which the task ends by itself (the stop file ends it first)
    stop_file: str | None = None  # the driver's markers: the run's end, the final read (`_heal`), streams to close
    heal_file: str | None = None
    close_file: str | None = None
    fault_deadline_s: float | None = None  # the deadline a held delivery gets by ModifyAckDeadline (None: its own)
    expire_margin_s: float = 2.0  # an expired delivery is acked this long after its deadline
    max_outstanding: int = 1000  # flow control per stream
    flush_rows: int = FLUSH_ROWS
    flush_s: float = FLUSH_S
    endpoints: dict[str, str] = field(default_factory=dict)  # endpoint -> the host:port dialled for it
    emulator_host: str | None = None
    storage_emulator_host: str | None = None  # the evidence store's emulator (storage.EMULATOR_ENV), if remote


class ProbeSubscriber:
    def __init__(self, spec: SubscriberSpec):
        self.spec = spec
        self.run_id = spec.run_id
        self.task = spec.task_id
        self.faults = spec.faults
        self.writer = PartWriter(storage.join(spec.evidence_dir, "deliveries"), records.DELIVERY_SCHEMA, self.task,
                                 spec.flush_rows, spec.flush_s)
        self.twin_to_declared = spec.twin_to_declared
        self.lock = threading.Lock()
        self.seen = DeliveryCounts()
        self.received = 0
        self.crash_after = spec.crash_after
        self.crash_started: float | None = None
        self.crash_held: list[dict] = []
        self.timers: list[threading.Timer] = []
        self.held: dict[int, dict] = {}  # rows of deliveries held for a late ack
        self.clients: dict[str, object] = {}  # consumer endpoint -> SubscriberClient
        self.noted: list[str] = []
        self.client_log: ClientLog | None = None
        # the drain's final read (`<evidence>/_heal`, set by the driver): no fault is injected from then on,
        # every delivery is settled as the workload says (acked; a poison one nacked where it dead-letters)
        self.healed = False
        self._ordered_acks: OrderedAcks | None = None  # acks the client library would hold a key on, sent by the probe

    def row(self, twin: TwinSpec, message, received_us: int, attributes) -> dict:
        dl_source = attributes.get(DL_SOURCE_SUBSCRIPTION)
        seq = attributes.get("seq")
        publish_time = message.publish_time
        row = {
            "run_id": self.run_id,
            "subscription": twin.declared_name,
            "kind": "delivery",
            "message_id": message.message_id,
            "key": attributes.get("key") if attributes.get(probe_contract.PROBE_ATTRIBUTE) else None,
            "seq": int(seq) if seq is not None and seq.isdigit() and attributes.get(probe_contract.PROBE_ATTRIBUTE) else None,
            "probe_run": attributes.get(probe_contract.PROBE_ATTRIBUTE),
            "delivery_attempt": message.delivery_attempt,
            "receive_time_us": received_us,
            "publish_time_us": int(publish_time.timestamp() * 1_000_000) if publish_time else None,
            "subscriber_task": self.task,
            "ack_id": hashlib.blake2b(message.ack_id.encode(), digest_size=8).hexdigest(),
            "ack_deadline_s": twin.ack_deadline_s,
            "action": "none",
            "ack_result": "none",
            "ack_time_us": None,
            "dl_source_delivery_count": None,
            "dl_source_subscription": None,
        }
        if dl_source is not None:
            source = dl_source.rsplit("/", 1)[-1]
            count = attributes.get(DL_SOURCE_DELIVERY_COUNT)
            row.update(
                kind="dead_letter",
                subscription=self.twin_to_declared.get(source, source),
                dl_source_subscription=dl_source,
                dl_source_delivery_count=int(count) if count and count.isdigit() else None,
            )
        return row

    def settle(self, twin: TwinSpec, message, row: dict, action: str) -> None:
        twin_name = row["subscription"]
        with self.lock:
            self.held.pop(id(row), None)
        row["action"] = action
        row["ack_time_us"] = now_us()
        if action == "ack" and held_by_the_library(message):
            # on an ordered exactly-once subscription: sent by the probe, so the key never waits in the library on an
            # ack the target refuses for now (`ordered_acks`)
            self.ordered_acks().ack(self.clients[twin.consumer_endpoint], twin.path, message, row)
            return
        future = message.nack_with_response() if action == "nack" else message.ack_with_response()

        def record(fut):
            row["ack_result"] = future_ack_result(fut, message.ack_id)
            if row["ack_result"] == "success" and fut.exception() is not None:
                self.note(f"{action} on {twin_name} reported failed by the client library (AcknowledgeStatus.OTHER) "
                          "only because other ack ids of the same request failed: the target's ErrorInfo does not "
                          "name it, so the target applied it (recorded as success)")
            if row["ack_result"] == "other":
                self.note(f"{action} on {twin_name} answered neither success nor a known ack error: "
                          f"{error_reason(fut.exception())}")
            self.writer.add(row)

        future.add_done_callback(record)

    def ordered_acks(self) -> OrderedAcks:
        """The acks this task sends itself (made at the first: a task on unordered subscriptions never needs it)."""
        with self.lock:
            if self._ordered_acks is None:
                self._ordered_acks = OrderedAcks(self.writer.add, self._ack_retried)
            return self._ordered_acks

    def _ack_retried(self, subscription: str, reason: str) -> None:
        name = self.twin_to_declared.get(subscription.rsplit("/", 1)[-1], subscription)
        self.note(f"ack on {name} answered {reason} (not final): retried by the probe, the message released from the "
                  "client library meanwhile so its ordering key's next messages still reach the probe (the library "
                  "would hold them behind it while it retried, and the message the target waits for may be one of them)")

    def _end_ordered_acks(self) -> None:
        """At the task's end: the acks still answered transiently are written (`other`), said in one note."""
        if self._ordered_acks is None:
            return
        left = self._ordered_acks.stop()
        for row, _ in left:
            self.writer.add(row)
        if left:
            answers = ", ".join(sorted({reason or "not sent yet" for _, reason in left}))
            self.note(f"{len(left)} ack{'' if len(left) == 1 else 's'} of ordered exactly-once deliveries not answered for "
                      f"good when the task ended ({answers}): recorded ack_result other (neither taken nor refused)")

    def late_ack(self, twin: TwinSpec, ack_id: str, row: dict) -> None:
        """Ack an expired delivery with its stale ack id, outside the streaming client (it was dropped)."""
        with self.lock:
            if self.held.pop(id(row), None) is None:
                return  # the run ended first; recorded as `expire`
        row["action"] = "late_ack"
        row["ack_time_us"] = now_us()
        error = None
        try:
            # No retry: the target's first answer is the evidence.
            self.clients[twin.consumer_endpoint].acknowledge(subscription=twin.path, ack_ids=[ack_id],
                                                                 timeout=30, retry=None)
        except Exception as err:  # noqa: BLE001 - the result is the evidence
            error = err
        row["ack_result"] = unary_ack_result(error)
        self.writer.add(row)

    def callback(self, twin: TwinSpec, message) -> None:
        # When the client library took the message off the stream (after its receipt modack, which starts
        # the ack deadline), not when a callback thread got to it: on a busy machine that queueing alone
        # took 0.6 s, which would count as delivery latency and shift the deadline the checks assume.
        received = getattr(message, "_received_timestamp", None)
        received_us = int(received * 1_000_000) if received else now_us()
        attributes = dict(message.attributes)
        row = self.row(twin, message, received_us, attributes)
        with self.lock:
            self.received += 1
            local_count = self.seen.count((twin.path, message.message_id))
            crashing = self.crash_after is not None and self.received > self.crash_after
            crashing = crashing and not self.healed
            if crashing and self.crash_started is None:
                self.crash_started = time.monotonic()
        if row["kind"] == "dead_letter":
            message.ack()  # drained; the verdict is about the source subscription
            self.writer.add(row)
            return
        if crashing:
            row["action"] = "crash"
            self.shorten_deadline(twin, message, row)
            with self.lock:
                self.crash_held.append(row)
            return  # never acked: the crash leaves it outstanding
        if row["probe_run"] != self.run_id:
            self.settle(twin, message, row, "ack")  # not this run's message: recorded, acked on the twin only
            return
        if attributes.get("poison") == "1" and twin.dead_lettering:
            self.settle(twin, message, row, "nack")
            return
        if self.healed:
            self.settle(twin, message, row, "ack")
            return
        # Only a delivery within one (fault) deadline of its publish may be held: a message expires at most once.
        window_s = min(twin.ack_deadline_s, self.spec.fault_deadline_s or twin.ack_deadline_s)
        may_expire = row["publish_time_us"] is None or received_us - row["publish_time_us"] < window_s * 1e6
        action = delivery_action(self.faults, self.run_id, twin.declared_name, message.message_id,
                                 f"{self.task}:{local_count}", may_expire=may_expire)
        if action == "expire":
            self.hold_to_expire(twin, message, row)
            return
        self.settle(twin, message, row, action)

    def hold_to_expire(self, twin: TwinSpec, message, row: dict) -> None:
        """Hold a delivery until its deadline has passed, then ack it late with its stale ack id (`late_ack`).

        Out of the client's lease management from now: no extension, no flow-control slot, and the ordering key
        is free; the service's deadline (set by the receipt modack, or shortened to the fault deadline) runs out."""
        message.drop()
        hold = self.shorten_deadline(twin, message, row) + self.spec.expire_margin_s
        timer = threading.Timer(hold, self.late_ack, args=(twin, message.ack_id, row))
        timer.daemon = True
        with self.lock:
            self.timers.append(timer)
            self.held[id(row)] = row
        timer.start()

    def shorten_deadline(self, twin: TwinSpec, message, row: dict) -> float:
        """A delivery a fault holds gets the fault deadline by `ModifyAckDeadline` (a client's right: 0..600 s),
        so it comes back after that rather than after the subscription's own deadline. Records the deadline in
        force in the row (what the checks measure from) and returns how long to wait before the late ack.

        Refused (exactly-once answers each modack): no shorter deadline was granted, so the row keeps the
        subscription's; INVALID_ACK_ID means the target held the ack id dead already (its deadline passed, a
        redelivery superseded it, or it was settled) and the modack changed nothing. No answer
        within `MODACK_WAIT_S`: the row says the shorter one (a redelivery after it is then not taken for a
        duplicate) and the late ack waits for the longer one (it is past both)."""
        from concurrent.futures import TimeoutError as Pending

        declared = twin.ack_deadline_s
        seconds = self.spec.fault_deadline_s
        if not seconds or seconds >= declared:
            return declared
        try:
            message.modify_ack_deadline_with_response(int(seconds)).result(timeout=MODACK_WAIT_S)
        except Pending:
            row["ack_deadline_s"] = int(seconds)
            return declared
        except Exception as err:  # noqa: BLE001 - the target's answer is the evidence
            if failed_batch_mates(err, message.ack_id):  # applied: only other ack ids of the request failed
                row["ack_deadline_s"] = int(seconds)
                return seconds
            reason = error_reason(err)
            if "INVALID_ACK_ID" in reason:  # the ack id was dead already: nothing was extended nor shortened
                self.note(f"ModifyAckDeadline({int(seconds)}s) of a held delivery on {twin.declared_name} was answered "
                          f"INVALID_ACK_ID ({reason}): the target held that ack id dead already (its deadline passed, a "
                          "redelivery superseded it, or it was settled), so the modack changed nothing; the delivery's "
                          f"row keeps the subscription's {declared}s deadline (no shorter one was granted)")
            else:
                self.note(f"ModifyAckDeadline({int(seconds)}s) of a held delivery on {twin.declared_name} failed "
                          f"({reason}): not applied as far as the client was told; the delivery's row keeps the "
                          f"subscription's {declared}s deadline (no shorter one was granted)")
            return declared
        row["ack_deadline_s"] = int(seconds)
        return seconds

    @staticmethod
    def client_held(future) -> dict | None:
        """What the client library holds on one streaming pull, from its own manager (kept under a name-mangled
        attribute of the future): `leased` (in its queue or its callbacks, or acks it still retries), `on_hold`
        (behind an earlier message of their ordering key), its flow control's `load` and whether that `paused`
        the stream (nothing more is read from it). None where the library keeps these elsewhere."""
        try:
            manager = getattr(future, "_StreamingPullFuture__manager", None) or future._manager
            return {"leased": manager.leaser.message_count, "on_hold": manager._messages_on_hold.size,
                    "load": round(manager.load, 2), "paused": bool(manager._consumer and manager._consumer.is_paused)}
        except AttributeError:
            return None

    def note_held_in_client(self, streams: dict, when: str = "at the run's end") -> None:
        """At the end, per twin: messages the client library still leased (in its queue or its callbacks) and those
        it held back behind an earlier message of their ordering key -- never handed to the probe, so never recorded;
        said so a `lost` finding can be read beside it. Read from the
        streaming pull manager's own counters (the client library's internals: nothing said when they differ)."""
        for path, future in streams.items():
            held = self.client_held(future)
            if held is None:
                continue
            leased, on_hold, load, paused = held["leased"], held["on_hold"], held["load"], held["paused"]
            if leased or on_hold or paused:
                self.note(f"{when} the client library still leased {leased} message{'' if leased == 1 else 's'} of "
                          f"{self.twin_to_declared.get(path.rsplit('/', 1)[-1], path)} (in its queue or its callbacks), "
                          f"{on_hold} held back behind an earlier message of their ordering key, which it never handed "
                          f"to the probe; its flow control's load {load:.2f}" + (", the stream paused by it" if paused else ""))

    def close_streams(self, streams: dict, close_file: str) -> None:
        """Close the streams of the twins the driver names in `<evidence>/_close` (subscriptions that stopped
        delivering after a poison message's last attempt: while such a subscription is read by a StreamingPull,
        the emulator serves every other subscription only every 10 s, conformance scenario
        ordered-dead-letter-spares-other-subscriptions); the others read on."""
        import json

        if not streams:
            return
        try:
            close = json.loads(storage.read_text(close_file) or "[]")
        except (OSError, ValueError):  # none yet, or being replaced
            return
        for path in close:
            future = streams.pop(path, None)
            if future is not None:
                future.cancel()
                self.note(f"closed the stream of {self.twin_to_declared.get(path.rsplit('/', 1)[-1], path)} as the "
                          "driver asked (it stopped delivering after a poison message's last attempt)")

    def fresh_streams(self, streams: dict, subscribe) -> None:
        """The final read reads on new streams: every open stream of an unordered subscription is cancelled (the
        client library nacks what it still held in its queue) and opened anew, so nothing a stream's client-side
        state kept back -- a lease, a flow-control slot -- stands between the target and the final read (Jepsen
        reads with fresh clients after healing). An ordered subscription keeps its stream: a reset is a fault of
        its own there (what the client held behind an earlier message of its key is noted)."""
        by_path = {twin.path: twin for twin in self.spec.twins}
        self.write_client_state(streams)
        self.note_held_in_client(streams, "when the final read began")
        reopened, kept = [], []
        for path in list(streams):
            name = self.twin_to_declared.get(path.rsplit("/", 1)[-1], path)
            if by_path[path].ordering:
                kept.append(name)
                continue
            streams.pop(path).cancel()
            subscribe(by_path[path])
            reopened.append(name)
        if reopened or kept:
            self.note(f"final read: opened new streams on {', '.join(sorted(reopened)) or 'none'}; kept the streams of "
                      f"the ordered subscriptions {', '.join(sorted(kept)) or '(none)'} (resetting an ordered stream is "
                      "a fault of its own: the emulator then stops delivering the keys outstanding at that moment, "
                      "conformance scenario ordered-stream-reset-keeps-delivering)")

    def write_client_state(self, streams: dict) -> None:
        """What the client library holds on each stream now (`client_held`), and whether the final read reads it
        on a new stream (`reopened`: unordered subscriptions), in `<evidence>/client-state-<task>.json`: written
        when the final read begins and again each second of it, so the driver judges by what the client held
        when the final read ended, not when it began (a message the client let go meanwhile is not its own)."""
        import json

        by_path = {twin.path: twin for twin in self.spec.twins}
        held = {by_path[path].declared_name: {**state, "reopened": not by_path[path].ordering}
                for path, future in streams.items() if (state := self.client_held(future)) is not None}
        storage.write_text(storage.join(self.spec.evidence_dir, f"{CLIENT_STATE_PREFIX}{self.task}.json"),
                           json.dumps(held, sort_keys=True))

    def should_crash(self) -> bool:
        if self.crash_started is None:
            return False
        with self.lock:
            held = len(self.crash_held)
        return held >= self.spec.crash_hold or time.monotonic() - self.crash_started > 3.0

    def crash(self) -> None:
        with self.lock:
            for row in self.crash_held:
                self.writer.add(row)
        self.writer.close()
        if self.client_log is not None:
            self.client_log.close()
        os._exit(CRASH_EXIT_CODE)  # a real death of the Python worker, holding unacked messages

    def note(self, line: str) -> None:
        """An observation for the report, once per distinct line (also survives the crash)."""
        with self.lock:
            if line in self.noted:
                return
            self.noted.append(line)
            # the whole file each time: an object store has no append (notes are few)
            storage.write_text(storage.join(self.spec.evidence_dir, f"{NOTES_PREFIX}{self.task}.txt"),
                               "".join(f"subscriber task {self.task}: {noted}\n" for noted in self.noted))

    def ready(self) -> None:
        storage.Marker(storage.join(self.spec.evidence_dir, f"{READY_PREFIX}{self.task}")).set()

    def pull_until_crash(self, stop_file: storage.Marker, end: float) -> None:
        """The task chosen to crash reads with unary Pull, `crash_prefetch` messages per twin at a time
        (`unary_pull.pull_rounds`, which says why), until it holds the deliveries it dies with (`should_crash`)
        or the run ends first."""

        def crash_when_held() -> None:
            if self.should_crash():
                self.crash()

        self.ready()
        pull_rounds(self.spec.twins, self.clients, self.spec.crash_prefetch,
                    going=lambda: time.time() < end and not stop_file.is_set(), deliver=self.callback,
                    after_round=crash_when_held, note=self.note)
        self.note(f"crash fault NOT injected: the run ended before this task held a delivery ({self.received} "
                  f"received, all settled; it holds after {self.crash_after})")

    def subscribe(self, twin, futures: list, streams: dict) -> None:
        """A streaming pull on `twin`, leased at its ack deadline: the probe's own unkeyed stream where the twin has no
        ordering (`subscribe_unkeyed`), else the client library's."""
        from google.cloud.pubsub_v1.types import FlowControl

        deadline = twin.ack_deadline_s
        flow = FlowControl(
            max_messages=self.spec.max_outstanding,
            # Leases (receipt modack and extensions) are the declared deadline; a message waiting
            # in the client is extended until the run ends (an expired one is dropped instead).
            max_lease_duration=max(60, self.spec.end_time - time.time()),
            min_duration_per_lease_extension=deadline,
            max_duration_per_lease_extension=deadline,
        )
        client, callback = self.clients[twin.consumer_endpoint], (lambda m, twin=twin: self.callback(twin, m))
        future = None if twin.ordering else subscribe_unkeyed(client, twin.path, callback, flow)
        if future is None:
            if not twin.ordering:
                self.note(f"{twin.declared_name} has no message ordering, but this client library keeps its "
                          "hold per ordering key where the probe cannot replace it: a keyed message waits in the "
                          "client behind the one before it (validation/probe/unkeyed.py)")
            future = client.subscribe(twin.path, callback=callback, flow_control=flow)
        futures.append(future)
        streams[twin.path] = future

    def run(self) -> list[dict]:
        use_target(self.spec.emulator_host, self.spec.storage_emulator_host)
        self.client_log = ClientLog(storage.join(self.spec.evidence_dir, f"{CLIENT_LOG_PREFIX}{self.task}.txt"))
        log_abandoned_ack_retries()
        futures = []
        streams: dict[str, object] = {}  # twin path -> its streaming pull
        stop_file = storage.Marker(self.spec.stop_file)
        end = self.spec.end_time
        try:
            for twin in self.spec.twins:
                if twin.consumer_endpoint not in self.clients:
                    self.clients[twin.consumer_endpoint] = endpoints.subscriber_client(
                        twin.consumer_endpoint, self.spec.endpoints, f"{self.task}:subscriber")
            if self.crash_after is not None:
                self.pull_until_crash(stop_file, end)
                return [{"task": self.task, "received": self.received, "written": self.writer.written}]

            def subscribe(twin) -> None:
                self.subscribe(twin, futures, streams)

            for twin in self.spec.twins:
                subscribe(twin)
            self.ready()
            heal_file = storage.Marker(self.spec.heal_file) if self.spec.heal_file else None
            polls = 0
            while time.time() < end and not stop_file.is_set():
                if self.should_crash():
                    self.crash()
                polls += 1
                # the streams the driver closes first: it names them before it asks for the final read
                if self.spec.close_file and polls % 5 == 0:
                    self.close_streams(streams, self.spec.close_file)
                if heal_file is not None and not self.healed and polls % 5 == 0 and heal_file.is_set():
                    self.healed = True
                    self.fresh_streams(streams, subscribe)
                elif self.healed and polls % 10 == 0:
                    self.write_client_state(streams)
                time.sleep(0.1)
        finally:
            self.end(futures, streams)
        return [{"task": self.task, "received": self.received, "written": self.writer.written}]

    def end(self, futures: list, streams: dict) -> None:
        """The task's end, also when it failed: what the client still held noted, the streams cancelled, the held
        deliveries written as expired, the acks still answered transiently written, the evidence flushed."""
        self.note_held_in_client(streams)
        for future in futures:
            future.cancel()
        for future in futures:
            try:
                future.result(timeout=10)
            except Exception:  # noqa: BLE001 - cancelled
                pass
        for timer in self.timers:
            timer.cancel()
        with self.lock:
            for row in self.held.values():  # held past the deadline, the run ended before the late ack
                row["action"] = "expire"
                self.writer.add(row)
            self.held.clear()
        self._end_ordered_acks()
        # Closing a client whose streaming pulls were just cancelled blocked for ~7.5 s in grpc's channel
        # close (measured in the main job): the task's result does not wait for it.
        clients = self.clients
        threading.Thread(target=lambda: [client.close() for client in clients.values()], daemon=True).start()
        self.writer.close()
        self.client_log.close()


def subscribe_partition(spec: SubscriberSpec, _items) -> list[dict]:
    return ProbeSubscriber(spec).run()
