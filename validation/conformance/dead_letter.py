"""Conformance scenarios on dead-lettering: a message nacked every time is forwarded to the dead-letter topic after
about max_delivery_attempts (ordered or not, and after a late ack during a retry backoff), and what a subscription
that stopped at a poison message does to its other keys and to other subscriptions (docs/pubsub-facts.md
§ Dead-letter topics, § Ordering: with a dead-letter topic only the order of dead-lettered messages is best effort).
On Google Cloud the Pub/Sub service agent is granted its two roles first (`_grant_service_agent`)."""

from __future__ import annotations

import threading
import time
from collections import Counter

from pubsubguard.policies import pubsub_facts as facts

from .harness import (
    ACK_DEADLINE_S, DELIVERY_WINDOW_S, DOC_DEAD_LETTER, DOC_ORDERING, EXPIRY_MARGIN_S, FACTS_DOC, FORWARD_WINDOW_S,
    HOLDS, INCONCLUSIVE, PULL_TIMEOUT_S, ScenarioClient, ScenarioEnded, VIOLATED, scenario,
)
from .redelivery import BACKOFF_WINDOW_S, LATE_ACK_BACKOFF_S, deliveries_of, late_ack_during_backoff, retry_policy


@scenario("dead-letter-after-max-attempts",
          "a message nacked every time is forwarded to the dead-letter topic after about max_delivery_attempts, "
          "with delivery_attempt counts and the CloudPubSubDeadLetterSource* attributes",
          f"{FACTS_DOC} § Dead-letter topics: attempts 5..100 counted best effort; forwarded messages carry "
          f"CloudPubSubDeadLetterSourceDeliveryCount, …SourceSubscription, …SourceSubscriptionProject, "
          f"…SourceTopicPublishTime. {DOC_DEAD_LETTER}")
def dead_letter_after_max_attempts(client: ScenarioClient) -> tuple[str, str]:
    return _dead_letter_after_max_attempts(client, ordered=False)


@scenario("dead-letter-ordered-after-max-attempts",
          "on an ordered subscription too, a message nacked every time is forwarded to the dead-letter topic after "
          "about max_delivery_attempts (only its order relative to the key's other messages is best effort)",
          f"{FACTS_DOC} § Ordering: with a dead-letter topic the rewind may not hold and order may not be kept for "
          f"dead-lettered messages (best effort); § Dead-letter topics. {DOC_DEAD_LETTER}")
def dead_letter_ordered_after_max_attempts(client: ScenarioClient) -> tuple[str, str]:
    return _dead_letter_after_max_attempts(client, ordered=True)


@scenario("dead-letter-after-late-ack",
          f"dead-letter with a retry policy: after an ack of an expired redelivery, sent while its own redelivery "
          f"waits, a message nacked every time is still forwarded to the dead-letter topic after "
          f"max_delivery_attempts ({facts.MAX_DELIVERY_ATTEMPTS_MIN})",
          f"{FACTS_DOC} § Dead-letter topics: a message that could not be delivered max_delivery_attempts times is "
          f"forwarded; § Ranges and formats: the retry policy bounds the delay between deliveries. {DOC_DEAD_LETTER}")
