"""End-to-end probe throughput on the emulator beside a bare client publish+pull loop, same run.

    .venv/bin/python benchmarks/bench_probe.py [--keys 20] [--messages-per-key 100]

Starts its own emulator, declares one topic with one plain pull subscription (probe isolation on),
then (1) a bare loop: a streaming pull is opened, then PublisherClient with ordering keys publishes N
messages (each stamped before the call), the pull receives and acks all N; (2) the probe
(`pubsubguard.validation.job`, the default master, no faults) on the same workload. Probe rates come from its
evidence: published = rows / (first publish() call -> last publish result), delivered and recorded =
rows / (first publish -> last receive); latency p50/p95/p99 (publish -> first receive) from its report.
Prints both, the ratios and whether the goals are met (publish rate >= 0.7 of the bare loop's, latency
p50 <= 2x the bare loop's).

    .venv/bin/python benchmarks/bench_probe.py --fault-layer

(3) also runs the probe with an empty fault schedule (`--nemesis` with `faults: []`: every Pub/Sub call
goes through the fault layer, which parses it and changes nothing) and prints its publish rate against
(2)'s, with the machine's load average (goal: the layer costs <= 10 %; measure on an idle machine).
`--repeat N` alternates N runs without and N with the layer and gives the ratio of the medians (one
short publish phase alone is mostly noise).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STACK = """config:
  gcp:project: pubsubguard-dev
  pubsubguard:projectNumber: "100000000001"
  pubsubguard:estate:
    probe_isolation: true
    topics:
      - name: {t}
        subscriptions:
          - name: {t}-plain
            ack_deadline_seconds: 30
