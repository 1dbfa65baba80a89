"""Where the Spark checks spend their time: each stage of `run_checks` timed on its own.

    .venv/bin/python benchmarks/profile_checks.py                    # the 10M-row log of bench_checks
    .venv/bin/python benchmarks/profile_checks.py --rows 1000000 --repeat 3

Uses the logs `bench_checks.py` generates (run it first). Every stage is run to a no-op sink (Spark's
`noop` writer), cumulatively, so each line minus the one before is that stage's cost:
  read + pack      `_unified`: the six numbers per row the pass reads
  + shuffle/sort   repartition by key, sort within partitions (as `_one_pass`)
  + Arrow          the same into `mapInArrow` with a function that only drains the batches
  + NumPy pass     the whole pass (`_one_pass`)
  evidence read    a read of every column of both logs (what the evidence read costs when the
                   findings' keys are in every row group)
and the Arrow transfer of the packed rows with 1, 3 and 6 columns, from a cached frame (Spark's
Arrow writer costs about the same per column).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # support.histories: the model of legal histories (test code)

from pyspark.sql import functions as F  # noqa: E402

import bench_checks  # noqa: E402

from pubsubguard.validation.checks import run as checks, chunk, kernel  # noqa: E402
from pubsubguard.validation.checks.findings import DEFAULT_SKEW_US  # noqa: E402
from pubsubguard.validation.evidence.records import RunInfo  # noqa: E402
from pubsubguard.validation.session import spark_session  # noqa: E402


def _drain(batches):
    for _ in batches:
        pass
    return iter(())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_checks.add_log_arguments(parser)
    parser.add_argument("--repeat", type=int, default=2, help="the first run is often slower (JIT, caches)")
    args = parser.parse_args(argv)
    directory = bench_checks.made_log(args)
    if directory is None:
        return 2
    print("before: load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    spark = spark_session("local[2]", app_name="profile-checks")
    run = RunInfo.read(directory)

    def timed(label: str, frame) -> None:
        t = time.perf_counter()
        frame.write.format("noop").mode("overwrite").save()
        print(f"  {label:34s} {time.perf_counter() - t:7.2f} s", flush=True)

    for i in range(args.repeat):
        print(f"run {i + 1}:")
        publishes = spark.read.parquet(str(directory / "publishes"))
        deliveries = spark.read.parquet(str(directory / "deliveries"))
        u = checks._unified(publishes, deliveries, run.subscriptions)
        timed("read + pack", u)
        ordered = u.repartition("h").sortWithinPartitions(*map(F.expr, checks._ORDER))
        timed("+ shuffle/sort", ordered)
        timed("+ Arrow (drained)", ordered.mapInArrow(_drain, "x long"))
        timed("+ NumPy pass", checks._one_pass(u, run.subscriptions, DEFAULT_SKEW_US))
        timed("evidence read (every column)", publishes.unionByName(deliveries, allowMissingColumns=True))
    cached = u.cache()
    cached.count()
    print("Arrow transfer from a cached frame:")
    for columns in (["h"], ["h", "meta", "t"], list(chunk.INPUT_COLUMNS)):
        timed(f"{len(columns)} column(s) ({', '.join(columns)})", cached.select(*columns).mapInArrow(_drain, "x long"))
    timed("scan of the cached frame", cached)
    print("after: load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