def dead_letter_after_late_ack(client: ScenarioClient) -> tuple[str, str]:
    from google.pubsub_v1 import types

    attempts_max = facts.MAX_DELIVERY_ATTEMPTS_MIN
    topic = client.create_topic("topic")
    dead_letter = client.create_topic("dead")
    drain = client.create_subscription("drain", dead_letter)
    subscription = client.create_subscription(
        "sub", topic, ack_deadline_seconds=ACK_DEADLINE_S, retry_policy=retry_policy(*LATE_ACK_BACKOFF_S),
        dead_letter_policy=types.DeadLetterPolicy(dead_letter_topic=dead_letter, max_delivery_attempts=attempts_max))
    _grant_service_agent(client, dead_letter, subscription)
    before = late_ack_during_backoff(client, topic, subscription)
    message_id = client.publish(topic, b"poison")
    attempts: list[int] = []
    got = deliveries_of(client, subscription, message_id, DELIVERY_WINDOW_S)
    while got and len(attempts) < attempts_max + 5:
        attempts.append(got[-1].delivery_attempt)
        client.nack(subscription, [got[-1].ack_id])
        got = deliveries_of(client, subscription, message_id, BACKOFF_WINDOW_S)
    if not attempts:
        raise ScenarioEnded(INCONCLUSIVE, f"{before}; a message published then was not delivered within "
                                          f"{DELIVERY_WINDOW_S:g} s")
    forwarded = client.pull_until(drain, bool, FORWARD_WINDOW_S if len(attempts) >= attempts_max else PULL_TIMEOUT_S)
    for message in forwarded:
        client.acknowledge(drain, [message.ack_id])
    seen = f"delivery_attempt over {len(attempts)} deliveries: {attempts}"
    if forwarded and len(attempts) >= attempts_max:
        return HOLDS, f"{before}; then a message nacked every time was forwarded after {len(attempts)} deliveries ({seen})"
    if forwarded:
        return INCONCLUSIVE, f"{before}; then a message was forwarded after {len(attempts)} deliveries, fewer than " \
                             f"max_delivery_attempts {attempts_max} (scenario dead-letter-after-max-attempts judges " \
                             f"that); {seen}"
    return VIOLATED, (f"{before}; then a message nacked every time was, after nack {len(attempts)} "
                      f"(max_delivery_attempts {attempts_max}), neither delivered again within {BACKOFF_WINDOW_S:g} s "
                      f"nor forwarded: {seen}")


def _ordered_dead_lettering(client: ScenarioClient, attempts_max: int) -> tuple[str, str]:
    """A topic and its ordered subscription with a dead-letter policy (the service agent granted on Google Cloud)."""
    from google.pubsub_v1 import types

    topic = client.create_topic("topic")
    dead_letter = client.create_topic("dead")
    subscription = client.create_subscription(
        "sub", topic, ack_deadline_seconds=ACK_DEADLINE_S, enable_message_ordering=True,
        dead_letter_policy=types.DeadLetterPolicy(dead_letter_topic=dead_letter, max_delivery_attempts=attempts_max))
    _grant_service_agent(client, dead_letter, subscription)
    return topic, subscription


STALL_WINDOW_S = ACK_DEADLINE_S + DELIVERY_WINDOW_S  # beyond a redelivery of anything held, then a pull window


@scenario("ordered-dead-letter-keeps-delivering",
          "ordering + dead-letter: after a message of key A reaches max_delivery_attempts, a message of key B "
          "published afterwards is still delivered (key B was delivered before, as the control)",
          f"{FACTS_DOC} § Ordering: order is per ordering key, at-least-once still applies, and with a dead-letter "
          f"topic only the order of dead-lettered messages is best effort; § Dead-letter topics. {DOC_ORDERING} "
          f"{DOC_DEAD_LETTER}")
