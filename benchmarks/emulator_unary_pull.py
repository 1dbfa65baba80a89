"""How the emulator answers unary Pull: the facts docs/performance.md cites for the 100-topic estate.

    .venv/bin/python benchmarks/emulator_unary_pull.py

Starts an emulator of its own on loopback and prints, one line each:
- how long an empty Pull with `return_immediately` takes on an idle emulator (plain, ordered, exactly-once);
- on an ordered subscription: what a Pull returns while one key's message is outstanding, and the order in which
  a key's messages come back after that message is nacked.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PROJECT = "pubsubguard-dev"


def main() -> None:
    from pubsubguard.core.emulator import Emulator

    with tempfile.TemporaryDirectory(prefix="pubsubguard-unary-pull-") as state:
        emulator = Emulator.start(project=PROJECT, state_dir=Path(state))
        os.environ["PUBSUB_EMULATOR_HOST"] = emulator.host
        try:
            measure()
        finally:
            emulator.stop()


def measure() -> None:
    import warnings

    from google.cloud import pubsub_v1

    warnings.simplefilter("ignore", DeprecationWarning)  # return_immediately is deprecated, and still honoured
    publisher = pubsub_v1.PublisherClient(
        publisher_options=pubsub_v1.types.PublisherOptions(enable_message_ordering=True))
    subscriber = pubsub_v1.SubscriberClient()
    topic = publisher.topic_path(PROJECT, "unary-pull")
    publisher.create_topic(name=topic)

    def pull(path: str, n: int) -> list[tuple[str, str, str]]:
        answer = subscriber.pull(subscription=path, max_messages=n, return_immediately=True, timeout=10, retry=None)
        return [(m.message.ordering_key, m.message.data.decode(), m.ack_id) for m in answer.received_messages]

    for kind, extra in (("plain", {}), ("ordered", {"enable_message_ordering": True}),
                        ("exactly-once", {"enable_exactly_once_delivery": True})):
        path = subscriber.subscription_path(PROJECT, f"empty-{kind}")
        subscriber.create_subscription(request={"name": path, "topic": topic, **extra})
        started = time.monotonic()
        got = pull(path, 1)
        print(f"empty Pull on a {kind} subscription: {len(got)} messages in {time.monotonic() - started:.3f} s")
        subscriber.delete_subscription(subscription=path)

    ordered = subscriber.subscription_path(PROJECT, "ordered")
    subscriber.create_subscription(request={"name": ordered, "topic": topic, "enable_message_ordering": True})
    for key in ("a", "b"):
        for seq in range(3):
            publisher.publish(topic, f"{key}{seq}".encode(), ordering_key=key)
    publisher.publish(topic, b"no-key").result()
    time.sleep(0.5)
    first = pull(ordered, 1)
    print(f"ordered, first Pull of 1: {[data for _, data, _ in first]}")
    print(f"ordered, next Pull of 10 while it is outstanding: {[data for _, data, _ in pull(ordered, 10)]}")
    subscriber.modify_ack_deadline(subscription=ordered, ack_ids=[first[0][2]], ack_deadline_seconds=0)
    print(f"ordered, Pull of 10 after nacking it: {[data for _, data, _ in pull(ordered, 10)]}")
    subscriber.delete_subscription(subscription=ordered)
    publisher.delete_topic(topic=topic)


if __name__ == "__main__":
    main()
