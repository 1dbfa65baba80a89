"""Benchmark (not a test): plan + check of a generated estate, end to end and the check alone.

    .venv/bin/python benchmarks/bench_check.py                 # 100, 1000 and 3000 topics
    .venv/bin/python benchmarks/bench_check.py --topics 1000   # one size

Each topic has 3 subscriptions (pull; exactly-once pinned to a region; ordered), and every tenth
topic's pull subscription dead-letters into an auto-created topic with its drain and service-agent
IAM, so the stack rules have real work. The estate is written as `pubsub:estate` stack config in a
temporary project whose `main` is this repository's `infra/`, and planned with the real program.
Prints resources, seconds and resources/s for plan, check (pack start + gRPC + rules) and both,
the check's CPU seconds (this process plus the pack processes: comparable across loaded and idle
machines), the pack processes used, and the check's seconds per 1,000 resources at each size
(linear growth keeps it flat).
Target (issue 3): the whole check of 1,000 topics under 10 s on a 2-core machine.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path

import yaml

from pubsubguard import check as checking
from pubsubguard import plan as planning

ROOT = Path(__file__).resolve().parent.parent


def estate(topics: int) -> dict:
    items = []
    for index in range(topics):
        name = f"topic-{index:05d}"
        pull = {"name": f"{name}-pull", "expiration": "never"}
        if index % 10 == 0:
            pull["dead_letter"] = {"max_delivery_attempts": 10}
        items.append({
            "name": name,
            "publisher_region": "us-east1",
            "persistence_regions": ["us-east1"],
            "subscriptions": [
                pull,
                {"name": f"{name}-exactly-once", "exactly_once": True, "consumer_region": "us-east1", "ack_deadline_seconds": 60},
                {"name": f"{name}-ordered", "ordering": True, "consumer_region": "us-east1"},
            ],
        })
    return {"probe_isolation": True, "topics": items}


def project(directory: Path, topics: int) -> None:
    (directory / "Pulumi.yaml").write_text(yaml.safe_dump({"name": "pubsubguard", "runtime": "python", "main": str(ROOT / "infra")}))
    config = {"gcp:project": "bench-project", "pubsubguard:projectNumber": "100000000001", "pubsubguard:estate": estate(topics)}
    (directory / "Pulumi.bench.yaml").write_text(yaml.safe_dump({"config": config}))


def measure(topics: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="bench-check-") as tmp:
        root = Path(tmp)
        project(root, topics)
        started = time.perf_counter()
        plan = planning.make_plan("bench", root)
        planned = time.perf_counter()
        cpu_before = _cpu()
        result = checking.run_check(plan, source="Pulumi.bench.yaml")
        checked = time.perf_counter()
        cpu = _cpu() - cpu_before
    return {
        "topics": topics, "resources": len(plan["resources"]), "plan_s": planned - started, "check_s": checked - planned,
        "check_cpu_s": cpu, "workers": checking.default_workers(len(plan["resources"])),
        "total_s": checked - started, "mandatory": len(result.mandatory), "advisory": len(result.violations) - len(result.mandatory),
    }


def _cpu() -> float:
    """CPU seconds of this process and of its finished children (the pack processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, action="append", help="estate size in topics (repeatable; default 100, 1000, 3000)")
    args = parser.parse_args(argv)
    sizes = args.topics or [100, 1000, 3000]
    print(f"command: {' '.join([Path(sys.executable).name, *sys.argv])}")
    print(f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}, "
          f"load average {os.getloadavg()[0]:.1f} at start (wall times stretch when other work shares the cores)")
    print(f"{'topics':>7} {'resources':>9} {'plan s':>8} {'check s':>8} {'check cpu s':>11} {'packs':>5} {'total s':>8} "
          f"{'check res/s':>11} {'total res/s':>11} {'check s/1k res':>14} {'mandatory':>9} {'advisory':>8}")
    for topics in sizes:
        m = measure(topics)
        print(f"{m['topics']:>7} {m['resources']:>9} {m['plan_s']:>8.2f} {m['check_s']:>8.2f} {m['check_cpu_s']:>11.2f} "
              f"{m['workers']:>5} {m['total_s']:>8.2f} "
              f"{m['resources'] / m['check_s']:>11.0f} {m['resources'] / m['total_s']:>11.0f} "
              f"{1000 * m['check_s'] / m['resources']:>14.3f} {m['mandatory']:>9} {m['advisory']:>8}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
