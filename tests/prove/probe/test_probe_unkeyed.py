"""Keyed messages on a subscription without message ordering, on the real emulator through the real client library
(issue 63: in a 2-hour watch the probe's client held about 65,000 messages of the dead-letter drain behind their
ordering keys, and 1,430 the target had delivered were judged `lost`).

The client library hands a keyed message to its callback only once the one before it of the same key is settled,
whether or not the subscription orders. The probe's own streaming pull (`unkeyed.subscribe_unkeyed`) does not: while a
key's first message is unsettled, the key's later ones still reach the callback."""

from __future__ import annotations

import threading
import time
import uuid

import pytest

pytestmark = pytest.mark.emulator

PROJECT = "pubsubguard-dev"
MESSAGES = 5


@pytest.fixture()
def keyed_on_unordered(emulator):
    from google.cloud import pubsub_v1

    publisher = pubsub_v1.PublisherClient(publisher_options=pubsub_v1.types.PublisherOptions(enable_message_ordering=True))
    subscriber = pubsub_v1.SubscriberClient()
    name = f"unkeyed-{uuid.uuid4().hex[:8]}"
    topic = publisher.topic_path(PROJECT, name)
    subscriptions = [subscriber.subscription_path(PROJECT, f"{name}-{which}") for which in ("probe", "library")]
    publisher.create_topic(name=topic)
    for subscription in subscriptions:  # no message ordering
        subscriber.create_subscription(request={"name": subscription, "topic": topic, "ack_deadline_seconds": 60})
    for seq in range(MESSAGES):
        publisher.publish(topic, b"probe", ordering_key="key-000", seq=str(seq)).result()
    try:
        yield subscriber, subscriptions
    finally:
        for subscription in subscriptions:
            subscriber.delete_subscription(subscription=subscription)
        publisher.delete_topic(topic=topic)


class _HeadKept:
    """A callback that keeps the key's first message unsettled and acks the others."""

    def __init__(self):
        self.lock = threading.Lock()
        self.seqs: list[int] = []
        self.head = None

    def __call__(self, message):
        seq = int(message.attributes["seq"])
        assert message.ordering_key == "key-000"  # the emulator delivers the key on an unordered subscription
        with self.lock:
            self.seqs.append(seq)
        if seq == 0 and self.head is None:
            self.head = message
        else:
            message.ack()

    def later(self) -> set[int]:
        with self.lock:
            return set(self.seqs) - {0}


def _wait(condition, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.1)


def test_a_keyed_message_on_an_unordered_subscription_waits_behind_nothing(keyed_on_unordered):
    from google.cloud.pubsub_v1.types import FlowControl

    from pubsubguard.validation.probe.unkeyed import subscribe_unkeyed

    subscriber, (probe_subscription, library_subscription) = keyed_on_unordered

    # the client library's own streaming pull: the key's later messages wait for its first (this library's behaviour,
    # the reason for the probe's own; should a version change it, this part says so)
    library = _HeadKept()
    future = subscriber.subscribe(library_subscription, callback=library)
    try:
        _wait(lambda: library.head is not None, 30)
        assert library.head is not None, "the first message never came"
        time.sleep(5)
        assert library.later() == set(), f"this client library no longer holds a key on an unordered subscription: {library.seqs}"
        library.head.ack()
        _wait(lambda: len(library.later()) == MESSAGES - 1, 30)
        assert library.later() == set(range(1, MESSAGES))
    finally:
        future.cancel()
        future.result(timeout=10)

    # the probe's: every later message comes while the first is still unsettled
    probe = _HeadKept()
    future = subscribe_unkeyed(subscriber, probe_subscription, probe, FlowControl(max_messages=1000))
    assert future is not None, "this client library's hold is not where the probe replaces it"
    try:
        _wait(lambda: probe.head is not None and len(probe.later()) == MESSAGES - 1, 30)
        assert probe.head is not None, "the first message never came"
        assert probe.later() == set(range(1, MESSAGES)), f"held behind the key's first message: {probe.seqs}"
        probe.head.ack()
        # nothing is left waiting, and settling the head releases nothing twice
        time.sleep(1)
        assert sorted(probe.seqs) == list(range(MESSAGES)), probe.seqs
    finally:
        future.cancel()
        future.result(timeout=10)
