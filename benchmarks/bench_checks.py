"""Speed of the Spark checks beside a DuckDB floor, on generated delivery logs of 1M and 10M rows.

    .venv/bin/python benchmarks/bench_checks.py                      # 1M and 10M rows
    .venv/bin/python benchmarks/bench_checks.py --sizes 1000000     # one size

The logs are legal histories from `histories` (four subscriptions: plain, ordered,
exactly-once, dead-lettering), tiled to size under renamed keys, plus one mutated copy so the
findings and their evidence join are exercised. Each is written once as Parquet and reused: under
`benchmarks/out/checks-<rows>/` in the probe's bucketed layout (validation/evidence/layout.py), and
under `checks-<rows>-plain/` as the probe wrote part files before it (the same rows).

For each size, in the same run, after one untimed run of each side on that size (JIT, the page cache:
"warm"; its time is printed), `--repeat` times (default 3; the best time of each side is compared,
every time is printed):
- Spark: a warm session (`local[2]`); `run_checks` on the files, then findings and statistics
  collected -- the whole verdict, wall time -- four ways: the shuffle pass with nothing kept (the
  `ratio` line, comparable with earlier rounds); the first check of the bucketed log
  (validation/checks/buckets.py: no shuffle), which keeps the pass's sorted input beside it
  (validation/checks/sorted_input.py; removed before each such run); a re-check, which reads it; and
  the first check of the log not bucketed (the shuffle pass, keeping its input: evidence written before
  the layout). The findings and statistics of each are compared with the shuffle pass's;
- floor: DuckDB (2 threads, in a subprocess) on the same files doing the least work any checker
  must do: read the columns the checks read, sort by (subscription, key, receive time), count
  deliveries per message id.
Prints rows/s for both, the ratio, 10M/1M scaling and the driver's peak memory (JVM VmHWM; the
driver's Python process separately) and the load average before and after (a figure taken under
load is not a result).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # support.histories: the model of legal histories (test code)

import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from support import histories as H  # noqa: E402
from pubsubguard.validation.evidence import layout, records, seal  # noqa: E402
from pubsubguard.validation.checks import sorted_input
from pubsubguard.validation.evidence.records import DeclaredSubscription, RunInfo  # noqa: E402

SUBSCRIPTIONS = [
    DeclaredSubscription("bench-plain", "bench-plain-topic"),
    DeclaredSubscription("bench-ordered", "bench-ordered-topic", ordering=True),
    DeclaredSubscription("bench-eod", "bench-eod-topic", exactly_once=True, ack_deadline_s=60),
    DeclaredSubscription("bench-dl", "bench-dl-topic", max_delivery_attempts=5, dead_letter_topic="bench-dlq"),
]
WORKLOAD = H.Workload(keys=40, messages_per_key=60, poison_rate=0.02, fault_rate=0.15, duplicate_rate=0.1)
COLUMNS = (
    "run_id, subscription, kind, message_id, key, seq, probe_run, delivery_attempt, receive_time_us, "
    "ack_deadline_s, action, ack_result, ack_time_us, dl_source_delivery_count"
)
FLOOR = """
import duckdb, json, sys, time
con = duckdb.connect()
con.execute("PRAGMA threads=2")
con.execute("PRAGMA disable_progress_bar")
t = time.perf_counter()
con.execute("CREATE TEMP TABLE s AS SELECT {cols} FROM read_parquet('{path}/deliveries/*.parquet') "
            "ORDER BY subscription, key, receive_time_us")
