"""Conformance scenarios on exactly-once delivery: a stale or superseded ack ID is refused, an acked message
is not delivered again (docs/pubsub-facts.md § Exactly-once delivery)."""

from __future__ import annotations

import time

from .harness import (
    ACK_DEADLINE_S, DELIVERY_WINDOW_S, DOC_EXACTLY_ONCE, EXPIRY_MARGIN_S, FACTS_DOC, HOLDS, INCONCLUSIVE,
    ScenarioClient, ScenarioEnded, VIOLATED, ack_status, error_record, one_line, scenario,
)


# ------------------------------------------------------------------------------------ exactly-once
EOD_SOURCE = (f"{FACTS_DOC} § Exactly-once delivery (seed 002): only the latest ack ID of a message is valid; an "
              f"acknowledge with an expired or superseded ack ID fails with INVALID_ARGUMENT. {DOC_EXACTLY_ONCE}")


def _eod_subscription(client: ScenarioClient) -> tuple[str, str]:
    topic = client.create_topic("topic")
    return topic, client.create_subscription("sub", topic, enable_exactly_once_delivery=True,
                                             ack_deadline_seconds=ACK_DEADLINE_S)


def first_delivery(client: ScenarioClient, subscription: str, what: str):
    got = client.pull_until(subscription, bool, DELIVERY_WINDOW_S)
    if not got:
        raise ScenarioEnded(INCONCLUSIVE, f"{what} was not delivered within {DELIVERY_WINDOW_S:g} s")
    return got[0]


def _ack_verdict(err: Exception | None, situation: str) -> tuple[str, str]:
    status = ack_status(err)
    if status == "invalid_ack_id":
        info = error_record(err)
        why = ", ".join([info.get("reason", "")] + sorted(set(info.get("metadata", {}).values()))).strip(", ")
        return HOLDS, f"{situation}: the target answered {info['code']}" + (f" ({why})" if why else "")
    if status == "success":
        return VIOLATED, f"{situation}: the target answered OK (accepted an ack id that is no longer valid)"
    return INCONCLUSIVE, f"{situation}: the target answered neither OK nor an invalid-ack-id error: {one_line(err)}"


@scenario("eod-stale-ack-rejected",
          "exactly-once: an ack with an ack id whose deadline passed (no pull outstanding) is rejected",
          EOD_SOURCE)
def eod_stale_ack_rejected(client: ScenarioClient) -> tuple[str, str]:
    topic, subscription = _eod_subscription(client)
    client.publish(topic, b"stale")
    message = first_delivery(client, subscription, "the message")
    received_at = time.monotonic()
    client.note(f"no call for {ACK_DEADLINE_S + EXPIRY_MARGIN_S:g} s: the {ACK_DEADLINE_S} s ack deadline passes")
    client.sleep(ACK_DEADLINE_S + EXPIRY_MARGIN_S)
    waited = time.monotonic() - received_at
    err = client.acknowledge(subscription, [message.ack_id])
    return _ack_verdict(err, f"ack {waited:.1f} s after the delivery (deadline {ACK_DEADLINE_S} s)")


@scenario("eod-superseded-ack-rejected",
          "exactly-once: after a redelivery, an ack with the earlier delivery's ack id is rejected",
          EOD_SOURCE)
def eod_superseded_ack_rejected(client: ScenarioClient) -> tuple[str, str]:
    topic, subscription = _eod_subscription(client)
    client.publish(topic, b"superseded")
    first = first_delivery(client, subscription, "the message")
    err = client.nack(subscription, [first.ack_id])
    if err is not None:
        raise ScenarioEnded(INCONCLUSIVE, f"the nack that should cause a redelivery failed: {one_line(err)}")
    second = first_delivery(client, subscription, "the redelivery after a nack")
    if second.message.message_id != first.message.message_id:
        raise ScenarioEnded(INCONCLUSIVE, f"expected a redelivery of {first.message.message_id}, "
                                    f"got message {second.message.message_id}")
    if second.ack_id == first.ack_id:
        raise ScenarioEnded(INCONCLUSIVE, "the redelivery carried the same ack id, so no ack id was superseded")
    err = client.acknowledge(subscription, [first.ack_id])
    verdict = _ack_verdict(err, "ack with the first delivery's ack id after the redelivery")
    current = client.acknowledge(subscription, [second.ack_id])
    return verdict[0], verdict[1] + f"; the current ack id: {ack_status(current)}"


@scenario("eod-no-redelivery-after-ack",
          "exactly-once: a message acked successfully within its deadline is never redelivered",
          f"{FACTS_DOC} § Exactly-once delivery (seed 002): no redelivery after a successful ack. {DOC_EXACTLY_ONCE}")
def eod_no_redelivery_after_ack(client: ScenarioClient) -> tuple[str, str]:
    import queue

    from google.cloud import pubsub_v1

    from ..probe.acks import future_ack_result

    topic, subscription = _eod_subscription(client)
    deliveries: queue.Queue = queue.Queue()

    def callback(message):
        client.note(f"streaming pull delivered message {message.message_id} (delivery_attempt "
                    f"{message.delivery_attempt}, data {message.data.decode(errors='replace')!r})")
        deliveries.put(message)

    with client.streaming(subscription, callback, flow_control=pubsub_v1.types.FlowControl(max_messages=10)):
        message_id = client.publish(topic, b"acked-once")
        try:
            message = deliveries.get(timeout=DELIVERY_WINDOW_S)
        except queue.Empty:
            raise ScenarioEnded(INCONCLUSIVE, f"the message was not delivered within {DELIVERY_WINDOW_S:g} s") from None
        result = future_ack_result(message.ack_with_response())
        client.note(f"ack_with_response() of message {message.message_id}: {result}")
        if result != "success":
            raise ScenarioEnded(INCONCLUSIVE, f"the ack within the deadline did not succeed ({result}), so the guarantee "
                                        "for successful acks was not exercised")
        watch = ACK_DEADLINE_S + EXPIRY_MARGIN_S + 2
        client.sleep(watch)
    again = [m for m in _drain_queue(deliveries) if m.message_id == message_id]
    if again:
        return VIOLATED, (f"acked successfully, then redelivered {len(again)} time(s) within {watch:g} s "
                          f"(delivery_attempt {[m.delivery_attempt for m in again]})")
    return HOLDS, f"acked successfully with ack_with_response(); not redelivered in the {watch:g} s after the ack " \
                  f"(more than the {ACK_DEADLINE_S} s deadline)"


def _drain_queue(q) -> list:
    items = []
    while not q.empty():
        items.append(q.get_nowait())
    return items
