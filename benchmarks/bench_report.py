"""How long the report takes for a large run: judge, build (the plots' data, aggregated or sampled by
Spark) and render (matplotlib + the jinja2 template), on generated evidence of about N delivery rows.

    .venv/bin/python benchmarks/bench_report.py --rows 1000000
    .venv/bin/python benchmarks/bench_report.py --evidence out/dev/report/evidence --repeat 3   # a run's own

`--repeat N` runs the whole report (judge, build, render) N times in one Spark session: the first in a
cold JVM, the others warm -- what the checks' rehearsal during the drain (validation.driver.Rehearsal)
buys the main job.

The evidence is a legal history (`validation.histories`: plain, ordered, exactly-once, dead-lettering
subscriptions) tiled to size, plus one mutated copy so findings, their evidence rows and a sequence
plot exist. Prints each stage's wall time and the size of report.html.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "policies"))


from validation import histories as H  # noqa: E402
from validation.evidence import DeclaredSubscription  # noqa: E402

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
    args = parser.parse_args()
    from validation import report as reporting
    from validation.evidence import RunInfo
    from validation.session import spark_session
    from validation.verdict import judge_run

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
    for attempt in range(1, args.repeat):
        started = time.monotonic()
        reporting.render_html(reporting.judged(spark, evidence))
        print(f"run {attempt} ({'cold JVM' if attempt == 1 else 'warm'}): judge + build + render "
              f"{time.monotonic() - started:.1f} s")
    info = RunInfo.read(evidence)
    publishes, deliveries = (f.cache() for f in reporting.read_evidence(spark, evidence))
    print(f"evidence: {publishes.count()} publish rows, {deliveries.count()} delivery rows")
    started = time.monotonic()
    verdict = judge_run(publishes, deliveries, info)
    judged = time.monotonic()
    result = reporting.build(verdict, info, evidence, publishes, deliveries)
    built = time.monotonic()
    reporting.write(result, work / "report")
    written = time.monotonic()
    size = (work / "report" / "report.html").stat().st_size
    print(f"judge {judged - started:.1f} s · build (plot data) {built - judged:.1f} s · render + write "
          f"{written - built:.1f} s · report.html {size / 1e6:.1f} MB, {len(verdict.findings)} findings")
    source = f"--evidence {args.evidence}" if args.evidence else f"--rows {args.rows}"
    print(f"run {args.repeat} (the stages above): judge + build + render + write {written - started:.1f} s")
    print(f"command: .venv/bin/python benchmarks/bench_report.py {source} --repeat {args.repeat}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
