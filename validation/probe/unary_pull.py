"""The crashing subscriber task's reads: unary Pulls, a few messages per twin at a time, round after round
(`pull_rounds`), each message handed over as a `PulledMessage`, the part of the streaming client's `Message` the
task's callback uses. `ProbeSubscriber.pull_until_crash` decides when the task dies."""

from __future__ import annotations

import time

from .clients import PULL_WORKERS, UNARY_PULL_TIMEOUT_S


class PulledMessage:
    """A message from a unary `Pull`, with the part of the streaming client's `Message` the callback uses.

    Acks and nacks are unary `Acknowledge` / `ModifyAckDeadline(0)` calls; their futures are complete."""

    def __init__(self, client, subscription: str, received, received_at: float):
        """`received_at`: when the Pull that returned it answered (time.time()), the receipt the row records."""
        self._client = client
        self._subscription = subscription
        message = received.message
        self.message_id = message.message_id
        self.attributes = message.attributes
        self.publish_time = message.publish_time
        self.ordering_key = message.ordering_key
        self.ack_id = received.ack_id
        self.delivery_attempt = received.delivery_attempt or None  # as the streaming Message: None for 0
        self._received_timestamp = received_at

    def _call(self, call):
        from concurrent.futures import Future

        future = Future()
        try:
            call()
            future.set_result(None)
        except Exception as err:  # noqa: BLE001 - the outcome is the evidence
            future.set_exception(err)
        return future

    def ack_with_response(self):
        return self._call(lambda: self._client.acknowledge(subscription=self._subscription, ack_ids=[self.ack_id],
                                                           timeout=60))

    def nack_with_response(self):
        return self.modify_ack_deadline_with_response(0)

    def modify_ack_deadline_with_response(self, seconds: int):
        return self._call(lambda: self._client.modify_ack_deadline(
            subscription=self._subscription, ack_ids=[self.ack_id], ack_deadline_seconds=seconds, timeout=60))

    def ack(self) -> None:
        self.ack_with_response()

    def drop(self) -> None:
        pass  # no client-side lease to release


def pull_rounds(twins, clients: dict, batch: int, *, going, deliver, after_round, note) -> None:
    """Pull every twin once a round, `batch` messages each, while `going()`; hand each message to
    `deliver(twin, message)`, call `after_round()` once the whole round is handed over; `note(line)` says what failed.

    A streaming pull would take (and, dead, hold) the whole backlog where the target ignores the stream's flow control
    (the emulator does), and all of it would wait for its ack deadline. The twins are pulled side by side (at most
    PULL_WORKERS at once), each call cut at UNARY_PULL_TIMEOUT_S: one after another, a target slow to answer costs the
    whole timeout per twin (seen at 100 topics, the emulator busy with the other tasks' 600 streams: 5 s a twin,
    minutes a round, nothing read). A call cut by its deadline is counted, noted once, and pulled again.
    """
    from concurrent.futures import ThreadPoolExecutor

    from google.api_core import exceptions

    unanswered = 0  # Pulls the target did not answer within the call's deadline

    def pull(twin):
        client = clients[twin.consumer_endpoint]
        try:
            response = client.pull(subscription=twin.path, max_messages=batch, return_immediately=True,
                                   timeout=UNARY_PULL_TIMEOUT_S, retry=None)
            # when it answered: the round hands its messages over only once every twin's Pull answered, and
            # the target's deadline runs from its answer, not from then (seen 1.25 s apart in a loaded test run)
            return twin, client, response, time.time()
        except exceptions.DeadlineExceeded:
            return twin, client, None, None
        except exceptions.GoogleAPICallError as err:
            note(f"unary Pull on {twin.declared_name} (probe twin {twin.path.rsplit('/', 1)[-1]}) "
                 f"failed: {type(err).__name__}: {str(err)[:200]}")
            return twin, client, (), None

    with ThreadPoolExecutor(max_workers=max(1, min(PULL_WORKERS, len(twins))),
                            thread_name_prefix="probe-unary-pull") as pool:
        while going():
            got = 0
            for twin, client, response, answered in pool.map(pull, twins):
                if response is None:
                    unanswered += 1
                    continue
                for received in getattr(response, "received_messages", ()):
                    got += 1
                    deliver(twin, PulledMessage(client, twin.path, received, answered))
            # the whole round first: a message pulled and not yet handed to the callback would be held by the
            # dead task unrecorded, at its subscription's full deadline (the callback records it as held)
            after_round()
            if not got:
                time.sleep(0.05)
    if unanswered:
        note(f"unary Pull: {unanswered} calls not answered within {UNARY_PULL_TIMEOUT_S} s (DeadlineExceeded; "
             "each twin was pulled again the next round)")
