"""Where the first check spends its time, from Spark's own stage metrics (its event log) and, with
`--py-spy`, samples of the executors' Python workers.

    .venv/bin/python benchmarks/profile_stages.py                        # the 10M-row log of bench_checks
    .venv/bin/python benchmarks/profile_stages.py --rows 1000000 --py-spy

Uses the logs `bench_checks.py` generates (run it first). One untimed first check (JIT, page cache, the
Python workers started), then one timed first check (`run_checks` with the evidence directory, nothing
kept before it: it keeps its sorted input) with its findings and statistics collected, as bench_checks
times it (`--nothing-kept`: the shuffle pass without an evidence directory instead; `--re-check`: a re-check,
which reads the sorted input the untimed first check kept). Printed:
- each Spark stage of the timed check: its wall time, the tasks' run and CPU time, and what Spark
  measured inside it (scan, shuffle write and fetch wait, sort, the Arrow exchange with Python, GC);
- the executors' Python workers' CPU time (/proc) and, with `--py-spy` (py-spy on PATH or beside this
  interpreter; a measuring tool only, not a dependency of pubsubguard), how their busy samples split: the
  kernel, the writing of the kept input, Arrow's (de)serialisation, the rest;
- the driver's share: the wall time of the check less the stages' wall time;
- the CPU time of the driver's Python, the JVM and the Python workers (/proc): on a busy machine, the
  figures to compare two versions by (wall time is the load's).
The load average before and after is printed beside the figures (a figure taken under load is not a result).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_checks  # noqa: E402

# what a Python worker's busy sample was doing, by the first of these frames found from its innermost frame
# outwards (py-spy's collapsed stacks: "function (file:line)" frames joined by ";", outermost first)
PYTHON_PARTS = (
    ("writing the kept input (sorted_input.tee: Parquet)", ("sorted_input.py",)),
    ("the kernel (kernel.check_partition and below)", ("kernel.py", "chunk.py", "scans.py", "pass_rows.py",
                                                       "findings.py", "aggregates.py")),
    ("Arrow in and out of the worker (pyspark serializers)", ("serializers.py", "pyarrow/ipc.py")),
)


def _loads() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _stages(event_log: Path) -> list[dict]:
    """Each completed stage of the event log: its name, wall time and summed metrics (accumulables)."""
    stages = []
    with open(event_log) as lines:
        for line in lines:
            event = json.loads(line)
            if event.get("Event") != "SparkListenerStageCompleted":
                continue
            info = event["Stage Info"]
            values = collections.Counter()
            for accumulable in info.get("Accumulables", []):
                try:
                    values[accumulable["Name"]] += float(accumulable["Value"])
                except (KeyError, TypeError, ValueError):
                    continue
            stages.append({"id": info["Stage ID"], "name": info["Stage Name"].split(" at ")[0],
                           "tasks": info["Number of Tasks"],
                           "wall_s": (info["Completion Time"] - info["Submission Time"]) / 1000,
                           "submitted": info["Submission Time"] / 1000, "metrics": values})
    return stages


def _metric(stage: dict, name: str, unit: float) -> float:
    return stage["metrics"].get(name, 0.0) / unit


# (label, accumulable name, divisor to seconds) printed per stage, when Spark measured it
STAGE_METRICS = (
    ("run", "internal.metrics.executorRunTime", 1e3),
    ("CPU", "internal.metrics.executorCpuTime", 1e9),
    ("GC", "internal.metrics.jvmGCTime", 1e3),
    ("scan", "scan time", 1e3),
    ("shuffle write", "internal.metrics.shuffle.write.writeTime", 1e9),
    ("fetch wait", "internal.metrics.shuffle.read.fetchWaitTime", 1e3),
    ("sort", "sort time", 1e3),
    ("Python run", "time to run Python workers", 1e3),  # a task's time in its Python worker, waits included
    ("Python code", "time to execute Python code", 1e3),
)


def _py_spy() -> str | None:
    beside = Path(sys.executable).with_name("py-spy")
    return str(beside) if beside.exists() else shutil.which("py-spy")


def _python_daemon(jvm_pid: int) -> int | None:
    """The JVM's pyspark.daemon (the executors' Python workers fork from it)."""
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            cmdline = (status.parent / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if int(fields.get("PPid", "0").strip() or 0) == jvm_pid and "pyspark.daemon" in cmdline:
            return int(status.parent.name)
    return None


def _own_cpu_s(pid: int) -> float:
    """CPU seconds of one process (/proc's utime and stime: all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return sum(int(x) for x in fields[11:13]) / os.sysconf("SC_CLK_TCK")


def _python_cpu_s(jvm_pid: int) -> float:
    """CPU seconds of the JVM's Python processes (the daemon, the workers it forked, and the workers it reaped:
    /proc's utime, stime, cutime, cstime), which a sampler cannot tell from time spent runnable but waiting
    for a core."""
    ticks, parents, times = os.sysconf("SC_CLK_TCK"), {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        pid = int(stat.parent.name)
        parents[pid], times[pid] = int(fields[1]), sum(int(x) for x in fields[11:15])
    total = 0
    for pid in times:
        ancestor, depth = parents.get(pid), 0
        while ancestor is not None and ancestor != jvm_pid and depth < 20:
            ancestor, depth = parents.get(ancestor), depth + 1
        if ancestor == jvm_pid:
            total += times[pid]
    return total / ticks


def _python_parts(collapsed: Path) -> tuple[collections.Counter, int, collections.Counter]:
    """Busy samples of the workers by PYTHON_PARTS, the total, and the rest's samples by innermost frame."""
    parts, total, rest = collections.Counter(), 0, collections.Counter()
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        for label, files in PYTHON_PARTS:
            if any(any(f in frame for f in files) for frame in frames):
                parts[label] += n
                break
        else:
            parts["the rest (the worker's own loop, imports, other)"] += n
            rest[frames[-1]] += n
    return parts, total, rest


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bench_checks.add_log_arguments(parser)
    parser.add_argument("--py-spy", action="store_true", help="sample the executors' Python workers (py-spy)")
    parser.add_argument("--rate", type=int, default=50, help="py-spy samples per second")
    parser.add_argument("--nothing-kept", action="store_true",
                        help="time the shuffle pass that keeps nothing (no evidence directory) instead of a first check")
    parser.add_argument("--re-check", action="store_true",
                        help="time a re-check (it reads the sorted input the untimed first check kept) instead")
    args = parser.parse_args(argv)
    directory = bench_checks.made_log(args)
    if directory is None:
        return 2
    spy = _py_spy() if args.py_spy else None
    if args.py_spy and spy is None:
        print("--py-spy: no py-spy on PATH or beside this interpreter (pip install py-spy: a measuring tool only)")
        return 2
    events = Path(tempfile.mkdtemp(prefix="profile-stages-"))
    os.environ["PYSPARK_SUBMIT_ARGS"] = (
        f"--conf spark.eventLog.enabled=true --conf spark.eventLog.rolling.enabled=false --conf spark.eventLog.compress=false --conf spark.eventLog.dir={events.as_uri()} pyspark-shell")
    print(f"before: load average {_loads()}", flush=True)
    from pubsubguard.validation.session import spark_session

    spark = spark_session("local[2]", app_name="profile-stages")
    jvm_pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    def check():
        if args.nothing_kept:
            return bench_checks.spark_checks(spark, directory)
        return bench_checks.re_check(spark, directory) if args.re_check else bench_checks.first_check(spark, directory)

    warm = bench_checks.first_check(spark, directory) if args.re_check else check()
    what = "shuffle pass (nothing kept)" if args.nothing_kept else "re-check" if args.re_check else "first check"
    print(f"warm-up {what} (untimed): {warm['seconds']:.2f} s", flush=True)
    sampler, collapsed = None, events / "py-spy.txt"
    daemon = _python_daemon(jvm_pid)
    if spy is not None:
        sampler = subprocess.Popen([spy, "record", "--pid", str(daemon), "--subprocesses", "--nonblocking",
                                    "--rate", str(args.rate), "--format", "raw", "--output", str(collapsed)],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)  # py-spy attaches
    start_load, started, python_cpu = _loads(), time.time(), _python_cpu_s(jvm_pid)
    driver_cpu, jvm_cpu = time.process_time(), _own_cpu_s(jvm_pid)
    timed = check()
    end_load, python_cpu = _loads(), _python_cpu_s(jvm_pid) - python_cpu
    driver_cpu, jvm_cpu = time.process_time() - driver_cpu, _own_cpu_s(jvm_pid) - jvm_cpu
    if sampler is not None:
        sampler.send_signal(signal.SIGINT)
        sampler.wait(timeout=60)
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    spark.stop()  # the event log is whole once the context stops
    stages = [s for s in _stages(next(events.glob("local-*"))) if s["submitted"] >= started]
    print(f"timed {what}: {timed['seconds']:.2f} s wall ({args.rows:,} rows; load average {start_load} at its "
          f"start, {end_load} at its end), {timed['sorted_input']}")
    header = "| stage | tasks | wall s | " + " | ".join(f"{label} s" for label, _, _ in STAGE_METRICS) + " |"
    print(header)
    print("|" + " --- |" * (header.count("|") - 1))
    for stage in stages:
        values = " | ".join(f"{_metric(stage, name, unit):.2f}" for _, name, unit in STAGE_METRICS)
        print(f"| {stage['id']} {stage['name']} | {stage['tasks']} | {stage['wall_s']:.2f} | {values} |")
    in_stages = sum(s["wall_s"] for s in stages)
    print(f"stages' wall time {in_stages:.2f} s; outside any stage (driver: planning, collecting, summarising, "
          f"naming keys, writing the manifest) {timed['seconds'] - in_stages:.2f} s")
    sent = sum(_metric(s, "data sent to Python workers", 2**20) for s in stages)
    shuffled = sum(_metric(s, "shuffle bytes written", 2**20) for s in stages)
    print(f"shuffle written {shuffled:,.0f} MiB; Arrow sent to the Python workers {sent:,.0f} MiB")
    print(f"the executors' Python workers' CPU time (/proc): {python_cpu:.2f} s")
    # CPU seconds change far less with the load than wall time does: the figure to compare two versions by on
    # a busy machine (the JVM's: the driver's planning and scheduling, the executors' threads, GC and JIT)
    print(f"CPU time of the check: driver Python {driver_cpu:.2f} s, JVM {jvm_cpu:.2f} s, Python workers "
          f"{python_cpu:.2f} s, in all {driver_cpu + jvm_cpu + python_cpu:.2f} s")
    if sampler is not None:
        parts, total, rest = _python_parts(collapsed)
        print(f"Python workers, busy samples ({total:,} at {args.rate}/s; py-spy counts a worker waiting for a core as "
              f"busy), each share also as that share of their CPU time:")
        for label, n in parts.most_common():
            print(f"  {label:58s} {100 * n / max(1, total):4.0f} %  {python_cpu * n / max(1, total):6.2f} CPU-s")
        print("  the rest's innermost frames, most sampled: " + "; ".join(
            f"{frame} {n / args.rate:.2f} s" for frame, n in rest.most_common(4)))
    print(f"after: load average {_loads()}")
    shutil.rmtree(events, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
