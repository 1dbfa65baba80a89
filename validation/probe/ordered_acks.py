"""The acks of deliveries on an ordered exactly-once subscription, sent by the probe itself (`OrderedAcks`), so that
no ordering key waits in the client library on an ack the target refuses for now.

The client library (google-cloud-pubsub 2.x) hands a key's next message to the callback only once the one before it
is settled, and with exactly-once an ack settles only when the target took it or refused it for good. An ack
answered `TRANSIENT_FAILURE_UNORDERED_ACK_ID` (the target holds an earlier message of the key outstanding: acks must
come in order) is retried in the library's background, its waits drawn up to 1 s doubling to 10 min, the message kept
leased (its lease extended, so the target never redelivers it). When the earlier message the target waits for is in
the same client, queued behind it (its redelivery after the probe held or nacked it), neither moves again: at 50x
the probe's client held 1,261 messages of orders-ordered-exactly-once, 1,145 behind their key, through the whole
final read, their acks retried for minutes (issue 64).

So the probe sends those acks itself: one thread gathers what is due and sends it in one unary `Acknowledge` per
subscription, without retry (the target answers each ack id: `acks.acknowledge_answers`), as the library batches
its own; once an ack is answered its message leaves the library's lease management (`Message.drop()`: the key's
next message comes to the probe; after the answer, so a key's acks still reach the target in order). A final answer
is the row's `ack_result`; one that is not final is sent again, `RETRY_FIRST_S` later doubling up to `RETRY_MAX_S`,
until it is -- the row is written then -- while the key moves on. Nothing extends the lease of
a message whose ack is retried: one the target keeps refusing comes back after its deadline, and its stale ack id is
then refused for good (`invalid_ack_id`), as the target decides."""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from .acks import acknowledge_answers

ACK_TIMEOUT_S = 30.0  # one Acknowledge call is cut after this long (DEADLINE_EXCEEDED: sent again)
RETRY_FIRST_S, RETRY_MAX_S = 0.5, 4.0
BATCH = 1000  # ack ids in one Acknowledge at most (the client library's own bound)


def held_by_the_library(message) -> bool:
    """Whether the client library would hold `message`'s ordering key until its ack is taken: a streaming delivery
    with an ordering key on a subscription the library treats as exactly-once (read from the message, as the library
    decides it for its own ack; False for the probe's unary Pull and push deliveries, which it never holds)."""
    exactly_once = getattr(message, "_exactly_once_delivery_enabled_func", None)
    return bool(getattr(message, "ordering_key", "")) and callable(exactly_once) and bool(exactly_once())


@dataclass(order=True)
class _Ack:
    due: float
    order: int
    client: object = field(compare=False)
    subscription: str = field(compare=False)
    ack_id: str = field(compare=False)
    row: dict = field(compare=False)
    message: object = field(compare=False)  # until its first answer: then dropped from the library's lease
    wait_s: float = field(compare=False, default=RETRY_FIRST_S)
    reason: str | None = field(compare=False, default=None)  # the latest answer that was not final


class OrderedAcks:
    """`ack(...)` queues one delivery's ack; `stop()` ends the sending and returns what was not answered for good.
    `record(row)` writes a row whose ack was answered for good; `transient(subscription, reason)` is told of each
    answer that was not."""

    def __init__(self, record: Callable[[dict], None], transient: Callable[[str, str], None]):
        self.record = record
        self.transient = transient
        self._due: list[_Ack] = []
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._stopped = False
        self._thread = threading.Thread(target=self._send_due, name="probe-ordered-acks", daemon=True)
        self._thread.start()

    def ack(self, client, subscription: str, message, row: dict) -> None:
        """Queue the ack of `message` (a streaming delivery `held_by_the_library`); it is sent at once."""
        with self._changed:
            heapq.heappush(self._due, _Ack(time.monotonic(), next(self._order), client, subscription, message.ack_id,
                                           row, message))
            self._changed.notify()

    def _send_due(self) -> None:
        while True:
            with self._changed:
                while not self._stopped and (not self._due or self._due[0].due > time.monotonic()):
                    self._changed.wait(self._due[0].due - time.monotonic() if self._due else None)
                if self._stopped:
                    return
                batches: dict[tuple, list[_Ack]] = {}
                while self._due and self._due[0].due <= time.monotonic():
                    ack = heapq.heappop(self._due)
                    batch = batches.setdefault((id(ack.client), ack.subscription), [])
                    batch.append(ack)
                    if len(batch) == BATCH:
                        break
            for batch in batches.values():
                self._send(batch)

    def _send(self, batch: list[_Ack]) -> None:
        """One Acknowledge of `batch` (one subscription's); each ack's answer settles it or sends it again later."""
        ack_ids = [ack.ack_id for ack in batch]
        error = None
        try:
            batch[0].client.acknowledge(subscription=batch[0].subscription, ack_ids=ack_ids, timeout=ACK_TIMEOUT_S,
                                        retry=None)
        except Exception as err:  # noqa: BLE001 - the target's answer is the evidence
            error = err
        answers = acknowledge_answers(error, ack_ids)
        for ack in batch:
            if ack.message is not None:
                ack.message.drop()  # answered: the key's next message may come
                ack.message = None
            result, reason = answers[ack.ack_id]
            if reason is not None:
                self.transient(ack.subscription, reason)
                with self._changed:
                    if not self._stopped:
                        ack.due, ack.order, ack.reason = time.monotonic() + ack.wait_s, next(self._order), reason
                        ack.wait_s = min(2 * ack.wait_s, RETRY_MAX_S)
                        heapq.heappush(self._due, ack)
                        continue
            ack.row["ack_result"] = result  # final, or the task ended while it was sent again
            self.record(ack.row)

    def stop(self, wait_s: float = 5.0) -> list[tuple[dict, str | None]]:
        """End the sending (an Acknowledge under way is waited for up to `wait_s`): the rows whose ack was not answered
        for good, each with the latest reason (None: never sent), their `ack_result` `other` (neither taken nor refused
        for good)."""
        with self._changed:
            self._stopped = True
            self._changed.notify()
        self._thread.join(timeout=wait_s)
        with self._changed:
            left, self._due = sorted(self._due), []
        for ack in left:
            ack.row["ack_result"] = "other"
        return [(ack.row, ack.reason) for ack in left]
