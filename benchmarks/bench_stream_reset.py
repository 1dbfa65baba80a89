"""How many messages published after a subscriber's StreamingPull resets reach its next stream, on the emulator.

    .venv/bin/python benchmarks/bench_stream_reset.py                         # 0, 1 and 4 resets, 35 s watch
    .venv/bin/python benchmarks/bench_stream_reset.py --resets 1 --watch 150

Per trial: a fresh topic and subscription (ack deadline --deadline s; `--exactly-once` too), `resets` streams
opened and cancelled by the client (the client library's `subscribe`, then `cancel`), one stream opened, --messages
published, and how many of them the open stream received within --watch seconds (and within 10 s), with the
latest delivery's delay. On Pub/Sub every message comes (a message sent to a stream that is gone is due again once
its deadline passes); conformance scenario `stream-reset-keeps-delivering` judges the same behaviour in short.
Prints the load average first (a figure taken under load is not a result).
"""

from __future__ import annotations

import argparse
import os
import queue
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def trial(publisher, subscriber, project: str, label: str, resets: int, args) -> str:
    topic = publisher.create_topic(name=f"projects/{project}/topics/reset-{label}").name
    subscription = subscriber.create_subscription(request={
        "name": f"projects/{project}/subscriptions/reset-{label}", "topic": topic,
        "ack_deadline_seconds": args.deadline, "enable_exactly_once_delivery": args.exactly_once}).name
    for _ in range(resets):
        stream = subscriber.subscribe(subscription, lambda message: None)
        time.sleep(1.0)
        stream.cancel()
        stream.result()
    time.sleep(1.0)
    got: queue.Queue = queue.Queue()

    def callback(message) -> None:
        got.put((time.monotonic(), message.data))
        message.ack()

    stream = subscriber.subscribe(subscription, callback)
    time.sleep(1.0)
    started = time.monotonic()
    for i in range(args.messages):
        publisher.publish(topic, str(i).encode()).result()
    seen: dict[bytes, float] = {}
    end = time.monotonic() + args.watch
    while time.monotonic() < end and len(seen) < args.messages:
        try:
            at, data = got.get(timeout=0.5)
        except queue.Empty:
            continue
        seen.setdefault(data, at - started)
    stream.cancel()
    early = sum(1 for delay in seen.values() if delay < 10)
    latest = max(seen.values(), default=0.0)
    return (f"{resets} reset(s){' exactly-once' if args.exactly_once else ''}: {len(seen)} of {args.messages} delivered "
            f"within {args.watch:g} s, {early} within 10 s; the latest after {latest:.1f} s")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--resets", type=int, nargs="+", default=[0, 1, 4])
    parser.add_argument("--messages", type=int, default=40)
    parser.add_argument("--deadline", type=int, default=20, help="the subscription's ack deadline, s")
    parser.add_argument("--watch", type=float, default=35.0, help="how long the open stream is read, s")
    parser.add_argument("--exactly-once", action="store_true")
    args = parser.parse_args(argv)
    print("load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    from pubsubguard.core.emulator import Emulator

    project = "bench-reset"
    with tempfile.TemporaryDirectory(prefix="bench-reset-") as state:
        emulator = Emulator.start(project=project, state_dir=Path(state))
        try:
            os.environ["PUBSUB_EMULATOR_HOST"] = emulator.host
            from google.cloud import pubsub_v1

            publisher, subscriber = pubsub_v1.PublisherClient(), pubsub_v1.SubscriberClient()
            for index, resets in enumerate(args.resets):
                print(trial(publisher, subscriber, project, f"{index}-{resets}", resets, args), flush=True)
            subscriber.close()
        finally:
            emulator.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
