"""What Spark's class archive saves each Spark session pubsubguard makes (`validation/class_archive.py`,
docs/performance.md): the driver JVM's launch, the session's start and its first job, with and without it.

    .venv/bin/python benchmarks/bench_spark_start.py              # 5 runs of each, after the archive is built
    .venv/bin/python benchmarks/bench_spark_start.py --repeat 10

Each run is a Python process of its own, as a command is: `session.launch(None, log_dir=...)`, then
`spark_session(None, log_dir=...)`, then `range(10).count()`, each timed. The runs alternate, with and without
(`PUBSUBGUARD_SPARK_CDS=0`), the first of each pair alternating too, so a change of the machine's load falls on
both. Prints the least and the median seconds of each phase, and the load average before and after (a figure taken
under load is not a result). The archive is built first when it is not there (once, ~50 s).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

PHASES = ("launch", "session", "first job")
MODES = ("archive", "none")


def child() -> None:
    """One run, in this process: the three phases' seconds as one JSON line."""
    from pathlib import Path

    from pubsubguard.validation.session import launch, spark_session

    with tempfile.TemporaryDirectory(prefix="bench-spark-start-") as logs:
        marks = [time.perf_counter()]
        launch(None, log_dir=Path(logs))
        marks.append(time.perf_counter())
        spark = spark_session(None, log_dir=Path(logs))
        marks.append(time.perf_counter())
        spark.range(10).count()
        marks.append(time.perf_counter())
        runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
        used = any("SharedArchiveFile" in str(option) for option in runtime.getInputArguments())
        spark.stop()
    print(json.dumps({"archive": used, **{p: b - a for p, a, b in zip(PHASES, marks, marks[1:])}}))


def run(mode: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_SUBMIT_ARGS", "PYSPARK_GATEWAY_PORT")}
    env["PUBSUBGUARD_SPARK_CDS"] = "1" if mode == "archive" else "0"
    done = subprocess.run([sys.executable, __file__, "--child"], capture_output=True, text=True, env=env, timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"a {mode} run failed: {done.stderr.strip().splitlines()[-1:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    if figures.pop("archive") != (mode == "archive"):
        raise SystemExit(f"a run {mode} did not start as it should (the JVM's options)")
    return figures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="runs with and without the archive (default 5 each)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child()
        return 0
    from pubsubguard.validation import class_archive, class_archive_build

    if class_archive.usable() is None:
        os.environ.pop("PUBSUBGUARD_SPARK_CDS", None)
        print("building the archive first", flush=True)
        class_archive_build.build()
    print(f"archive: {class_archive.usable()}")
    print("before: load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    seconds: dict[str, dict[str, list[float]]] = {m: {p: [] for p in PHASES} for m in MODES}
    for n in range(args.repeat):
        for mode in (MODES if n % 2 == 0 else MODES[::-1]):
            for phase, value in run(mode).items():
                seconds[mode][phase].append(value)
    for mode in MODES:
        print(f"{mode:<8} " + "   ".join(f"{phase} least {min(v):.2f} s median {statistics.median(v):.2f} s"
                                        for phase, v in seconds[mode].items()) + f"   ({args.repeat} runs)")
    print("after: load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
