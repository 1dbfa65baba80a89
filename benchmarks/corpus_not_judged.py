"""The verdicts and "Not judged" entries of `pubsubguard check` over the whole corpus (`tests/corpus/`),
to compare two versions of the check (issue 26: the count must go down without any false rejection).

    .venv/bin/python benchmarks/corpus_not_judged.py            # this checkout
    .venv/bin/python benchmarks/corpus_not_judged.py --json F   # also write every entry to F

Prints, per program, the exit code, the mandatory rules and the not-judged entries (rule on resource),
then the totals."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tests" / "corpus"


def judge(program: Path, stack: str) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "report.json"
        done = subprocess.run([sys.executable, "-m", "pubsubguard", "check", "--root", str(program), "--stack", stack,
                               "--format", "json", "--out", str(out)], capture_output=True, text=True,
                              env={**os.environ, "VIRTUAL_ENV": sys.prefix}, cwd=ROOT)
        report = json.loads(out.read_text()) if out.exists() else {}
    return {"exit": done.returncode,
            "mandatory": sorted({v["policy"] for v in report.get("violations") or [] if v["level"] == "mandatory"}),
            "not_judged": sorted(f"{e['policy']} on {e['resource_name']}" for e in report.get("unjudged") or [])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write every program's result to this file")
    args = parser.parse_args()
    results = {}
    for folder in sorted(p for p in CORPUS.iterdir() if (p / "expected.yaml").exists()):
        stack = yaml.safe_load((folder / "expected.yaml").read_text())["stack"]
        results[folder.name] = found = judge(folder, stack)
        print(f"{folder.name:<50} exit {found['exit']}  mandatory {found['mandatory']}  not judged {len(found['not_judged'])}")
        for entry in found["not_judged"]:
            print(f"    {entry}")
    total = sum(len(r["not_judged"]) for r in results.values())
    print(f"programs {len(results)}, not-judged entries {total}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