def ordered_dead_letter_keeps_delivering(client: ScenarioClient) -> tuple[str, str]:
    attempts_max = facts.MAX_DELIVERY_ATTEMPTS_MIN
    topic, subscription = _ordered_dead_lettering(client, attempts_max)
    poison = client.publish(topic, b"poison", ordering_key="A")
    client.publish(topic, b"B0", ordering_key="B")
    attempts: list[int] = []
    control = False
    deadline = time.monotonic() + DELIVERY_WINDOW_S * 2
    while len(attempts) < attempts_max and time.monotonic() < deadline:
        for message in client.pull(subscription):
            if message.message.message_id == poison:
                attempts.append(message.delivery_attempt)
                client.nack(subscription, [message.ack_id])
            else:
                control = control or message.message.data == b"B0"
                client.acknowledge(subscription, [message.ack_id])
    if not control:
        raise ScenarioEnded(INCONCLUSIVE, f"the control message B0 was not delivered ({len(attempts)} deliveries of A seen)")
    if len(attempts) < attempts_max:
        raise ScenarioEnded(INCONCLUSIVE, f"A was delivered {len(attempts)} times, not the {attempts_max} that reach "
                                    f"max_delivery_attempts, within {DELIVERY_WINDOW_S * 2:g} s: {attempts}")
    client.note(f"A nacked {len(attempts)} times (max_delivery_attempts {attempts_max}); now B1 on key B")
    client.publish(topic, b"B1", ordering_key="B")
    after = time.monotonic()

    def settle(message) -> None:
        if message.message.message_id == poison:
            client.nack(subscription, [message.ack_id])  # still not forwarded: nacked like before
        else:
            client.acknowledge(subscription, [message.ack_id])

    got = client.pull_until(subscription, lambda got: any(m.message.data == b"B1" for m in got), STALL_WINDOW_S,
                            on_message=settle)
    took = time.monotonic() - after
    seen = [m.message.data.decode() for m in got]
    codes = Counter(entry["error"]["code"] for entry in client.evidence if entry.get("call") == "Pull"
                    and "error" in entry and entry["at_s"] >= after - client.started)
    if "B1" in seen:
        return HOLDS, (f"after A's {len(attempts)}th nack (max_delivery_attempts {attempts_max}), B1 on key B was "
                       f"delivered within {took:.1f} s of its publish")
    why = f"; Pulls meanwhile answered {', '.join(f'{code} x{n}' for code, n in codes.most_common())}" if codes else ""
    return VIOLATED, (f"B0 (key B) was delivered before; after A's {len(attempts)}th nack (max_delivery_attempts "
                      f"{attempts_max}) B1 on key B was not delivered within {STALL_WINDOW_S:g} s "
                      f"(delivered meanwhile: {seen or 'nothing'}){why}: the subscription stopped delivering")


STALL_SETTLE_S = 1.0  # waited after the last nack before measuring the other subscription again
SPARED_BACKOFF_S = 2  # the other subscription's retry policy: 1..2 s between a nack and the redelivery
SPARED_LIMIT_S = SPARED_BACKOFF_S + EXPIRY_MARGIN_S  # the backoff, and the margin a round trip may take


@scenario("ordered-dead-letter-spares-other-subscriptions",
          "ordering + dead-letter: after a message of an ordered dead-lettering subscription reaches "
          "max_delivery_attempts, another subscription (its own topic, retry policy 1..2 s) still delivers a new "
          "message and redelivers it after a nack within the backoff, as it did before (the control)",
          f"{FACTS_DOC} § Dead-letter topics (retry policy: redelivery after a nack waits the backoff); § Ordering: "
          f"order and its dead-letter caveat are per subscription. {DOC_DEAD_LETTER} {DOC_ORDERING}",
          disturbs=True)
def ordered_dead_letter_spares_other_subscriptions(client: ScenarioClient) -> tuple[str, str]:
    from google.pubsub_v1 import types

    attempts_max = facts.MAX_DELIVERY_ATTEMPTS_MIN
    other_topic = client.create_topic("other")
    other = client.create_subscription("other-sub", other_topic, ack_deadline_seconds=ACK_DEADLINE_S,
                                       retry_policy=types.RetryPolicy(minimum_backoff={"seconds": 1},
                                                                      maximum_backoff={"seconds": SPARED_BACKOFF_S}))

    import queue

    arrivals: queue.Queue = queue.Queue()

    def callback(message) -> None:
        client.note(f"streaming pull delivered {message.data.decode(errors='replace')!r} (delivery_attempt "
                    f"{message.delivery_attempt})")
        arrivals.put((time.monotonic(), message))

    def next_of(data: bytes, window_s: float):
        deadline = time.monotonic() + window_s
        while (left := deadline - time.monotonic()) > 0:
            try:
                at, message = arrivals.get(timeout=left)
            except queue.Empty:
                break
            if message.data == data:
                return at, message
            message.ack()
        return None, None

    def timings(data: bytes, window_s: float) -> tuple[float | None, float | None]:
        """Seconds from the publish of `data` on the other subscription to its delivery, and from its nack to
        its redelivery (None: not within `window_s`)."""
        published = time.monotonic()
        client.publish(other_topic, data)
        at, message = next_of(data, window_s)
        if message is None:
            return None, None
        nacked = time.monotonic()
        message.nack()
        again, message = next_of(data, window_s)
        if message is None:
            return at - published, None
        message.ack()
        return at - published, again - nacked

    with client.streaming(other, callback):
        return _spared(client, timings, attempts_max)


