"""The fault layer on the wire: a schedule of faults the probe's loopback gRPC proxy applies.

Every channel the probe opens to the target goes through a recording listener
(`pubsubguard.validation.wire.listeners.Listener`, a gRPC proxy on loopback). Given a schedule
(`verify --nemesis FILE`, `run --nemesis FILE`), the listeners hand each Pub/Sub call (Publish,
StreamingPull, Pull, Acknowledge, ModifyAckDeadline) to a `Nemesis`, which alters it as the schedule
says; without a schedule nothing is parsed and every call is forwarded byte for byte.

Two families, kept apart (docs/verification.md, "The fault layer"):

- **planted anomalies** (`PLANTED`): the layer answers *wrongly* on the target's behalf, with a known
  truth: the checks must report exactly these (`pubsubguard.validation.checks.applied_faults`); applied by
  `pubsubguard.validation.wire.planted.PlantedAnomalies`, which `Nemesis` is made of;
- **network faults** (`NETWORK`): the layer only alters the network (a stream reset, a lost reply, a
  delay, a partition); the target is not altered and the checks judge what it did.

This module is the layer itself: the clock of the time selectors (stream kills, partitions), which entries
apply to a call, each call handed through both families in turn (a unary call, a StreamingPull response), the
network faults, and the record of what was applied: each fault applied is a row (`Nemesis.rows`: time, kind, RPC,
subscription or topic, key, seq, message ids, client) kept in run.json `parameters.nemesis.applied`.

The schedule (YAML or JSON) is read and validated by `pubsubguard.validation.wire.schedule`; packet faults
(`netem`, root only) are applied by `pubsubguard.validation.wire.netem` on the layer's upstream link.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass, field, replace

from .planted import MIN_GAP_S, PLANTED_ACK_PREFIX, PlantedAnomalies, Seen
from .schedule import Entry, Schedule, unit

SERVICE = "/google.pubsub.v1."
LAYER_TASK = "fault-layer"  # publisher_task of the publish rows the layer adds (the ids of dropped Publish replies)
# ---------------------------------------------------------------------------------- the layer
STREAM_BUFFER = 32  # responses the layer holds for a stream whose client reads none (then it reads no more)


class Stream:
    """One StreamingPull call through the layer: its subscription, client and an output queue the layer
    may add made-up responses to; `kill` ends it with UNAVAILABLE (the client reopens it).

    The queue is bounded: a client whose flow control paused its stream reads nothing, and the layer then
    stops reading the target (as a plain forward does). Unbounded, it held whatever the target pushed -- the
    emulator ignores the client's flow control and redelivers what expires -- and the 20-minute soak's driver
    grew by 5.6 MB/s while draining, to 5 GiB."""

    def __init__(self, subscription: str, client: str):
        self.subscription = subscription  # the twin's path
        self.client = client
        self.out: queue.Queue = queue.Queue(maxsize=STREAM_BUFFER)
        self.killed: str | None = None
        self.closed = False  # its call ended: nothing more is read from the queue

    def put(self, item) -> bool:
        """Queue `item` for the client, waiting while the queue is full; False (dropped) once the stream was
        killed or its call ended."""
        while self.killed is None and not self.closed:
            try:
                self.out.put(item, timeout=0.5)
                return True
            except queue.Full:
                continue
        return False

    def kill(self, why: str) -> None:
        self.killed = why
        try:
            self.out.put_nowait(None)
        except queue.Full:  # the stream's reader sees `killed` at its next response
            pass


@dataclass
class Nemesis(PlantedAnomalies):
    """The schedule applied by the listeners. `twins`: twin path -> declared subscription; `topics`:
    topic path -> declared topic. `start()` sets the clock of the time selectors (the probe's start)."""

    schedule: Schedule
    twins: dict
    topics: dict
    seed: str
    deadlines: dict = field(default_factory=dict)  # twin path -> ack deadline (s): when a lied ack comes back
    skew_s: float = 0.25  # the checks' skew tolerance: planted effects come at least 2x this later (`gap_s`)
    rows: list = field(default_factory=list)
    started: float | None = None
    packet_faults: str | None = None  # the run's line on packet faults (available, or why not: validation/wire/netem.py)
    packet_support: tuple = ()  # what they can do here: netem.NETEM or netem.IPTABLES

    def __post_init__(self):
        self.lock = threading.Lock()
        self.streams: list[Stream] = []
        self.acks: dict[str, Seen] = {}  # ack id -> what it acks (every delivery seen on a touched twin)
        self.done: set = set()  # (entry index, message id): a key+seq/rate entry applied once per message
        self.swaps: dict = {}  # (twin, key, seq) -> (entry, held ReceivedMessage, time held)
        self.counter = 0
        self.calls: dict[int, int] = {}  # per entry: the calls it was drawn for (its draws are its own sequence)
        self.quiet_after = 0.0  # monotonic time before which a planted effect may still come (the drain waits)
        self.stop_event = threading.Event()
        self.healed = threading.Event()  # the final read: no entry applies from then on (`heal`)
        self.touched = {e.subscription for e in self.schedule.entries if e.subscription}
        # a dead-letter strip touches the dead-letter drain's twin; a topic's publish faults its topic
        self.timer: threading.Thread | None = None
        self.packets = None  # pubsubguard.validation.wire.netem.PacketLink: netem entries' windows (None: no packet faults)
        self.gap_s = max(MIN_GAP_S, 2 * self.skew_s)

    # -- clock ---------------------------------------------------------------------------
    def start(self) -> None:
        self.started = time.monotonic()
        self.timer = threading.Thread(target=self._tick, name="nemesis", daemon=True)
        self.timer.start()

    def stop(self) -> None:
        self.stop_event.set()

    def heal(self) -> None:
        """The drain's final read (Jepsen's healed final read): from now on no entry applies, no stream is
        killed or cut off and the packet link is clear; what was applied before stays recorded."""
        self.healed.set()
        if self.packets is not None:
            self.packets.clear()

    def elapsed(self) -> float | None:
        return None if self.started is None else time.monotonic() - self.started

    def _tick(self) -> None:
        """Stream kills at their instants; partitions end the streams they cut off when they begin."""
        fired: set = set()
        while not self.stop_event.wait(0.05):
            if self.healed.is_set():
                continue
            t = self.elapsed()
            if self.packets is not None:
                self.packets.tick(self, t)
            for e in self.schedule.entries:
                if e.kind == "kill_stream" and t >= e.after_s:
                    k = 0 if e.every_s is None else int((t - e.after_s) // e.every_s)
                    if (e.index, k) not in fired:
                        fired.add((e.index, k))
                        self._kill(e, "kill_stream")
                elif e.kind == "partition" and e.active(t):
                    k = 0 if e.every_s is None else int((t - e.after_s) // e.every_s)
                    if (e.index, k) not in fired:
                        fired.add((e.index, k))
                        self.record(e, "StreamingPull", detail=f"cut off for {e.for_s:g}s")
                        self._kill(e, None)

    def _kill(self, e: Entry, record_kind: str | None) -> None:
        with self.lock:
            streams = [s for s in self.streams if self.twins.get(s.subscription) == e.subscription
                       and (e.task is None or s.client.startswith(e.task + ":"))]
        if not streams and record_kind:  # nothing to act on: said, with why (a fault is never silently not applied)
            self.record(e, "StreamingPull", detail=f"NOT applied: no open stream of {e.subscription}"
                        + (f" from task {e.task}" if e.task else "") + f" at +{self.elapsed() or 0:.1f}s "
                        "(its streams had ended, e.g. the target ended them, and were not reopened yet)")
            return
        for s in streams:
            s.kill(e.kind)
            if record_kind:
                self.record(e, "StreamingPull", client=s.client, detail="stream reset (UNAVAILABLE)")

    # -- evidence -----------------------------------------------------------------------
    def record(self, e: Entry, rpc: str, *, client: str | None = None, key=None, seq=None, message_ids=(),
               subscription: str | None = None, dead_letter_drain: str | None = None, detail: str = "", published=None) -> None:
        row = {"time_us": time.time_ns() // 1000, "entry": e.index, "kind": e.kind, "planted": e.planted,
               "rpc": rpc, "subscription": subscription or e.subscription, "topic": e.topic, "client": client,
               "key": key, "seq": seq, "message_ids": list(message_ids), "drain": dead_letter_drain, "detail": detail}
        if published is not None:  # a dropped Publish reply: [key, seq, poison, message id] the target accepted
            row["published"] = published
        with self.lock:
            self.rows.append(row)

    def accepted_rows(self, run_id: str) -> list[dict]:
        """The messages the target accepted whose Publish reply the layer dropped, as publish rows of the
        evidence (`evidence.PUBLISH_FIELDS`, `publisher_task` LAYER_TASK): their ids only the layer saw (the
        client published them again under new ids), and every one must be delivered (`kernel.completeness`)."""
        with self.lock:
            rows = [r for r in self.rows if r.get("published")]
        return [{"run_id": run_id, "topic": r["topic"], "key": key, "seq": seq, "message_id": message_id,
                 "poison": poison, "status": "ok", "error": None, "publish_time_us": r["time_us"],
                 "publisher_task": LAYER_TASK, "result_time_us": None}
                for r in rows for key, seq, poison, message_id in r["published"] if key is not None and seq is not None]

    def write_accepted(self, evidence_dir, run_id: str) -> int:
        """`accepted_rows` as a part of the publish log (`publishes/part-layer-00000.parquet`): how many."""
        rows = self.accepted_rows(run_id)
        if rows:
            import pyarrow as pa

            from pubsubguard.core import storage
            from ..evidence.records import PUBLISH_SCHEMA

            storage.write_parquet(pa.Table.from_pylist(rows, schema=PUBLISH_SCHEMA),
                                  storage.join(evidence_dir, "publishes", "part-layer-00000.parquet"))
        return len(rows)

    def as_dict(self) -> dict:
        with self.lock:
            rows = list(self.rows)
        return {**self.schedule.as_dict(), "seed": self.seed, "packet_faults": self.packet_faults,
                "packet_link": self.packets.as_dict() if self.packets is not None else None, "applied": rows}

    # -- which calls ---------------------------------------------------------------------
    def handles(self, method: str) -> bool:
        return method.startswith(SERVICE) and method.rpartition("/")[2] in (
            "Publish", "StreamingPull", "Pull", "Acknowledge", "ModifyAckDeadline")

    def _entries(self, *kinds: str, subscription: str | None = None, topic: str | None = None, rpc: str | None = None):
        if self.healed.is_set():
            return []
        t = self.elapsed()
        return [e for e in self.schedule.entries if e.kind in kinds
                and (subscription is None or e.subscription == subscription)
                and (topic is None or e.topic == topic) and (rpc is None or e.rpc == rpc)
                and (t is not None or e.after_s is None) and (t is None or e.active(t))]

    def partitioned(self, declared: str | None, client: str) -> Entry | None:
        """The partition entry cutting `client` off `declared` now, if any."""
        for e in self._entries("partition", subscription=declared):
            if e.task is None or client.startswith(e.task + ":"):
                return e
        return None

    def _draw_call(self, e: Entry) -> bool:
        if e.rate is None:
            return True
        with self.lock:
            n = self.calls[e.index] = self.calls.get(e.index, 0) + 1
        return unit(self.seed, e.index, e.kind, "call", n) < e.rate

    # -- unary calls ---------------------------------------------------------------------
    def unary(self, method: str, raw: bytes, client: str, forward, context) -> bytes | None:
        """A unary call through the layer: `forward(raw)` sends (possibly altered) bytes on and returns the
        reply's bytes (or raises the target's error). Returns the reply for the client, or aborts."""
        name = method.rpartition("/")[2]
        if name == "Publish":
            return self._publish_call(raw, client, forward, context)
        if name in ("Acknowledge", "ModifyAckDeadline", "Pull"):
            return self._subscriber_call(name, raw, client, forward, context)
        return forward(raw)

    def _publish_call(self, raw: bytes, client: str, forward, context) -> bytes | None:
        """A Publish: delayed, and its reply lost, as the entries for its topic (and key, seq) say."""
        import grpc

        from google.pubsub_v1 import types

        name = "Publish"
        request = types.PublishRequest.deserialize(raw)
        topic = self.topics.get(request.topic)
        if topic is None:  # not a probed topic (the filter canary, a conformance scenario): untouched
            return forward(raw)
        first = request.messages[0] if request.messages else None
        key = first.attributes.get("key") if first is not None else None
        seq = _int(first.attributes.get("seq")) if first is not None else None
        delayed = [e for e in self._entries("delay", topic=topic, rpc="publish") if self._publish_picks(e, request)]
        # a lost reply: the target stored the messages, the client sees UNAVAILABLE and publishes them again
        # (new message ids: publish-side duplicates); a key + seq entry loses that message's reply once
        losses = [e for e in self._entries("lose_response", topic=topic, rpc="publish") if self._publish_picks(e, request)]
        for e in delayed:
            time.sleep(e.ms / 1000)
        reply = forward(raw)
        ids = list(types.PublishResponse.deserialize(reply).message_ids) if delayed or losses else []
        for e in delayed:
            self.record(e, name, client=client, key=key, seq=seq, message_ids=ids,
                        detail=f"{e.ms:g} ms before forwarding ({len(request.messages)} messages)")
        for e in losses:
            self.record(e, name, client=client, key=key, seq=seq, message_ids=ids,
                        detail=f"forwarded ({len(request.messages)} messages, stored by the target); its reply "
                               "dropped (UNAVAILABLE to the client, which publishes them again)",
                        published=[[m.attributes.get("key"), _int(m.attributes.get("seq")), m.attributes.get("poison") == "1", i]
                                   for m, i in zip(request.messages, ids)])
            context.abort(grpc.StatusCode.UNAVAILABLE, "pubsubguard nemesis: response lost")
        return reply

    def _subscriber_call(self, name: str, raw: bytes, client: str, forward, context) -> bytes | None:
        """An Acknowledge, ModifyAckDeadline or Pull of a probe twin: refused in a partition; an ack or a
        deadline change lied about, delayed, its reply lost, as the entries for its subscription say."""
        import grpc

        from google.pubsub_v1 import types

        cls = {"Acknowledge": types.AcknowledgeRequest, "ModifyAckDeadline": types.ModifyAckDeadlineRequest,
               "Pull": types.PullRequest}[name]
        request = cls.deserialize(raw)
        declared = self.twins.get(request.subscription)
        if declared is None:  # not a probe twin (the filter canary, a conformance scenario): untouched
            return forward(raw)
        cut = self.partitioned(declared, client)
        if cut is not None:
            self.refused(cut, name, client)
            context.abort(grpc.StatusCode.UNAVAILABLE, "pubsubguard nemesis: partition")
        if name == "Pull":
            return forward(raw)
        ids = list(request.ack_ids)
        rpc = "acknowledge" if name == "Acknowledge" else "modify_ack_deadline"
        # made-up deliveries (duplicate_after_ack): the layer answers for their ack ids
        planted = [a for a in ids if a.startswith(PLANTED_ACK_PREFIX)]
        kept = [a for a in ids if not a.startswith(PLANTED_ACK_PREFIX)]
        lied = self._ack_lies(declared, kept, client) if name == "Acknowledge" else []
        delays = [e for e in self._entries("delay", subscription=declared, rpc=rpc) if self._pick(e, kept)]
        for e in delays:
            self.record(e, name, client=client, **self._touched(kept), detail=f"{e.ms:g} ms")
            time.sleep(e.ms / 1000)
        losses = [e for e in self._entries("lose_response", subscription=declared, rpc=rpc) if self._pick(e, kept)]
        if kept:
            request.ack_ids = kept
            reply = forward(type(request).serialize(request) if (planted or lied) else raw)
        else:
            reply = b""  # google.protobuf.Empty
        if name == "Acknowledge" and kept:
            self._after_ack(kept, client)
        for e in losses:
            self.record(e, name, client=client, **self._touched(kept),
                        detail="forwarded; the target's reply dropped (UNAVAILABLE to the client)")
            context.abort(grpc.StatusCode.UNAVAILABLE, "pubsubguard nemesis: response lost")
        return reply

    def refused(self, e: Entry, rpc: str, client: str) -> None:
        """A call refused during a partition: one row per window, client and RPC (the client retries at once)."""
        t = self.elapsed() or 0.0
        window = 0 if e.every_s is None else int((t - e.after_s) // e.every_s)
        with self.lock:
            if (e.index, window, client, rpc) in self.done:
                return
            self.done.add((e.index, window, client, rpc))
        self.record(e, rpc, client=client, detail="refused during the partition (UNAVAILABLE); repeats not recorded")

    def _publish_picks(self, e: Entry, request) -> bool:
        """Does a publish fault take this Publish call: key + seq, once for a request holding that message (its
        retry is not taken again); rate, drawn per call; otherwise every call in its time window."""
        if e.key is not None:
            return any(m.attributes.get("key") == e.key and _int(m.attributes.get("seq")) == e.seq
                       for m in request.messages) and (e.kind != "lose_response" or self._once(e, f"{e.key}/{e.seq}"))
        return self._draw_call(e)

    def _pick(self, e: Entry, ack_ids: list[str]) -> bool:
        if not ack_ids:
            return False
        if e.key is not None:
            return any((s := self.acks.get(a)) and s.key == e.key and s.seq == e.seq for a in ack_ids)
        return self._draw_call(e)

    def _touched(self, ack_ids: list[str]) -> dict:
        seen = [self.acks[a] for a in ack_ids if a in self.acks]
        one = seen[0] if len(seen) == 1 else None
        return {"key": one.key if one else None, "seq": one.seq if one else None,
                "message_ids": [s.message_id for s in seen]}

    def _once(self, e: Entry, message_id: str) -> bool:
        with self.lock:
            if (e.index, message_id) in self.done:
                return False
            self.done.add((e.index, message_id))
            return True

    # -- streaming pull --------------------------------------------------------------------
    def open_stream(self, first_request: bytes, client: str) -> Stream | None:
        """The stream's first request names its subscription: a Stream when the layer watches it, else None
        (forwarded as is)."""
        from google.pubsub_v1 import types

        subscription = types.StreamingPullRequest.deserialize(first_request).subscription
        declared = self.twins.get(subscription)
        if declared is None:
            return None
        stream = Stream(subscription, client)
        with self.lock:
            self.streams.append(stream)
        return stream

    def refuse_stream(self, stream: Stream) -> Entry | None:
        return self.partitioned(self.twins.get(stream.subscription), stream.client)

    def close_stream(self, stream: Stream) -> None:
        stream.closed = True
        with self.lock:
            if stream in self.streams:
                self.streams.remove(stream)

    def response(self, stream: Stream, raw: bytes, channel, metadata) -> None:
        """A StreamingPull response from the target: altered as the schedule says, put on the stream's queue."""
        from google.pubsub_v1 import types

        declared = self.twins.get(stream.subscription)
        for e in self._entries("delay", subscription=declared, rpc="streaming_pull"):
            if self._draw_call(e):  # a slow target: the stream's next response is held
                time.sleep(e.ms / 1000)
                self.record(e, "StreamingPull", client=stream.client, detail=f"{e.ms:g} ms before passing a response on")
        response = types.StreamingPullResponse.deserialize(raw)
        out, changed, later = [], False, []
        # what an ack id acks is kept for the calls that name it later; the message itself only where a
        # duplicate_after_ack entry may deliver it again (the rest of the layer acts on a response as it passes)
        redelivers = bool(self._entries("duplicate_after_ack", subscription=declared))
        for received in response.received_messages:
            attributes = received.message.attributes
            key, seq = attributes.get("key"), _int(attributes.get("seq"))
            seen = Seen(stream.subscription, declared, key, seq, received.message.message_id, received)
            with self.lock:
                self.acks[received.ack_id] = seen if redelivers else replace(seen, received=None)
            if self._drop(stream, seen, channel, metadata):
                changed = True
                continue
            if self._strip(stream, seen):
                changed = True
            held = self._swap(stream, seen)
            if held is not None:
                changed = True
                if held == "hold":
                    continue
                later.append(held)  # seq, after seq+1
            out.append(received)
        if not changed:
            stream.put(raw)
            return
        response.received_messages = out
        stream.put(types.StreamingPullResponse.serialize(response))
        self._deliver_later(stream, later)


def _int(text) -> int | None:
    return int(text) if isinstance(text, str) and text.isdigit() else None
