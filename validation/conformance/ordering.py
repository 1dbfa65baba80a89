"""Conformance scenarios on ordering: a nacked or expired message of a key comes again with the messages after
it, an ordered exactly-once redelivery waits for the outstanding one, ordering cannot be changed later
(docs/pubsub-facts.md § Ordering)."""

from __future__ import annotations

import time

from .harness import (
    ACK_DEADLINE_S, DELIVERY_WINDOW_S, DOC_EXACTLY_ONCE, DOC_ORDERING, FACTS_DOC, HOLDS, INCONCLUSIVE, ScenarioClient,
    ScenarioEnded, ScenarioInterrupted, VIOLATED, one_line, request_fields, scenario, seq_of,
)


# ---------------------------------------------------------------------------------------- ordering
ORDER_SOURCE = (f"{FACTS_DOC} § Ordering (seeds 000/001/004): when message n of a key comes again, every "
                f"message after it on that key comes again too, those already acked as well (the key starts over from n). {DOC_ORDERING}")


def _ordered_redelivery(client: ScenarioClient, nack: bool) -> tuple[str, str]:
    topic = client.create_topic("topic")
    subscription = client.create_subscription("sub", topic, enable_message_ordering=True,
                                              ack_deadline_seconds=ACK_DEADLINE_S)
    for seq in range(4):
        client.publish(topic, str(seq).encode(), ordering_key="A")
    first = client.pull_until(subscription, lambda got: {seq_of(m) for m in got} >= {"0", "1", "2", "3"},
                              DELIVERY_WINDOW_S)
    order = [seq_of(m) for m in first]
    if set(order) < {"0", "1", "2", "3"}:
        raise ScenarioEnded(INCONCLUSIVE, f"the first delivery of 0..3 was incomplete within {DELIVERY_WINDOW_S:g} s: {order}")
    if order[:4] != ["0", "1", "2", "3"]:
        return VIOLATED, f"the first delivery of key A was not in publish order: {order}"
    by_seq = {seq_of(m): m for m in first}
    for seq in ("0", "2", "3"):
        client.acknowledge(subscription, [by_seq[seq].ack_id])
    if nack:
        err = client.nack(subscription, [by_seq["1"].ack_id])
        if err is not None:
            raise ScenarioEnded(INCONCLUSIVE, f"the nack of 1 failed: {one_line(err)}")
        window = DELIVERY_WINDOW_S
        how = "nacked"
    else:
        client.note(f"1 is neither acked nor nacked: its {ACK_DEADLINE_S} s deadline runs out")
        window = ACK_DEADLINE_S + DELIVERY_WINDOW_S
        how = "left to expire"
    settled = time.monotonic()
    arrivals: list[float] = []

    def on_redelivery(message) -> None:
        arrivals.append(time.monotonic() - settled)
        client.acknowledge(subscription, [message.ack_id])  # at once: Pub/Sub keeps one batch per key outstanding

    redelivered = client.pull_until(subscription, lambda got: "3" in [seq_of(m) for m in got], window,
                                    on_message=on_redelivery)
    again = [seq_of(m) for m in redelivered]
    if not again:
        return INCONCLUSIVE, f"1 was {how}, and nothing was redelivered within {window:g} s"
    how += f" (first redelivery {arrivals[0]:.1f} s later)"
    if again[0] != "1":
        return VIOLATED, f"1 was {how}; the redelivery began with {again[0]}, before 1: {again}"
    if again[:3] == ["1", "2", "3"]:
        return HOLDS, f"1 was {how}; redelivered {again}: the key rewound to 1 and went on in order"
    if again == ["1"]:
        return VIOLATED, (f"1 was {how}; 1 was redelivered alone and 2, 3 (acked) were not redelivered within "
                          f"{window:g} s: no rewind")
    return VIOLATED, f"1 was {how}; the redelivery was {again}, not 1, 2, 3 in order"


@scenario("ordered-nack-redelivers-in-order",
          "ordering: key A, 0..3 received, 0, 2, 3 acked and 1 nacked: redelivered 1, 2, 3 in order",
          ORDER_SOURCE)
def ordered_nack_redelivers_in_order(client: ScenarioClient) -> tuple[str, str]:
    return _ordered_redelivery(client, nack=True)


@scenario("ordered-expiry-redelivers-in-order",
          "ordering: key A, 0..3 received, 0, 2, 3 acked and 1 left to expire: redelivered 1, 2, 3 in order",
          ORDER_SOURCE)
def ordered_expiry_redelivers_in_order(client: ScenarioClient) -> tuple[str, str]:
    return _ordered_redelivery(client, nack=False)


OUTSTANDING_S = 60  # the deadline the held redelivery is given: far beyond the other messages' expiry