def _spared(client: ScenarioClient, timings, attempts_max: int) -> tuple[str, str]:
    before = timings(b"before", DELIVERY_WINDOW_S)
    if None in before:
        raise ScenarioEnded(INCONCLUSIVE, f"the control on the other subscription was not delivered and redelivered within "
                                    f"{DELIVERY_WINDOW_S:g} s each: {before}")
    topic, subscription = _ordered_dead_lettering(client, attempts_max)
    attempts: list[int] = []
    reached = threading.Event()

    def nack_every_time(message) -> None:  # as a consumer of the ordered subscription does with a poison message
        attempts.append(message.delivery_attempt)
        message.nack()
        if len(attempts) >= attempts_max:
            reached.set()

    # A streaming pull, as the probe's subscribers: with unary Pulls alone the other subscription was not slowed.
    with client.streaming(subscription, nack_every_time):
        client.publish(topic, b"poison", ordering_key="A")
        if not reached.wait(DELIVERY_WINDOW_S * 2):
            raise ScenarioEnded(INCONCLUSIVE, f"A was delivered {len(attempts)} times, not the {attempts_max} that reach "
                                        f"max_delivery_attempts, within {DELIVERY_WINDOW_S * 2:g} s: {attempts}")
        client.sleep(STALL_SETTLE_S)
        # waited no longer than the slowest it may be (on the emulator the answer would come ~8 s later)
        after = timings(b"after", SPARED_LIMIT_S)

    def said(pair, window_s: float) -> str:
        return ", ".join(f"{what} {f'not within {window_s:g} s' if t is None else f'{t:.1f} s'}"
                         for what, t in zip(("delivered", "redelivered after the nack"), pair[:1 if pair[0] is None else 2]))

    slow = [t is None for t in after]  # not within the limit
    detail = (f"other subscription before A's {len(attempts)}th nack on the ordered one (max_delivery_attempts "
              f"{attempts_max}): {said(before, DELIVERY_WINDOW_S)}; after it: {said(after, SPARED_LIMIT_S)}")
    return (VIOLATED, detail + ": slowed") if any(slow) else (HOLDS, detail)


