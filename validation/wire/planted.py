"""The planted anomalies of the fault layer (`schedule.PLANTED`): the layer answers *wrongly* on the target's
behalf, with a known truth the checks must report exactly (`pubsubguard.validation.checks.applied_faults`;
docs/verification.md, "The fault layer"):

- `drop_delivery`: a delivery withheld from the subscriber and acked upstream by the layer (`_drop`);
- `duplicate_after_ack`: after a successful ack, the message delivered again under an ack id of the layer's own
  (`_after_ack`, `_redeliver`);
- `ack_lie`: an ack answered success and not forwarded (`_ack_lies`);
- `swap`: seq held until seq+1 of its key comes, then delivered after it (`_swap`, `_release`, `_deliver_later`);
- `strip_dead_letter_attributes`: a forwarded message's dead-letter attributes removed (`_strip`).

`PlantedAnomalies` is what `nemesis.Nemesis` is made of for them; the network faults, the clock, which entries
apply to a call, the handing of each call and the record of what was applied are the layer's own, whose fields
and methods these use (`lock`, `acks`, `streams`, `done`, `swaps`, `counter`, `quiet_after`, `seed`,
`gap_s`, `deadlines`, `twins`, `_entries`, `_once`, `record`). Each anomaly applied is a row; one that could not be
applied is a row saying so."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from .schedule import Entry

DL_PREFIX = "CloudPubSubDeadLetterSource"
DL_SOURCE_SUBSCRIPTION = "CloudPubSubDeadLetterSourceSubscription"
UPSTREAM_ACKNOWLEDGE = "/google.pubsub.v1.Subscriber/Acknowledge"  # what drop_delivery sends the target itself
PLANTED_ACK_PREFIX = "pubsubguard-planted-"  # ack ids of deliveries the layer made up (answered by the layer)
SWAP_WAIT_S = 3.0  # how long the layer holds seq for seq+1 to come (then it releases seq: not applied)
# A planted effect comes this long (at least) after what it follows -- seq after seq+1 (swap), the
# redelivery after the successful ack (duplicate_after_ack) -- so it is past the checks' clock-skew
# tolerance (`--skew-us`, 250 ms by default): within it the checks rightly give the benefit of the doubt.
MIN_GAP_S = 1.0


@dataclass
class Seen:
    """A delivery the layer saw pass: its message's coordinates and the raw ReceivedMessage."""

    twin: str
    declared: str
    key: str | None
    seq: int | None
    message_id: str
    received: object