n = con.execute("SELECT count(*), sum(c) FROM (SELECT message_id, count(*) AS c FROM s GROUP BY message_id)").fetchone()
print(json.dumps({{"seconds": time.perf_counter() - t, "messages": n[0], "rows": int(n[1])}}))
"""


CHUNK_ROWS = 5_000_000  # a log is tiled and written this many delivery rows at a time (bounded memory)


def build(rows: int, out: Path, bucketed: bool = True) -> Path:
    """The log of `rows` delivery rows under `out`: `checks-<rows>/`, its part files in the probe's bucketed
    layout (validation/evidence/layout.py), or as the probe wrote them before it (`checks-<rows>-plain/`)."""
    directory = out / (f"checks-{rows}" if bucketed else f"checks-{rows}-plain")
    if (directory / "run.json").exists():
        return directory
    write = layout.write_part if bucketed else pq.write_table
    legal = H.generate(SUBSCRIPTIONS, WORKLOAD, seed=7, run_id="bench")
    per_copy = len(legal.deliveries)
    copies = max(1, round(rows / per_copy) - 1)
    per_chunk = max(1, CHUNK_ROWS // per_copy)
    for chunk, start in enumerate(range(0, copies, per_chunk)):
        pubs, dels = H.tile(legal, min(per_chunk, copies - start))
        for name, table in (("publishes", pubs), ("deliveries", dels)):
            for column in ("key", "message_id"):
                table = _suffixed(table, column, f"~c{chunk}")  # keys unique across chunks
            (directory / name).mkdir(parents=True, exist_ok=True)
            for i, first in enumerate(range(0, table.num_rows, 1_000_000)):
                write(table.slice(first, 1_000_000), directory / name / f"part-c{chunk:04d}-{i:05d}.parquet")
        del pubs, dels
    mutated = legal
    for name in ("lost", "out_of_order/skip", "duplicate_after_ack", "dead_letter_missing"):
        result = H.MUTATORS[name](mutated, random.Random(1))
        if result:
            mutated = result[0]
    mp, md = H.tile(mutated, 1)
    # the mutated copy under its own key suffix
    for column in ("key", "message_id"):
        mp = _suffixed(mp, column, "~mut")
        md = _suffixed(md, column, "~mut")
    for name, table in (("publishes", mp), ("deliveries", md)):
        write(table, directory / name / "part-mutated.parquet")
    RunInfo(run_id="bench", target="generated", subscriptions=list(SUBSCRIPTIONS),
            parameters={"generator": "histories"}).write(directory)
    seal.seal(directory, "bench")  # last: the log is complete, as a probe run seals it
    return directory


def add_log_arguments(parser: argparse.ArgumentParser) -> None:
    """--rows and --out of the scripts that read a log this benchmark made (profile_checks, profile_stages)."""
    parser.add_argument("--rows", type=int, default=10_000_000)
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out")


def made_log(args: argparse.Namespace) -> Path | None:
    """The log of `args.rows` rows this benchmark made under `args.out`; None, said, when there is none."""
    directory = args.out / f"checks-{args.rows}"
    if (directory / "run.json").exists():
        return directory
    print(f"{directory}: no log; make it with: .venv/bin/python benchmarks/bench_checks.py --sizes {args.rows}")
    return None


def disk_mib(directory: Path) -> float:
    """The log's part files (not the sorted input a check keeps beside them)."""
    return sum(p.stat().st_size for name in ("publishes", "deliveries") for p in (directory / name).rglob("*.parquet")) / 2**20


class PythonWorkerPeak:
    """The peak resident memory of the JVM's Python workers (the executor side of local mode:
    pyspark.daemon and the workers it forks), sampled from /proc every 0.2 s: the largest single
    worker's VmHWM and the largest sum of their VmRSS at one moment."""

    def __init__(self, jvm_pid: int):
        import threading

        self.jvm_pid, self.single_kib, self.total_kib = jvm_pid, 0, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _status(self):
        parents, fields = {}, {}
        for status in Path("/proc").glob("[0-9]*/status"):
            try:
                lines = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
            except OSError:
                continue
            pid = int(status.parent.name)
            parents[pid] = int(lines.get("PPid", "0").strip() or 0)
            fields[pid] = (int(lines.get("VmHWM", "0 kB").split()[0]), int(lines.get("VmRSS", "0 kB").split()[0]))
        return parents, fields

    def _run(self):
        while not self._stop.wait(0.2):
            parents, fields = self._status()
            workers = [pid for pid in parents if self._descends(pid, parents)]
            if workers:
                self.single_kib = max(self.single_kib, max(fields[p][0] for p in workers))
                self.total_kib = max(self.total_kib, sum(fields[p][1] for p in workers))

    def _descends(self, pid: int, parents: dict) -> bool:
        seen = 0
        while pid in parents and seen < 20:
            pid, seen = parents[pid], seen + 1
            if pid == self.jvm_pid:
                return True
        return False

    def stop(self) -> str:
        self._stop.set()
        self._thread.join()
        return f"Python workers: largest {self.single_kib / 1024:,.0f} MiB, all at once {self.total_kib / 1024:,.0f} MiB"


def _suffixed(table: pa.Table, column: str, suffix: str) -> pa.Table:
    i = table.schema.get_field_index(column)
    return table.set_column(i, table.schema.field(i), pc.binary_join_element_wise(table[column], pa.scalar(suffix), ""))