def _dead_letter_after_max_attempts(client: ScenarioClient, ordered: bool) -> tuple[str, str]:
    from google.pubsub_v1 import types

    attempts_max = facts.MAX_DELIVERY_ATTEMPTS_MIN
    topic = client.create_topic("topic")
    dead_letter = client.create_topic("dead")
    drain = client.create_subscription("drain", dead_letter)
    subscription = client.create_subscription(
        "sub", topic, ack_deadline_seconds=ACK_DEADLINE_S, enable_message_ordering=ordered,
        dead_letter_policy=types.DeadLetterPolicy(dead_letter_topic=dead_letter, max_delivery_attempts=attempts_max))
    _grant_service_agent(client, dead_letter, subscription)
    message_id = client.publish(topic, b"poison", ordering_key="A" if ordered else "")
    attempts: list[int] = []
    forwarded: list = []
    limit = attempts_max + 5
    while len(attempts) < limit:
        got = [m for m in client.pull_until(subscription, bool, PULL_TIMEOUT_S) if m.message.message_id == message_id]
        if not got:
            forwarded = client.pull_until(drain, bool, PULL_TIMEOUT_S)
            if forwarded:
                break
            if not attempts:
                raise ScenarioEnded(INCONCLUSIVE, f"the message was not delivered within {PULL_TIMEOUT_S:g} s")
            break  # no redelivery and nothing forwarded within a pull window: wait for the forward below
        attempts.append(got[0].delivery_attempt)
        client.nack(subscription, [got[0].ack_id])
    if not forwarded:
        forwarded = client.pull_until(drain, bool, FORWARD_WINDOW_S if len(attempts) >= attempts_max else DELIVERY_WINDOW_S)
    for message in forwarded:
        client.acknowledge(drain, [message.ack_id])
    seen = f"delivery_attempt over {len(attempts)} deliveries: {attempts}"
    if not forwarded:
        if len(attempts) >= limit:
            return VIOLATED, f"nacked {len(attempts)} times (max_delivery_attempts {attempts_max}), never forwarded; {seen}"
        if len(attempts) >= attempts_max:
            return VIOLATED, (f"nacked {len(attempts)} times (max_delivery_attempts {attempts_max}), then neither "
                              f"delivered again nor forwarded within {FORWARD_WINDOW_S:g} s: the message is gone; {seen}")
        return INCONCLUSIVE, f"deliveries stopped after {len(attempts)} nacks but nothing reached the dead-letter " \
                             f"topic within {DELIVERY_WINDOW_S:g} s; {seen}"
    attributes = dict(forwarded[0].message.attributes)
    problems = []
    missing = [a for a in ("CloudPubSubDeadLetterSourceDeliveryCount", "CloudPubSubDeadLetterSourceSubscription",
                           "CloudPubSubDeadLetterSourceSubscriptionProject", "CloudPubSubDeadLetterSourceTopicPublishTime")
               if a not in attributes]
    if missing:
        problems.append(f"forwarded without {', '.join(missing)}")
    if len(attempts) < attempts_max:
        problems.append(f"forwarded after {len(attempts)} deliveries, fewer than max_delivery_attempts {attempts_max}")
    if attempts != list(range(1, len(attempts) + 1)):
        problems.append(f"delivery_attempt did not count 1, 2, …: {attempts}")
    count = attributes.get("CloudPubSubDeadLetterSourceDeliveryCount")
    carried = sorted(k for k in attributes if k.startswith("CloudPubSubDeadLetter") and not k.endswith("DeliveryCount"))
    attributes_seen = f"CloudPubSubDeadLetterSourceDeliveryCount={count}, {', '.join(carried) or 'no other source attribute'}"
    if problems:
        return VIOLATED, "; ".join(problems) + f"; {seen}; forwarded with {attributes_seen}"
    return HOLDS, f"forwarded after {len(attempts)} deliveries ({seen}) with {attributes_seen}"


def _grant_service_agent(client: ScenarioClient, dead_letter: str, subscription: str) -> None:
    """Give the Pub/Sub service agent its two roles (Google Cloud; the emulator has no IAM)."""
    if client.session.target == "emulator":
        client.note("no IAM grants: the emulator implements no IAM and forwards without them (docs/emulator.md)")
        return
    number = client.session.project_number
    if not number:
        raise ScenarioEnded(INCONCLUSIVE, "without --project-number conform cannot grant the Pub/Sub service agent "
                                    "roles/pubsub.publisher on the dead-letter topic and roles/pubsub.subscriber on "
                                    "the subscription, and without them nothing is forwarded")
    member = f"serviceAccount:{facts.pubsub_service_agent(number)}"
    for resource, role, client in ((dead_letter, facts.PUBLISHER_ROLE, client.publisher),
                                   (subscription, facts.SUBSCRIBER_ROLE, client.subscriber)):
        policy = client.call("GetIamPolicy", {"resource": resource},
                             lambda: client.get_iam_policy(request={"resource": resource}, timeout=30))
        policy.bindings.add(role=role, members=[member])
        client.call("SetIamPolicy", {"resource": resource, "role": role, "member": member},
                    lambda: client.set_iam_policy(request={"resource": resource, "policy": policy}, timeout=30))