@scenario("ordered-eod-no-redelivery-while-outstanding",
          "ordering + exactly-once: key A, 0..3 received, 0 acked, 1 nacked; its redelivery held (deadline "
          f"{OUTSTANDING_S} s) while 2, 3 expire: 1 is not redelivered again before its deadline",
          f"{FACTS_DOC} § Exactly-once delivery (seed 002): no redelivery while a message is outstanding (until its "
          f"ack deadline expires or it is nacked); § Ordering: a redelivery of message n rewinds n and the *later* "
          f"messages of the key. {DOC_EXACTLY_ONCE} {DOC_ORDERING}")
def ordered_eod_no_redelivery_while_outstanding(client: ScenarioClient) -> tuple[str, str]:
    topic = client.create_topic("topic")
    subscription = client.create_subscription("sub", topic, enable_message_ordering=True,
                                              enable_exactly_once_delivery=True, ack_deadline_seconds=ACK_DEADLINE_S)
    for seq in range(4):
        client.publish(topic, str(seq).encode(), ordering_key="A")
    first = client.pull_until(subscription, lambda got: {seq_of(m) for m in got} >= {"0", "1", "2", "3"},
                              DELIVERY_WINDOW_S)
    by_seq = {seq_of(m): m for m in first}
    if set(by_seq) < {"0", "1", "2", "3"}:
        raise ScenarioEnded(INCONCLUSIVE, f"the first delivery of 0..3 was incomplete within {DELIVERY_WINDOW_S:g} s: "
                                    f"{[seq_of(m) for m in first]}")
    client.acknowledge(subscription, [by_seq["0"].ack_id])
    err = client.nack(subscription, [by_seq["1"].ack_id])
    if err is not None:
        raise ScenarioEnded(INCONCLUSIVE, f"the nack of 1 failed: {one_line(err)}")
    window = ACK_DEADLINE_S + DELIVERY_WINDOW_S
    redelivered = client.pull_until(subscription, lambda got: "1" in [seq_of(m) for m in got], window)
    if "1" not in [seq_of(m) for m in redelivered]:
        raise ScenarioEnded(INCONCLUSIVE, f"1 was nacked and not redelivered within {window:g} s")
    held = [m for m in redelivered if seq_of(m) == "1"][-1]
    err = client.modify_ack_deadline(subscription, [held.ack_id], OUTSTANDING_S)
    if err is not None:
        raise ScenarioEnded(INCONCLUSIVE, f"the ModifyAckDeadline({OUTSTANDING_S} s) of 1's redelivery failed: {one_line(err)}")
    held_at = time.monotonic()
    client.note(f"1 redelivered with {[seq_of(m) for m in redelivered]}; its delivery is held ({OUTSTANDING_S} s "
                f"deadline, accepted), the others are left to expire ({ACK_DEADLINE_S} s)")
    later = client.pull_until(subscription, lambda got: "1" in [seq_of(m) for m in got], window)
    seen = [seq_of(m) for m in later]
    if "1" in seen:
        return VIOLATED, (f"1 was nacked and redelivered ({[seq_of(m) for m in redelivered]}); that delivery was held "
                          f"with a {OUTSTANDING_S} s deadline the target accepted, yet 1 was delivered again "
                          f"{time.monotonic() - held_at:.1f} s later, with {seen}: a redelivery while outstanding "
                          "(the nacked message was treated as later than 2, 3 and rewound with them)")
    if not seen:
        return INCONCLUSIVE, (f"1's redelivery was held ({OUTSTANDING_S} s deadline) and nothing was redelivered within "
                              f"{window:g} s: the rewind of the expired 2, 3 was not exercised")
    return HOLDS, (f"1's redelivery was held ({OUTSTANDING_S} s deadline); 2, 3 expired and came back as {seen}, "
                   "without 1")


@scenario("ordering-immutable",
          "ordering is fixed at creation: an update of enable_message_ordering is refused",
          f"{FACTS_DOC} § Ordering: ordering is a subscription setting fixed at creation (update is rejected). "
          f"{DOC_ORDERING}")
def ordering_immutable(client: ScenarioClient) -> tuple[str, str]:
    from google.pubsub_v1 import types

    topic = client.create_topic("topic")
    subscription = client.create_subscription("sub", topic, enable_message_ordering=True)
    request = {"subscription": types.Subscription(name=subscription, enable_message_ordering=False),
               "update_mask": {"paths": ["enable_message_ordering"]}}
    try:
        client.call("UpdateSubscription", {"subscription": {"name": subscription, "enable_message_ordering": False},
                                           "update_mask": ["enable_message_ordering"]},
                    lambda: client.subscriber.update_subscription(request=request, timeout=30, retry=None),
                    request_fields)
        refused = None
    except ScenarioInterrupted:
        raise
    except Exception as err:  # noqa: BLE001 - the refusal is the expected answer
        refused = err
    stored = client.get_subscription(subscription).enable_message_ordering
    if refused is None:
        return VIOLATED, f"the update to enable_message_ordering=false was accepted; the target now holds {stored}"
    if not stored:
        return VIOLATED, f"the update was refused ({one_line(refused)}) but the target holds ordering off"
    return HOLDS, f"the update was refused ({one_line(refused)}); ordering still on"
