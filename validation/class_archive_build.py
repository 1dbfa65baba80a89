"""Builds Spark's class archive (`validation/class_archive.py`) for the current key, once.

    python -m pubsubguard.validation.class_archive_build          # when absent (scripts/setup.sh); else nothing
    python -m pubsubguard.validation.class_archive_build --force  # again

Three steps, the first two each in a Python process of its own with its own driver JVM, their output (and Spark's
log, spark.log) in `<cache>/spark-cds/build/`, never on the terminal:

1. **record**: the driver JVM starts with `-XX:ArchiveClassesAtExit=<temporary file>`, and a session does on a few
   rows what the checks, the probe's tasks and watch do (`workload`), so the classes they use get loaded. The
   session stops and the JVM's stdin closes, upon which Spark's gateway exits and the JVM writes the archive
   (~14 s and 150 MB on 2 cores); the step waits for the JVM itself, bounded.
2. **check**: a JVM started from the new archive makes a session and counts; its class-loading log must show
   classes loaded from the archive (`source: shared objects file (top)`).
3. **install**: `os.replace` onto `<key>.jsa`, then the sidecar `<key>.json` (the archive's size, time and first
   bytes, which `class_archive.matches` compares; what it was built for, how long it took).

The temporary file carries the builder's pid and the steps run under a lock of the key's: a second builder waits,
then finds the archive built. On stdout: one line of what was built (nothing when it was there); a failure is one
line on stderr and exit 1.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pubsubguard.core.cache import FileLock

from . import class_archive

MODULE = "pubsubguard.validation.class_archive_build"
RECORD_TIMEOUT_S = 900.0  # the workload and the dump at the JVM's exit
EXIT_WAIT_S = 300.0  # the dump alone (~14 s on 2 cores)
CHECK_TIMEOUT_S = 300.0
CLASSES_LOG = "classes.log"  # the check's JVM's class-loading log
FROM_ARCHIVE = "source: shared objects file (top)"  # a class loaded from the dynamic archive, in that log
APP_NAME = "pubsubguard-class-archive"


class BuildFailed(Exception):
    """Why the archive was not built (one line)."""


def build(force: bool = False) -> tuple[Path, float] | None:
    """The archive for the current key, built now: (its path, seconds); None when it was there already or
    `PUBSUBGUARD_SPARK_CDS=0`."""
    if not class_archive.enabled():
        return None
    archive_key = class_archive.key()
    if archive_key is None:
        raise BuildFailed("no java, or no pyspark and its jars")
    final = class_archive.archive_path(archive_key)
    class_archive.prune()
    if not force and class_archive.matches(final):
        return None
    logs = final.parent / "build"
    logs.mkdir(parents=True, exist_ok=True)
    with FileLock(final.parent / f"{archive_key}.lock"):
        if not force and class_archive.matches(final):  # another builder made it while this one waited
            return None
        for stale in final.parent.glob(f".{archive_key}.*.jsa"):  # a builder that was killed (none runs: the lock)
            stale.unlink(missing_ok=True)
        started = time.monotonic()
        temp = final.parent / f".{archive_key}.{os.getpid()}.jsa"
        try:
            with open(logs / "build.log", "w") as out:
                _step(["--record", str(temp), str(logs)], out, logs, RECORD_TIMEOUT_S, "recording Spark's classes")
                if not temp.is_file() or temp.stat().st_size == 0:
                    raise BuildFailed("the JVM wrote no archive at its exit")
                (logs / CLASSES_LOG).unlink(missing_ok=True)
                _step(["--check", str(temp), str(logs)], out, logs, CHECK_TIMEOUT_S, "starting Spark from the archive")
            shared = _classes_from_archive(logs / CLASSES_LOG)
            if shared == 0:
                raise BuildFailed("a JVM started from the archive loaded no class from it")
            seconds = time.monotonic() - started
            sidecar = class_archive.describe(
                temp, key=archive_key, java=str(class_archive.java()),
                jars=str(class_archive.jars_folder()), built=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                build_seconds=round(seconds, 1), classes_from_archive=shared)
            os.replace(temp, final)
            _write_json(class_archive.sidecar_path(final), sidecar)
        finally:
            temp.unlink(missing_ok=True)
    return final, seconds


def _step(args: list[str], out, logs: Path, timeout: float, what: str) -> None:
    """`python -m <this module> ARGS` in a session (process group) of its own, its output into `out`; the whole
    group (its JVM too) is killed when it runs over `timeout`, or when this process is interrupted (Ctrl-C does
    not reach a session of its own)."""
    env = {**os.environ, class_archive.OPT_OUT_ENV: "0"}  # the steps give their JVMs their own options
    for name in ("PYSPARK_SUBMIT_ARGS", "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET"):
        env.pop(name, None)
    out.write(f"== {what}: {MODULE} {' '.join(args)}\n")
    out.flush()
    child = subprocess.Popen([sys.executable, "-m", MODULE, *args], stdin=subprocess.DEVNULL, stdout=out,
                             stderr=subprocess.STDOUT, env=env, cwd=logs, start_new_session=True)
    try:
        code = child.wait(timeout=timeout)
    except BaseException as stopped:
        os.killpg(child.pid, signal.SIGKILL)
        child.wait()
        if isinstance(stopped, subprocess.TimeoutExpired):
            raise BuildFailed(f"{what} took over {timeout:.0f} s") from None
        raise
    if code != 0:
        raise BuildFailed(f"{what} failed (exit {code})")


def _classes_from_archive(log: Path) -> int:
    try:
        with open(log, errors="replace") as file:
            return sum(FROM_ARCHIVE in line for line in file)
    except OSError:
        return 0


def _write_json(path: Path, document: dict) -> None:
    staged = path.with_name(f".{path.name}.{os.getpid()}")
    staged.write_text(json.dumps(document, indent=1) + "\n")
    os.replace(staged, path)


def record(target: Path, logs: Path) -> None:
    """Step 1, in its own process: the workload in a session whose JVM writes `target` when it exits."""
    from pyspark import SparkContext

    from . import session

    options = session.driver_java_options(logs, None)
    options += [f"-XX:ArchiveClassesAtExit={target}", class_archive.error_file_option(logs)]
    os.environ["PYSPARK_SUBMIT_ARGS"] = session.submit_args(options)
    spark = session.spark_session(None, app_name=APP_NAME, log_dir=logs)
    workload(spark, logs)
    spark.stop()
    jvm = SparkContext._gateway.proc  # spark-submit, which exec'd the JVM: its pid is the JVM's
    jvm.stdin.close()  # Spark's gateway exits at the end of its stdin (System.exit): the dump happens then
    code = jvm.wait(timeout=EXIT_WAIT_S)
    print(f"the JVM exited with {code} after the workload")
    if code != 0:
        raise SystemExit(1)


def workload(spark, scratch_parent: Path) -> None:
    """A few rows through what the checks (a pyarrow table into a DataFrame, parquet read with a schema, a
    repartition, a sort within partitions, a broadcast join, a group, `mapInArrow`, `toArrow`), the probe's tasks
    (an RDD's Python tasks) and watch (a streaming query's `foreachBatch`) ask of Spark's JVM."""
    import pyarrow as pa
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    rows = pa.table({"key": [f"k{i % 7}" for i in range(5000)], "seq": list(range(5000)),
                     "at": [float(i) / 10 for i in range(5000)]})
    frame = spark.createDataFrame(rows, schema=from_arrow_schema(rows.schema))
    keys = F.broadcast(spark.createDataFrame([(f"k{i}",) for i in range(7)], "key string"))
    joined = frame.join(keys, "key").unionByName(frame)
    joined.groupBy("key").agg(F.count("*"), F.max("at"), F.sum("seq")).orderBy("key").collect()
    joined.repartition("key").sortWithinPartitions("key", F.desc("seq")).limit(10).collect()
    with tempfile.TemporaryDirectory(dir=scratch_parent) as scratch:
        path = str(Path(scratch) / "rows.parquet")
        frame.write.parquet(path)
        back = spark.read.schema(frame.schema).parquet(path)
        back.mapInArrow(_counts, "key string, n long").groupBy("key").sum("n").collect()
        if hasattr(back, "toArrow"):
            back.limit(100).toArrow()
        spark.sparkContext.parallelize(range(100), 4).mapPartitions(_sum).collect()
        stream = spark.readStream.schema(frame.schema).parquet(path)
        query = (stream.writeStream.foreachBatch(lambda batch, _: batch.count())
                 .option("checkpointLocation", str(Path(scratch) / "checkpoint")).trigger(availableNow=True).start())
        query.awaitTermination(300)