"""


def bare_loop(project: str, n_keys: int, per_key: int) -> tuple[float, float, list[float]]:
    """(publish rate, end-to-end rate, publish -> receive latencies in ms) of a bare client loop: the
    streaming pull is open before the first publish, each publish is stamped before the call (as the
    probe does), each receipt when the client took the message off the stream."""
    from google.cloud import pubsub_v1
    from google.cloud.pubsub_v1.types import PublisherOptions

    publisher = pubsub_v1.PublisherClient(publisher_options=PublisherOptions(enable_message_ordering=True))
    subscriber = pubsub_v1.SubscriberClient()
    topic = f"projects/{project}/topics/bare-{uuid.uuid4().hex[:8]}"
    sub = f"projects/{project}/subscriptions/bare-{uuid.uuid4().hex[:8]}"
    publisher.create_topic(name=topic)
    subscriber.create_subscription(request={"name": sub, "topic": topic})
    total = n_keys * per_key
    received: dict[str, float] = {}
    done = threading.Event()
    lock = threading.Lock()

    def callback(message):
        at = getattr(message, "_received_timestamp", None) or time.time()
        message.ack()
        with lock:
            received.setdefault(message.attributes["id"], at)
            if len(received) >= total:
                done.set()

    future = subscriber.subscribe(sub, callback)
    time.sleep(1.0)  # the stream is open before the first publish, as the probe's subscribers are
    sent: dict[str, float] = {}
    start = time.monotonic()
    futures = []
    for k in range(n_keys):
        for s in range(per_key):
            ident = f"{k}-{s}"
            sent[ident] = time.time()
            futures.append(publisher.publish(topic, b"bare", ordering_key=f"k{k}", id=ident))
    for f in futures:
        f.result()
    published_at = time.monotonic()
    done.wait(600)
    end = time.monotonic()
    future.cancel()
    subscriber.delete_subscription(subscription=sub)
    publisher.delete_topic(topic=topic)
    latencies = [(received[i] - sent[i]) * 1000 for i in received]
    return total / (published_at - start), len(received) / (end - start), latencies


def percentiles(values: list[float]) -> tuple[float, float, float]:
    import numpy as np

    return tuple(float(np.percentile(values, q, method="nearest")) for q in (50, 95, 99))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", type=int, default=20)
    parser.add_argument("--messages-per-key", type=int, default=100)
    parser.add_argument("--fault-layer", action="store_true",
                        help="also run the probe through the fault layer with an empty schedule and print the ratio")
    parser.add_argument("--repeat", type=int, default=1,
                        help="with --fault-layer: runs of each, alternating without/with the layer; the ratio of medians")
    args = parser.parse_args()
    from pubsubguard.core.apply import apply_plan
    from pubsubguard.core.emulator import Emulator
    from pubsubguard.core.plan import make_plan
    from pubsubguard.validation import job
    from pubsubguard.validation.session import spark_session

    work = Path(tempfile.mkdtemp(prefix="bench-probe-"))
    emu = Emulator.start(project="pubsubguard-dev", state_dir=work / "emulator")
    os.environ["PUBSUB_EMULATOR_HOST"] = emu.host
    try:
        topic = f"bench-{uuid.uuid4().hex[:8]}"
        root = work / "project"
        root.mkdir()
        (root / "Pulumi.yaml").write_text(f"name: pubsubguard\nruntime: python\nmain: {ROOT / 'infra'}\n")
        (root / "Pulumi.bench.yaml").write_text(STACK.format(t=topic))
        plan = make_plan("bench", root)
        (work / "plan.json").write_text(json.dumps(plan))
        apply_plan(plan)
        spark = spark_session()  # the verify default (DEFAULT_MASTER)
        bare_pub, bare_e2e, bare_latency = bare_loop("pubsubguard-dev", args.keys, args.messages_per_key)

        def probe_run(name: str, extra: list[str]):
            """(publish rate, delivered+recorded rate, latency p50/95/99, delivery rows, wall s, exit code)."""
            import pyarrow.dataset as ds

            started = time.monotonic()
            code = job.main(["--plan", str(work / "plan.json"), "--keys", str(args.keys), "--messages-per-key",
                             str(args.messages_per_key), "--report", str(work / name), "--no-progress",
                             "--drain-timeout", "300", *extra], spark=spark)
            wall = time.monotonic() - started
            ev = work / name / "evidence"
            pubs = ds.dataset(ev / "publishes").to_table().to_pylist()
            dels = ds.dataset(ev / "deliveries").to_table().to_pylist()
            # from the first publish() call to the last result, as the bare loop's rate
            first = min(p["publish_time_us"] for p in pubs)
            pub_span = (max(p["result_time_us"] for p in pubs) - first) / 1e6 or 1e-6
            e2e_span = (max(d["receive_time_us"] for d in dels) - first) / 1e6
            figures = json.loads((work / name / "report.json").read_text())["subscriptions"][f"{topic}-plain"]["figures"]
            return (len(pubs) / pub_span, len({d["message_id"] for d in dels if d["kind"] == "delivery"}) / e2e_span,
                    tuple(figures[f"latency_p{q}_ms"] for q in (50, 95, 99)), len(dels), wall, code)

        probe_pub, probe_e2e, probe_p, rows, wall, code = probe_run("report", [])
        layer = None
        pairs = []  # (without, with): publish and delivered+recorded rates, one pair per repeat
        if args.fault_layer:
            schedule = work / "empty-schedule.yaml"
            schedule.write_text("faults: []\n")
            for i in range(args.repeat):
                without = (probe_pub, probe_e2e) if i == 0 else probe_run(f"report-{i}", [])[:2]
                layer = probe_run(f"report-layer-{i}", ["--nemesis", str(schedule)])
                pairs.append((without, layer[:2]))
        bare_p = percentiles(bare_latency)
        n = args.keys * args.messages_per_key
        print(f"workload: {args.keys} keys x {args.messages_per_key} messages = {n}, emulator {emu.host}, {spark.sparkContext.master}")
        print(f"bare client loop : published {bare_pub:8.0f} msg/s   publish+pull+ack {bare_e2e:8.0f} msg/s   "
              f"latency p50/p95/p99 {bare_p[0]:.1f} / {bare_p[1]:.1f} / {bare_p[2]:.1f} ms")
        print(f"probe (Spark)    : published {probe_pub:8.0f} msg/s   delivered+recorded {probe_e2e:8.0f} msg/s   "
              f"latency p50/p95/p99 {probe_p[0]:.1f} / {probe_p[1]:.1f} / {probe_p[2]:.1f} ms "
              f"({rows} delivery rows recorded; whole job incl. Spark checks+report {wall:.1f}s, exit {code})")
        print(f"ratio probe/bare : publish {probe_pub / bare_pub:.2f} (goal >= 0.7: {'met' if probe_pub / bare_pub >= 0.7 else 'NOT met'})   "
              f"end-to-end {probe_e2e / bare_e2e:.2f}   latency p50 {probe_p[0] / bare_p[0]:.2f}x "
              f"(goal <= 2x: {'met' if probe_p[0] <= 2 * bare_p[0] else 'NOT met'})")
        if layer is not None:
            from statistics import median

            for i, ((w_pub, w_e2e), (l_pub, l_e2e)) in enumerate(pairs, 1):
                print(f"fault layer {i:<5}: published {l_pub:8.0f} msg/s with an empty schedule, {w_pub:8.0f} without "
                      f"({l_pub / w_pub:.2f}); delivered+recorded {l_e2e:8.0f} vs {w_e2e:8.0f} ({l_e2e / w_e2e:.2f})")
            ratio = median(p[1][0] for p in pairs) / median(p[0][0] for p in pairs)
            e2e = median(p[1][1] for p in pairs) / median(p[0][1] for p in pairs)
            print(f"fault layer      : ratio of medians over {len(pairs)} alternating pairs: publish {ratio:.2f} (goal >= 0.90: "
                  f"{'met' if ratio >= 0.9 else 'NOT met'}), delivered+recorded {e2e:.2f}; load average "
                  f"{' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} CPUs (measure on an idle machine)")
        print(f"command: .venv/bin/python benchmarks/bench_probe.py{f' --fault-layer --repeat {args.repeat}' if args.fault_layer else ''} --keys {args.keys} --messages-per-key {args.messages_per_key}")
    finally:
        emu.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
