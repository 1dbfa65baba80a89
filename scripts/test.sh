#!/usr/bin/env bash
# The test command (README): sets everything up, then runs the project's tests in the project's
# virtualenv and the policy pack's unit tests in the pack's own virtualenv, and prints one total.
# Extra arguments go to the main pytest run (e.g. `-k plan`, `-x`).
# The main run is spread over WORKERS pytest processes (pytest-xdist, `-n`): the timed waits (ack deadlines,
# drains) overlap, but most of the run is CPU (Pulumi programs, Spark: about 60 CPU-minutes, measured), so
# more workers than cores only slow each test down. `--dist loadgroup`: a
# test goes to whichever worker is free, but tests sharing a module-scoped fixture stay together
# (tests/conftest.py). PUBSUBGUARD_TEST_WORKERS=0 (or `-n 0` among the arguments) runs them in one process.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bash scripts/setup.sh || exit 2
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

# 2 workers: 34.5 min for the main run on this 2-core machine, 4: 36.6 min, 1: about 53 (docs/performance.md)
workers="${PUBSUBGUARD_TEST_WORKERS:-2}"
.venv/bin/python -m pytest tests -n "$workers" --dist loadgroup --junitxml="$out/main.xml" --durations=30 "$@"
main_rc=$?
policies/venv/bin/python -m pytest tests/policies -p no:cacheprovider --junitxml="$out/pack.xml"
pack_rc=$?

.venv/bin/python - "$out/main.xml" "$out/pack.xml" <<'PY'
import sys
import xml.etree.ElementTree as ET

total = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
for path in sys.argv[1:]:
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        total["errors"] += 1
        print(f"no results from {path}")
        continue
    for suite in root.iter("testsuite"):
        for key in total:
            total[key] += int(suite.get(key, 0))
failed = total["failures"] + total["errors"]
passed = total["tests"] - failed - total["skipped"]
print(f"total: {passed} passed, {failed} failed, {total['skipped']} skipped")
PY
if [ "$main_rc" -ne 0 ] || [ "$pack_rc" -ne 0 ]; then
  exit 1
fi
