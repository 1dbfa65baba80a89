"""What the evidence's seal (validation/evidence/seal.py) costs, against the main job (issue 37: at most 5 %).

    .venv/bin/python benchmarks/bench_seal.py                      # runs `bash scripts/main.sh` once, then times the seal
    .venv/bin/python benchmarks/bench_seal.py --evidence out/dev/report/evidence --main-seconds 150

The seal adds two costs to a run: writing it when the probe ends (`seal.seal`: one read of every file
the run wrote, SHA-256, a Parquet column of each part) and verifying it when the checks read the evidence
(`seal.check`: every file's size and SHA-256). Both are timed here on the main job's evidence (a copy:
the run's own seal is left as it is), `--repeat` times each, the median kept, and set beside the main
job's wall time (measured here by running `bash scripts/main.sh`, or given). Measure on an idle machine;
the lead's before/after of `bash scripts/main.sh` in one session is the figure the issue asks for, this
is its breakdown.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--evidence", type=Path, default=ROOT / "out" / "dev" / "report" / "evidence")
    parser.add_argument("--main-seconds", type=float, default=None,
                        help="the main job's wall time, if measured already (else `bash scripts/main.sh` is run)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    from pubsubguard.validation.evidence import records, seal

    main_seconds = args.main_seconds
    if main_seconds is None:
        started = time.monotonic()
        subprocess.run(["bash", str(ROOT / "scripts" / "main.sh")], cwd=ROOT, check=False)
        main_seconds = time.monotonic() - started
    with tempfile.TemporaryDirectory(prefix="bench-seal-") as work:
        copy = Path(work) / "evidence"
        shutil.copytree(args.evidence, copy, ignore=shutil.ignore_patterns("checks-input"))
        info = records.RunInfo.read(copy)
        sealing, checking = [], []
        for _ in range(args.repeat):
            t = time.perf_counter()
            document = seal.seal(copy, info.run_id)
            sealing.append(time.perf_counter() - t)
            t = time.perf_counter()
            integrity = seal.check(copy, info)
            checking.append(time.perf_counter() - t)
            assert integrity.complete
    files = len(document["files"])
    size = sum(f["bytes"] for f in document["files"]) / 2**20
    cost = statistics.median(sealing) + statistics.median(checking)
    print(f"evidence: {files} files, {size:,.1f} MiB, rows {document['rows']}")
    print(f"seal written: {statistics.median(sealing) * 1000:,.0f} ms; verified by a check: "
          f"{statistics.median(checking) * 1000:,.0f} ms (median of {args.repeat})")
    print(f"main job: {main_seconds:,.1f} s; the seal: {cost:,.2f} s = {100 * cost / main_seconds:.2f} % of it "
          "(the budget: 5 %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