def jvm_peak_mib(spark) -> float:
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def spark_checks(spark, directory: Path, keep: bool = False) -> dict:
    """`run_checks` and its findings and statistics collected. `keep`: with the evidence directory, so
    the pass keeps its sorted input there or reads what an earlier check kept (validation/checks/sorted_input.py)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from pubsubguard.validation.checks.run import run_checks

    run = RunInfo.read(directory)
    t = time.perf_counter()
    # read as the job reads evidence (evidence/store.read_evidence): in the contract's schema, no schema inference
    publishes = spark.read.schema(from_arrow_schema(records.PUBLISH_SCHEMA)).parquet(str(directory / "publishes"))
    deliveries = spark.read.schema(from_arrow_schema(records.DELIVERY_SCHEMA)).parquet(str(directory / "deliveries"))
    results = run_checks(publishes, deliveries, run.subscriptions, evidence_dir=directory if keep else None)
    findings, stats = results.findings, results.stats
    seconds = time.perf_counter() - t
    kinds: dict[str, int] = {}
    for f in findings:
        kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
    return {"seconds": seconds, "findings": kinds, "delivered": sum(s["delivered"] for s in stats),
            "verdict": sorted(map(repr, findings)) + sorted(map(repr, stats)), "sorted_input": results.sorted_input}


def first_check(spark, directory: Path) -> dict:
    """The first check of the evidence: nothing kept yet (removed); the pass (of the bucketed layout, or the shuffle
    pass for a log not bucketed) keeps its sorted input."""
    shutil.rmtree(directory / sorted_input.DIRNAME, ignore_errors=True)
    result = spark_checks(spark, directory, keep=True)
    assert "kept the sorted input" in result["sorted_input"], result["sorted_input"]
    return result


def re_check(spark, directory: Path) -> dict:
    """A later check of the same evidence: the pass reads the sorted input the first check kept."""
    result = spark_checks(spark, directory, keep=True)
    assert result["sorted_input"].startswith("checks: read the sorted input"), result["sorted_input"]
    return result


def floor(directory: Path) -> dict:  # the part files only (the kept input is not read)
    code = FLOOR.format(cols=COLUMNS, path=directory)
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000000,10000000", help="delivery rows per log, comma-separated")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "out")
    parser.add_argument("--shuffle-partitions", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per size and side; the best of each is compared")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    print("before: load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)

    from pubsubguard.validation.session import spark_session

    dirs, plain = {}, {}
    for rows in sizes:
        t = time.perf_counter()
        dirs[rows], plain[rows] = build(rows, args.out), build(rows, args.out, bucketed=False)
        print(f"log {rows:>11,} rows: {dirs[rows]} and, not bucketed, {plain[rows]} ({time.perf_counter() - t:.1f} s "
              f"to make or find; {disk_mib(dirs[rows]):,.0f} and {disk_mib(plain[rows]):,.0f} MiB of Parquet on disk)",
              flush=True)

    spark = spark_session("local[2]", app_name="bench-checks", shuffle_partitions=args.shuffle_partitions)
    workers = PythonWorkerPeak(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    results = {}
    # (side, its function, which log it reads)
    sides = {"shuffle": (spark_checks, plain), "first": (first_check, dirs), "re-check": (re_check, dirs),
             "unbucketed": (first_check, plain), "floor": (lambda _, d: floor(d), dirs)}
    labels = {"first": "first check (the probe's bucketed layout; keeps its sorted input)",
              "re-check": "re-check, reading it",
              "unbucketed": "first check of the log not bucketed (the shuffle pass; keeps its input)"}

    def each_side(rows: int) -> dict:
        return {name: side(spark, logs[rows]) for name, (side, logs) in sides.items()}

    for rows in sizes:
        warm = each_side(rows)
        print(f"{rows:>11,} rows  warm-up: " + "; ".join(f"{name} {r['seconds']:.1f} s" for name, r in warm.items()),
              flush=True)
        runs = [each_side(rows) for _ in range(args.repeat)]
        best = {name: min((r[name] for r in runs), key=lambda x: x["seconds"]) for name in sides}
        s, f = best["shuffle"], best["floor"]
        n = f["rows"]
        results[rows] = (s, f)
        print(f"{n:>11,} rows  runs: " + "; ".join(
            f"{name} " + ", ".join(f"{r[name]['seconds']:.1f}" for r in runs) + " s" for name in sides)
            + " (best of each below)", flush=True)
        print(
            f"{n:>11,} rows  spark {s['seconds']:7.2f} s {n / s['seconds']:>12,.0f} rows/s   "
            f"duckdb floor {f['seconds']:6.2f} s {n / f['seconds']:>12,.0f} rows/s   ratio {s['seconds'] / f['seconds']:5.2f}x   "
            f"findings {s['findings']}",
            flush=True,
        )
        kept_mib = sum(p.stat().st_size for p in (dirs[rows] / sorted_input.DIRNAME).rglob("*.parquet")) / 2**20
        for name, label in labels.items():
            r = best[name]
            same = all(x[name]["verdict"] == s["verdict"] for x in runs)
            print(f"{n:>11,} rows  {label}: {r['seconds']:6.2f} s   ratio {r['seconds'] / f['seconds']:5.2f}x   "
                  f"{'same findings and statistics as the shuffle pass' if same else 'FINDINGS OR STATISTICS DIFFER'}",
                  flush=True)
        print(f"{n:>11,} rows  sorted input kept: {kept_mib:,.0f} MiB beside the log's {disk_mib(dirs[rows]):,.0f} MiB",
              flush=True)
    if len(sizes) > 1:
        lo, hi = sizes[0], sizes[-1]
        print(f"scaling {hi:,}/{lo:,} rows: spark {results[hi][0]['seconds'] / results[lo][0]['seconds']:.2f}x, "
              f"duckdb {results[hi][1]['seconds'] / results[lo][1]['seconds']:.2f}x")
    print(f"driver peak memory: JVM {jvm_peak_mib(spark):,.0f} MiB (driver and executor: local mode), "
          f"Python {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB; executor "
          f"{workers.stop()}; spark.local.dir: {spark.sparkContext.getConf().get('spark.local.dir', '/tmp')}")
    print("after: load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
