"""A reproduction of the emulator's redelivery that stops on an unordered exactly-once subscription (issue 44).

    .venv/bin/python benchmarks/repro_eod_redelivery_stop.py                 # the four fault sets below
    .venv/bin/python benchmarks/repro_eod_redelivery_stop.py --faults nack=0.1,expire=0.03,crash=0

Each fault set runs the main job (`pubsubguard run`) on an estate of one topic and one subscription, shaped as
the dev stack's `orders-exactly-once` (unordered, exactly-once, ack deadline 60 s, retry policy 1..10 s,
dead-lettering after 5 attempts), at 50 times the main job's traffic (40 keys x 250 messages), in a process
of its own, with `--faults` set. It then reads the run's evidence and prints, per run:

- `nacks`: nacks the target answered success below the last attempt, and of them how many the target
  delivered again (`redelivered`) and how many never (`not`);
- `stop at`: the acknowledgement time (seconds after the first delivery) of the latest nack that the target
  still redelivered, and how many nacks after it it never redelivered;
- `fifth`: poison messages nacked at their 5th attempt, and how many the target forwarded to the
  dead-letter topic;
- the report's verdict and the job's time.

The behaviour reproduced: from one moment on, this emulator never again redelivers a message nacked or expired
after its first attempt, nor forwards one to the dead-letter topic, while it goes on with first deliveries and with
first attempts' redeliveries. Its retry policy's timer stops for good at an ack id no longer outstanding: one
scheduled twice (messages expired together) or acked meanwhile (a late ack); docs/emulator.md ("Redelivery stops
for good"), scenarios redelivery-after-repeated-expiry, redelivery-after-late-ack, dead-letter-after-late-ack.
Measured 2026-12-02 (docs/performance.md): both `nack` and `expire` are needed. The job tells these apart (form
`after_backoff_stop`); `unexplained` is what report.json leaves unexplained (`bench_load.unexplained`).

Measure on an idle machine, one run at a time: the load average is printed before each.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
FAULT_SETS = ("nack=0.1,expire=0.03,poison=0.02,crash=0", "nack=0.1,expire=0.03,crash=0",
              "nack=0.1,poison=0.02,crash=0", "expire=0.03,poison=0.02,crash=0")
MAX_ATTEMPTS = 5
SUBSCRIPTION = {"name": "orders-exactly-once", "exactly_once": True, "consumer_region": "us-east1",
                "ack_deadline_seconds": 60, "retry_policy": {"minimum_backoff": "1s", "maximum_backoff": "10s"},
                "dead_letter": {"max_delivery_attempts": MAX_ATTEMPTS}}


def project(directory: Path) -> None:
    """A project whose program is this repository's infra/, with stack `repro`: one topic, one subscription."""
    from bench_check import write_project

    write_project(directory, {"probe_isolation": True, "topics": [
        {"name": "orders", "publisher_region": "us-east1", "persistence_regions": ["us-east1"],
         "subscriptions": [SUBSCRIPTION]}]}, stack="repro")


def rows(evidence: Path) -> list[dict]:
    import pyarrow.parquet as pq

    out: list[dict] = []
    for part in sorted(glob.glob(str(evidence / "deliveries" / "*.parquet"))):
        out.extend(pq.read_table(part).to_pylist())
    return out


def analyse(evidence: Path) -> dict:
    """What the target did with each nack: redelivered, forwarded, or neither."""
    data = rows(evidence)
    deliveries = [r for r in data if r["kind"] == "delivery"]
    if not deliveries:
        return {"error": "no deliveries in the evidence"}
    t0 = min(r["receive_time_us"] for r in deliveries)
    latest: dict[str, int] = {}
    for r in deliveries:
        latest[r["message_id"]] = max(latest.get(r["message_id"], 0), r["receive_time_us"])
    forwarded = {(r["key"], r["seq"]) for r in data if r["kind"] == "dead_letter"}
    nacks = [r for r in deliveries if r["action"] == "nack" and r["ack_result"] == "success"]
    below = [r for r in nacks if (r["delivery_attempt"] or 0) < MAX_ATTEMPTS]
    again = [r for r in below if latest[r["message_id"]] > r["receive_time_us"]]
    never = [r for r in below if latest[r["message_id"]] <= r["receive_time_us"]]
    stop_us = max((r["ack_time_us"] for r in again), default=None)
    after = [r for r in never if stop_us is not None and r["ack_time_us"] > stop_us]
    fifth = [r for r in nacks if r["delivery_attempt"] == MAX_ATTEMPTS]
    return {"nacks": len(below), "redelivered": len(again), "not": len(never),
            "stop_at_s": None if stop_us is None else round((stop_us - t0) / 1e6, 1),
            "not_after_stop": len(after),
            "fifth": len(fifth), "forwarded": sum(1 for r in fifth if (r["key"], r["seq"]) in forwarded)}


def run(faults: str, keys: int, per_key: int, out: Path) -> dict:
    label = faults.replace(",", "_").replace("=", "")
    where = out / f"{label}-project"
    where.mkdir(parents=True, exist_ok=True)
    project(where)
    env = {k: v for k, v in os.environ.items() if k != "PUBSUB_EMULATOR_HOST"}  # the job starts its own
    started = time.monotonic()
    with (out / f"{label}.log").open("w") as sink:
        code = subprocess.call([str(ROOT / ".venv/bin/pubsubguard"), "run", "-s", "repro", "-C", str(where),
                                "--keys", str(keys), "--messages-per-key", str(per_key), "--faults", faults,
                                "--out", str(out / label)], stdout=sink, stderr=subprocess.STDOUT, env=env)
    wall = round(time.monotonic() - started, 1)
    report = out / label / "report" / "report.json"
    if not report.exists():
        return {"faults": faults, "exit": code, "wall_s": wall, "error": f"no report: see {out / f'{label}.log'}"}
    from bench_load import unexplained

    result = json.loads(report.read_text())
    return {"faults": faults, "exit": code, "wall_s": wall, "verdict": result["verdict"],
            "unexplained": unexplained(result), **analyse(out / label / "report" / "evidence")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--faults", action="append", help=f"a --faults value (repeatable; default: {FAULT_SETS})")
    parser.add_argument("--keys", type=int, default=40)
    parser.add_argument("--messages-per-key", type=int, default=250)
    parser.add_argument("--out", type=Path, help="where the runs are written (default: a temporary directory)")
    args = parser.parse_args()
    out = args.out or Path(tempfile.mkdtemp(prefix="repro-eod-"))
    out.mkdir(parents=True, exist_ok=True)
    for faults in args.faults or FAULT_SETS:
        print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; --faults {faults}", flush=True)
        result = run(faults, args.keys, args.messages_per_key, out)
        if "error" in result:
            print(f"  exit {result['exit']} in {result['wall_s']} s: {result['error']}")
            continue
        print(f"  {result['wall_s']} s, exit {result['exit']}, verdict {result['verdict']}\n"
              f"  nacks {result['nacks']}: redelivered {result['redelivered']}, not {result['not']}\n"
              f"  stop at: +{result['stop_at_s']} s, then {result['not_after_stop']} nacks never redelivered\n"
              f"  fifth: {result['fifth']} poison nacked at attempt {MAX_ATTEMPTS}, {result['forwarded']} forwarded\n"
              f"  unexplained: {result['unexplained']}",
              flush=True)
    print(f"runs: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