def _counts(batches):
    import pyarrow as pa
    import pyarrow.compute as pc

    for batch in batches:
        counted = pc.value_counts(batch.column("key"))
        yield pa.RecordBatch.from_arrays([counted.field("values"), counted.field("counts")], names=["key", "n"])


def _sum(numbers):
    yield sum(numbers)


def check(archive: Path, logs: Path) -> None:
    """Step 2, in its own process: a session whose JVM starts from `archive`, logging where it loads classes."""
    from . import session

    options = session.driver_java_options(logs, archive)
    options.append(f'-Xlog:class+load=info:file="{logs / CLASSES_LOG}"')
    os.environ["PYSPARK_SUBMIT_ARGS"] = session.submit_args(options)
    spark = session.spark_session(None, app_name=APP_NAME, log_dir=logs)
    counted = spark.range(1000).count()
    spark.stop()
    print(f"counted {counted} with the archive")
    if counted != 1000:
        raise SystemExit(1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=f"python -m {MODULE}", description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="build again, even when the archive is there")
    parser.add_argument("--record", nargs=2, metavar=("ARCHIVE", "LOGS"), help=argparse.SUPPRESS)
    parser.add_argument("--check", nargs=2, metavar=("ARCHIVE", "LOGS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.record:
        record(Path(args.record[0]), Path(args.record[1]))
        return 0
    if args.check:
        check(Path(args.check[0]), Path(args.check[1]))
        return 0
    try:
        built = build(force=args.force)
    except (BuildFailed, OSError) as error:
        log = class_archive.folder() / "build" / "build.log"
        print(f"could not build Spark's class archive ({error}; see {log})", file=sys.stderr)
        return 1
    if built is not None:
        archive, seconds = built
        print(f"built Spark's class archive {archive} ({archive.stat().st_size / 2**20:.0f} MiB) in {seconds:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
