"""Push subscriptions, probed: a receiver run by the probe answers each push per the fault plan.

A declared push subscription gets a push twin (pubsubguard.validation.probe.twins) whose endpoint is this run's
receiver: `http://<loopback receiver>/push/<twin>` on the emulator, `<--push-receiver URL>/push/<twin>`
on Google Cloud (a URL the service can reach that forwards to the receiver's loopback port; without
one, push subscriptions are `not_tested` with that reason). The receiver is `pubsubguard.core.push_receiver`'s
`PushReceiver` (an HTTP server on loopback) with an answer per push:

- the push becomes a delivery row of the same shape as a pulled one (pubsubguard.validation.evidence.records), recorded
  by the pull subscriber's own code (`pubsubguard.validation.probe.subscriber.ProbeSubscriber`: the same faults, poison and
  dead-letter handling, the same row), through a message adapter whose ack is the HTTP answer;
- ack -> 204, nack (fault or poison) -> 500, expire -> no answer until the ack deadline (+ margin) has
  passed (Pub/Sub counts the push as unanswered and redelivers it), then 204 (recorded `late_ack`, as
  the pull subscriber's ack with a stale ack id; the run ending first: `expire`).

Ordering, exactly-once, dead-lettering and completeness are then checked on these rows like on
pulled ones. The crash fault does not apply to push (the receiver runs in the driver).
"""

from __future__ import annotations

import base64
import json
import threading
import time
from datetime import datetime
from typing import TYPE_CHECKING

from pubsubguard.core.declared import short_name

from .subscriber import ProbeSubscriber, SubscriberSpec

if TYPE_CHECKING:
    from .twins import TwinSpec

ACK_STATUS, NACK_STATUS, LATE_STATUS = 204, 500, 204


class _Pushed:
    """A push as the pull subscriber's code sees a message: its ack/nack set the HTTP answer."""

    def __init__(self, body: dict, received: float):
        message = body.get("message") or {}
        self.message_id = message.get("messageId") or message.get("message_id") or ""
        self.attributes = message.get("attributes") or {}
        published = message.get("publishTime") or message.get("publish_time")
        self.publish_time = datetime.fromisoformat(published.replace("Z", "+00:00")) if published else None
        self.ordering_key = message.get("orderingKey") or ""
        self.data = base64.b64decode(message.get("data") or "")
        self.delivery_attempt = body.get("deliveryAttempt") or None
        self.ack_id = f"push:{body.get('subscription', '')}:{self.message_id}:{received}"
        self._received_timestamp = received
        self.status: int | None = None
        self.answered = threading.Event()

    def _answer(self, status: int):
        from concurrent.futures import Future

        self.status = status
        self.answered.set()
        future = Future()
        future.set_result(None)
        return future

    def ack_with_response(self):
        return self._answer(ACK_STATUS)

    def nack_with_response(self):
        return self._answer(NACK_STATUS)

    def ack(self) -> None:
        self.ack_with_response()

    def drop(self) -> None:
        pass  # held: answered by `PushSubscriber.late_ack` once the deadline has passed


class PushSubscriber(ProbeSubscriber):
    """The push twins' subscriber: the pull subscriber's decisions, answered over HTTP."""

    def __init__(self, spec: SubscriberSpec):
        super().__init__(spec)
        self.by_name = {short_name(t.path): t for t in spec.twins}
        self.pending: dict[str, _Pushed] = {}

    def answer(self, twin_name: str, body: bytes) -> int:
        """The receiver's answer to one push (blocks while the delivery is held to expire)."""
        twin = self.by_name.get(twin_name)
        if twin is None:
            return 404
        message = _Pushed(json.loads(body or b"{}"), time.time())
        with self.lock:
            self.pending[message.ack_id] = message
        self.callback(twin, message)
        message.answered.wait(twin.ack_deadline_s + self.spec.expire_margin_s + 5)
        with self.lock:
            self.pending.pop(message.ack_id, None)
        return message.status or LATE_STATUS

    def late_ack(self, twin: TwinSpec, ack_id: str, row: dict) -> None:
        """A held push: its deadline has passed unanswered; answer 204 now, as the pull subscriber acks
        with the stale ack id (`late_ack`). Whether the target took it as an ack, the deliveries that
        follow (or not) show: the emulator does (docs/emulator.md), Pub/Sub redelivers."""
        with self.lock:
            if self.held.pop(id(row), None) is None:
                return
            message = self.pending.get(ack_id)
        row["action"] = "late_ack"
        row["ack_time_us"] = int(time.time() * 1_000_000)
        row["ack_result"] = "success" if message is not None else "other"  # "other": the request was gone
        self.writer.add(row)
        if message is not None:
            message._answer(LATE_STATUS)

    def close(self) -> None:
        for timer in self.timers:
            timer.cancel()
        with self.lock:
            for row in self.held.values():  # the run ended while held
                row["action"] = "expire"
                self.writer.add(row)
            self.held.clear()
            pending = list(self.pending.values())
        for message in pending:
            message._answer(LATE_STATUS)
        self.writer.close()
