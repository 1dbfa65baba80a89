"""How long the report takes for a large run: judge, build (the plots' data, aggregated or sampled by
Spark) and render (matplotlib + the jinja2 template), on generated evidence of about N delivery rows.

    .venv/bin/python benchmarks/bench_report.py --rows 1000000
    .venv/bin/python benchmarks/bench_report.py --evidence out/dev/report/evidence --repeat 3   # a run's own

`--repeat N` runs the whole report (judge, build, render) N times in one Spark session: the first in a
cold JVM, the others warm -- what the checks' warm-up during the drain (pubsubguard.validation.warmup.WarmUp)
buys the main job.

The whole prove path, from recorded evidence to report.html, beside the checks alone and the DuckDB
floor, on the logs of `bench_checks.py` (made there, or here if missing):

    .venv/bin/python benchmarks/bench_report.py --from-evidence --sizes 1000000,10000000 --repeat 3

Per size, after one untimed run of each side (warm: JIT, page cache; the first check, which keeps the
pass's sorted input beside the evidence, validation/checks/sorted_input.py), `--repeat` times: the checks
alone (`run_checks` reading the kept input, findings and statistics collected: bench_checks.py's
re-check), the re-check as `verify --from-evidence` does it (pubsubguard.validation.judgement.judge's
steps: read the evidence and judge it; build the report and its plots' data; render and write
report.html), and the floor. Prints every
time, the best of each, the ratios (checks / floor, re-check / checks), the peaks of the driver and
executor memory and the load average before and after.

The evidence is a legal history (`histories`: plain, ordered, exactly-once, dead-lettering
subscriptions) tiled to size, plus one mutated copy so findings, their evidence rows and a sequence
plot exist. Prints each stage's wall time and the size of report.html.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # support.histories: the model of legal histories (test code)
sys.path.insert(0, str(ROOT / "benchmarks"))


from support import histories as H  # noqa: E402
from pubsubguard.validation.evidence.records import DeclaredSubscription  # noqa: E402

SUBSCRIPTIONS = [
    DeclaredSubscription("plain", "t"),
    DeclaredSubscription("ordered", "t", ordering=True),
    DeclaredSubscription("eod", "t", exactly_once=True),
    DeclaredSubscription("dl", "t", max_delivery_attempts=5, dead_letter_topic="t-dl"),
]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000, help="about this many delivery rows")
    parser.add_argument("--evidence", type=Path, default=None, help="a recorded evidence directory instead")
    parser.add_argument("--repeat", type=int, default=1, help="times the whole report is made (first: cold JVM)")
    parser.add_argument("--from-evidence", action="store_true",
                        help="the prove path from recorded evidence to report.html beside the checks and the floor")
    parser.add_argument("--sizes", default="1000000,10000000", help="with --from-evidence: delivery rows per log")
    args = parser.parse_args()
    if args.from_evidence:
        return prove_path([int(n) for n in args.sizes.split(",")], args.repeat)
    from pubsubguard.validation.judgement import judge, judged as judged_run
    from pubsubguard.validation.report import document
    from pubsubguard.validation.report import render
    from pubsubguard.validation.evidence.store import read_evidence
    from pubsubguard.validation.session import spark_session
    from pubsubguard.validation.checks.verdict import run_verdict

    work = Path(tempfile.mkdtemp(prefix="bench-report-"))
    if args.evidence is None:
        legal = H.generate(SUBSCRIPTIONS, H.Workload(keys=20, messages_per_key=50), seed=1)
        mutated, _ = H.mutate_out_of_order_skip(legal, random.Random(1))
        per_copy = max(1, len(mutated.deliveries))
        pubs, dels = H.tile(mutated, max(1, args.rows // per_copy))
        evidence = H.write_evidence(work / "evidence", mutated.run_id, SUBSCRIPTIONS, pubs, dels, row_group_size=250_000)
    else:
        evidence = args.evidence
    spark = spark_session(app_name="bench-report")
    from bench_checks import PythonWorkerPeak

    workers = PythonWorkerPeak(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    for attempt in range(1, args.repeat):
        started = time.monotonic()
        render.render_html(document.build(judge(spark, evidence)))
        print(f"run {attempt} ({'cold JVM' if attempt == 1 else 'warm'}): judge + build + render "
              f"{time.monotonic() - started:.1f} s")
    info, publishes, deliveries, integrity = read_evidence(spark, evidence)
    publishes, deliveries = publishes.cache(), deliveries.cache()
    print(f"evidence: {publishes.count()} publish rows, {deliveries.count()} delivery rows")
    started = time.monotonic()
    verdict = run_verdict(publishes, deliveries, info, integrity=integrity)
    judged = time.monotonic()
    result = document.build(judged_run(verdict, info, evidence, deliveries, integrity))
    built = time.monotonic()
    render.write(result, work / "report")
    written = time.monotonic()
    size = (work / "report" / "report.html").stat().st_size
    print(f"judge {judged - started:.1f} s · build (plot data) {built - judged:.1f} s · render + write "
          f"{written - built:.1f} s · report.html {size / 1e6:.1f} MB, {len(verdict.findings)} findings")
    source = f"--evidence {args.evidence}" if args.evidence else f"--rows {args.rows}"
    print(f"run {args.repeat} (the stages above): judge + build + render + write {written - started:.1f} s")
    print(f"command: .venv/bin/python benchmarks/bench_report.py {source} --repeat {args.repeat}")
    print(peaks(spark, workers))
    print(load())
    return 0


def load() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def peaks(spark, workers) -> str:
    """The driver's and the executor's peak memory (local mode: the JVM is both; its Python workers apart)."""
    import resource

    from bench_checks import jvm_peak_mib

    executor = f"; executor {workers.stop()}" if workers is not None else ""
    return (f"peaks: JVM {jvm_peak_mib(spark):,.0f} MiB (driver and executor: local mode), driver Python "
            f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MiB{executor}")


def prove_path(sizes: list[int], repeat: int) -> int:
    """Per size: checks alone, the re-check from evidence to report.html (by stage) and the DuckDB floor."""
    from bench_checks import PythonWorkerPeak, build, first_check, floor, re_check

    from pubsubguard.validation.judgement import judge, judged as judged_run
    from pubsubguard.validation.report import document
    from pubsubguard.validation.report import render
    from pubsubguard.validation.evidence.store import read_evidence
    from pubsubguard.validation.session import spark_session
    from pubsubguard.validation.checks.verdict import run_verdict

    print(f"before: {load()}", flush=True)
    out = ROOT / "benchmarks" / "out"
    dirs = {rows: build(rows, out) for rows in sizes}
    spark = spark_session("local[2]", app_name="bench-prove", shuffle_partitions=8)
    workers = PythonWorkerPeak(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    report_dir = Path(tempfile.mkdtemp(prefix="bench-prove-"))

    def recheck(directory: Path) -> dict:
        """pubsubguard.validation.judgement.judge, the document built, then written: timed by stage."""
        t = time.perf_counter()
        info, publishes, deliveries, integrity = read_evidence(spark, directory)
        verdict = run_verdict(publishes, deliveries, info, directory, integrity)  # as judge: the kept sorted input
        judged = time.perf_counter()
        result = document.build(judged_run(verdict, info, directory, deliveries, integrity))
        built = time.perf_counter()
        render.write(result, report_dir)
        written = time.perf_counter()
        return {"seconds": written - t, "judge": judged - t, "data": built - judged, "render": written - built,
                "findings": len(verdict.findings)}

    for rows in sizes:
        directory = dirs[rows]
        warm = first_check(spark, directory), recheck(directory), floor(directory)
        print(f"{rows:>11,} rows  warm-up: first check (keeps the sorted input) {warm[0]['seconds']:.1f} s; "
              f"re-check {warm[1]['seconds']:.1f} s; duckdb {warm[2]['seconds']:.1f} s", flush=True)
        runs = [(re_check(spark, directory), recheck(directory), floor(directory)) for _ in range(repeat)]
        best = [min((r[i] for r in runs), key=lambda x: x["seconds"]) for i in range(3)]
        checks, prove, duck = best
        n = duck["rows"]
        for i, name in enumerate(("checks", "re-check", "duckdb")):
            times = ", ".join(f"{r[i]['seconds']:.2f}" for r in runs)
            print(f"{n:>11,} rows  {name:8s} runs: {times} s", flush=True)
        print(f"{n:>11,} rows  re-check best {prove['seconds']:.2f} s = judge (read + checks + verdict) "
              f"{prove['judge']:.2f} s · report data {prove['data']:.2f} s · render + write {prove['render']:.2f} s; "
              f"{prove['findings']} findings", flush=True)
        print(f"{n:>11,} rows  checks {checks['seconds']:.2f} s · duckdb floor {duck['seconds']:.2f} s · "
              f"re-check {prove['seconds']:.2f} s   checks/floor {checks['seconds'] / duck['seconds']:.2f}x   "
              f"re-check/checks {prove['seconds'] / checks['seconds']:.2f}x", flush=True)
    print(peaks(spark, workers))
    print(f"after: {load()}")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
