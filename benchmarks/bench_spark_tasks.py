"""What a Spark job of Python tasks costs before any work, and what the way its output travels back costs: the
figures behind the checks' `run._in_tasks` (RDD tasks returning Arrow IPC bytes) and the pass's latency summaries
and timeline bins as bytes (`aggregates.summary_wire`); docs/performance.md, issue 65.

    .venv/bin/python benchmarks/bench_spark_tasks.py             # 12 timed runs of each job, after a warm one
    .venv/bin/python benchmarks/bench_spark_tasks.py --runs 20

One warm `local[2]` session. Every job is over the numbers 0..7 in 2 tasks, as `_in_tasks` runs 8 buckets on 2
cores:
- `jvm`: `spark.range(...).collect()`, Spark's own fixed cost, no Python;
- `rdd`: an RDD's Python tasks that return nothing;
- `arrow`: a DataFrame's `mapInArrow` tasks that return nothing, collected with `toArrow()`;
- `arrow-lists`: `mapInArrow` tasks returning, per number, 4 rows with a list of 10,000 floats and one of 10,000
  ints each (what a bucket's latency summaries were, as list columns, before they travelled as bytes);
- `rdd-bytes`: RDD tasks returning the same numbers as bytes, in one Arrow IPC stream per task (`_in_tasks`).
Prints the least and the median seconds of each job, and the load average before and after (a figure taken under
load is not a result).
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import pyarrow as pa

SAMPLE = 10_000  # aggregates.LATENCY_SAMPLES: the numbers a partition's latency summary holds at most
LISTS = pa.schema([("subscription", pa.string()), ("values", pa.list_(pa.float64())), ("weights", pa.list_(pa.int64()))])
BYTES = pa.schema([("subscription", pa.string()), ("values", pa.binary()), ("n", pa.int64()), ("step", pa.int64())])


def _nothing(batches):
    for _ in batches:
        pass
    return iter(())


def _lists(batches):
    import numpy as np

    for batch in batches:
        for _ in batch.column(0).to_pylist():
            values = np.arange(SAMPLE, dtype=np.float64)
            yield pa.RecordBatch.from_pydict({"subscription": ["s"] * 4, "values": [values] * 4,
                                              "weights": [np.ones(SAMPLE, np.int64)] * 4}, schema=LISTS)


def _as_bytes(numbers):
    import numpy as np

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, BYTES) as stream:
        for _ in numbers:
            values = np.arange(SAMPLE, dtype="<f8").tobytes()
            stream.write_batch(pa.RecordBatch.from_pydict({"subscription": ["s"] * 4, "values": [values] * 4,
                                                           "n": [3 * SAMPLE] * 4, "step": [3] * 4}, schema=BYTES))
    yield sink.getvalue().to_pybytes()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=12, help="timed runs of each job, after one warm run")
    args = parser.parse_args(argv)
    print("before: load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    from pyspark.sql.pandas.types import from_arrow_schema

    from pubsubguard.validation.session import spark_session

    spark = spark_session("local[2]", app_name="bench-spark-tasks")
    context = spark.sparkContext
    nothing = from_arrow_schema(pa.schema([("x", pa.int64())]))

    def rdd_bytes():
        streams = context.parallelize(range(8), 2).mapPartitions(_as_bytes).collect()
        return pa.concat_tables(pa.ipc.open_stream(s).read_all() for s in streams)

    jobs = {
        "jvm": lambda: spark.range(0, 8, 1, 2).collect(),
        "rdd": lambda: context.parallelize(range(8), 2).mapPartitions(_nothing).collect(),
        "arrow": lambda: spark.range(0, 8, 1, 2).mapInArrow(_nothing, nothing).toArrow(),
        "arrow-lists": lambda: spark.range(0, 8, 1, 2).mapInArrow(_lists, from_arrow_schema(LISTS)).toArrow(),
        "rdd-bytes": rdd_bytes,
    }
    for name, job in jobs.items():
        job()  # warm: the workers, the JIT
        seconds = []
        for _ in range(args.runs):
            start = time.perf_counter()
            job()
            seconds.append(time.perf_counter() - start)
        print(f"{name:<12} least {min(seconds):.3f} s   median {statistics.median(seconds):.3f} s   "
              f"({args.runs} runs)", flush=True)
    spark.stop()
    print("after: load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