class PlantedAnomalies:
    """The planted anomalies of `nemesis.Nemesis`, as the schedule's entries select them."""

    def _expect_until(self, seconds: float) -> None:
        """A planted effect may still come within `seconds` (a lied ack's redelivery): the drain waits for it."""
        with self.lock:
            self.quiet_after = max(self.quiet_after, time.monotonic() + seconds)

    # -- drop_delivery ---------------------------------------------------------------------
    def _drop(self, stream, seen: Seen, channel, metadata) -> bool:
        for e in self._entries("drop_delivery", subscription=seen.declared):
            if e.selects(self.seed, seen.key, seen.seq):
                status = "OK"
                try:
                    from google.pubsub_v1 import types

                    request = types.AcknowledgeRequest(subscription=seen.twin, ack_ids=[seen.received.ack_id])
                    channel.unary_unary(UPSTREAM_ACKNOWLEDGE)(
                        types.AcknowledgeRequest.serialize(request), metadata=metadata, timeout=30)
                except Exception as err:  # noqa: BLE001 - the target's answer is recorded
                    status = f"{type(err).__name__}: {getattr(err, 'code', lambda: '')()}"
                self.record(e, "StreamingPull", client=stream.client, key=seen.key, seq=seen.seq,
                            message_ids=[seen.message_id],
                            detail=f"delivery withheld from the subscriber and acked upstream ({status})")
                return True
        return False

    # -- duplicate_after_ack --------------------------------------------------------------
    def _after_ack(self, ack_ids: list[str], client: str) -> None:
        """duplicate_after_ack: after a successful ack (the call answered OK), the layer delivers the
        message again on an open stream of its subscription, under an ack id of its own."""
        for a in ack_ids:
            seen = self.acks.get(a)
            if seen is None:
                continue
            for e in self._entries("duplicate_after_ack", subscription=seen.declared):
                if e.selects(self.seed, seen.key, seen.seq) and self._once(e, seen.message_id):
                    self._expect_until(self.gap_s + 5.0)
                    timer = threading.Timer(self.gap_s, self._redeliver, args=(e, seen, client))
                    timer.daemon = True
                    timer.start()

    def _redeliver(self, e: Entry, seen: Seen, client: str) -> None:
        from google.pubsub_v1 import types

        with self.lock:
            self.counter += 1
            ack_id = f"{PLANTED_ACK_PREFIX}{self.counter}"
            streams = [s for s in self.streams if s.subscription == seen.twin and s.killed is None]
        again = types.ReceivedMessage(ack_id=ack_id, message=seen.received.message,
                                      delivery_attempt=seen.received.delivery_attempt)
        if not streams:
            self.record(e, "StreamingPull", key=seen.key, seq=seen.seq, message_ids=[seen.message_id],
                        detail="NOT applied: no open stream of the subscription")
            return
        stream = next((s for s in streams if s.client == client), streams[0])
        stream.put(types.StreamingPullResponse.serialize(types.StreamingPullResponse(received_messages=[again])))
        self.record(e, "StreamingPull", client=stream.client, key=seen.key, seq=seen.seq,
                    message_ids=[seen.message_id], detail=f"delivered again {self.gap_s:g}s after a successful ack")

    # -- ack_lie --------------------------------------------------------------------------
    def _ack_lies(self, declared: str, kept: list, client: str) -> list:
        """The ack_lie entries' acks: answered success, not forwarded (taken out of `kept`); their ack ids."""
        lied = []
        for e in self._entries("ack_lie", subscription=declared):
            for a in list(kept):
                seen = self.acks.get(a)
                if seen and e.selects(self.seed, seen.key, seen.seq) and self._once(e, seen.message_id):
                    kept.remove(a)
                    lied.append(a)
                    self.record(e, "Acknowledge", client=client, key=seen.key, seq=seen.seq,
                                message_ids=[seen.message_id], detail="answered success without forwarding the ack")
                    self._expect_until(self.deadlines.get(seen.twin, 600) + 5.0)
        return lied

    # -- swap -----------------------------------------------------------------------------
    def _swap(self, stream, seen: Seen):
        """swap n and n+1 of a key: n is held until n+1 comes ("hold"), then n+1 goes first and n after it
        (returned, put on the stream `gap_s` later); n+1 not within SWAP_WAIT_S: n is released alone (recorded as not applied)."""
        for e in self._entries("swap", subscription=seen.declared):
            if seen.key != e.key:
                continue
            slot = (stream.subscription, e.key)
            with self.lock:
                held = self.swaps.get(slot)
                if seen.seq == e.seq and held is None and (e.index, "held") not in self.done:
                    self.done.add((e.index, "held"))
                    self.swaps[slot] = (e, seen, time.monotonic())
                    threading.Timer(SWAP_WAIT_S, self._release, args=(stream, slot)).start()
                    return "hold"
                if held is not None and seen.seq == e.seq + 1:
                    del self.swaps[slot]
                else:
                    continue
            _, first, _ = held
            self.record(e, "StreamingPull", client=stream.client, key=e.key, seq=e.seq,
                        message_ids=[first.message_id, seen.message_id],
                        detail=f"seq {e.seq + 1} delivered before seq {e.seq}")
            return first.received
        return None

    def _release(self, stream, slot) -> None:
        from google.pubsub_v1 import types

        with self.lock:
            held = self.swaps.pop(slot, None)
        if held is None:
            return
        e, first, _ = held
        stream.put(types.StreamingPullResponse.serialize(types.StreamingPullResponse(received_messages=[first.received])))
        self.record(e, "StreamingPull", client=stream.client, key=e.key, seq=e.seq, message_ids=[first.message_id],
                    detail=f"NOT applied: seq {e.seq + 1} did not come within {SWAP_WAIT_S:g}s; seq {e.seq} released")

    def _deliver_later(self, stream, held: list) -> None:
        """Each `seq` a swap held, put on the stream `gap_s` after the response that carried its seq+1."""
        from google.pubsub_v1 import types

        for received in held:
            timer = threading.Timer(self.gap_s, stream.put, args=(types.StreamingPullResponse.serialize(
                types.StreamingPullResponse(received_messages=[received])),))
            timer.daemon = True
            timer.start()

    # -- strip_dead_letter_attributes -----------------------------------------------------
    def _strip(self, stream, seen: Seen) -> bool:
        attributes = seen.received.message.attributes
        if DL_SOURCE_SUBSCRIPTION not in attributes:
            return False
        for e in self._entries("strip_dead_letter_attributes", subscription=seen.declared):
            if e.selects(self.seed, seen.key, seen.seq):
                source = attributes[DL_SOURCE_SUBSCRIPTION]
                source = self.twins.get(source) or self.twins.get(_twin_path(source, self.twins)) or source
                for name in [n for n in attributes if n.startswith(DL_PREFIX)]:
                    del attributes[name]
                self.record(e, "StreamingPull", client=stream.client, key=seen.key, seq=seen.seq,
                            message_ids=[seen.message_id], subscription=source, dead_letter_drain=seen.declared,
                            detail=f"dead-letter attributes stripped on {seen.declared}")
                return True
        return False


def _twin_path(source: str, twins: dict) -> str:
    """A dead-letter source named by its short name (the emulator does): the twin path ending with it."""
    return next((path for path in twins if path.rsplit("/", 1)[-1] == source.rsplit("/", 1)[-1]), source)
