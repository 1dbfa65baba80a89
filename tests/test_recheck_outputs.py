"""What a re-check and a run print and write (issue 64, items 4 to 10), on evidence the probe's format holds,
judged by real Spark: a re-check writes nothing outside the evidence it re-checks (or its --report) and prints
no path that is not there; findings that rows not read could have made are inconclusive, not errors; each
number of the terminal's summary is the one report.json holds."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import histories as H
from pubsubguard.validation import job
from pubsubguard.validation.evidence import seal
from pubsubguard.validation.evidence.records import DeclaredSubscription, RunInfo

ORDERED = DeclaredSubscription("orders-ordered", "orders", ordering=True)
EOD = DeclaredSubscription("orders-eod", "orders", exactly_once=True, ack_deadline_s=10)
PLAIN = DeclaredSubscription("payments-plain", "payments")


def evidence(directory: Path, seed: int, subscriptions=(ORDERED, PLAIN), **parameters) -> Path:
    """A sealed evidence directory of a legal generated run, with `parameters` added to its run.json."""
    history = H.generate(list(subscriptions), H.Workload(keys=3, messages_per_key=5), seed)
    history.write(directory)
    info = RunInfo.read(directory)
    info.parameters.update(parameters)
    info.write(directory)
    seal.seal(directory, info.run_id)
    return directory


def paths_in(text: str) -> list[str]:
    """The absolute paths a text names (as the terminal prints them: whitespace, parentheses and `;` end one)."""
    return [p.rstrip(".,:") for p in re.findall(r"(?<![\w.])(/[^\s;()'\"]+)", text)]


def test_a_recheck_writes_inside_its_evidence_and_prints_no_path_that_is_not_there(spark, tmp_path, capsys):
    runs = tmp_path / "runs"
    gone = tmp_path / "gone"  # the original run's folder, no longer there
    recorded = {"declared_source": {"kind": "plan", "location": str(gone / "plan.json")},
                "evidence_dir": str(gone / "report" / "evidence"),
                "observations": [f"the Pub/Sub client library in sub-1 logged 2 warnings/errors (commonest: 'x' x2); "
                                 f"full text: {gone / 'report' / 'evidence' / 'client-log-sub-1.txt'}",
                                 f"the Pub/Sub client library logged 3 warnings/errors during the conformance "
                                 f"scenarios (commonest: 'y' x3); full text: {gone / 'report' / 'client-log-conformance.txt'}"]}
    first = evidence(runs / "ev-a", 1, **recorded)
    (first / "client-log-sub-1.txt").write_text("x\nx\n")  # the evidence's own log: in the copy, where it is read
    seal.seal(first, RunInfo.read(first).run_id)
    second = evidence(runs / "ev-b", 2, **recorded)
    capsys.readouterr()

    code = job.main(["--from-evidence", str(first), "--no-progress"], spark=spark)
    out = capsys.readouterr().out
    assert code in (0, 1)
    assert sorted(p.name for p in runs.iterdir()) == ["ev-a", "ev-b"]  # nothing beside the evidence
    report = json.loads((first / "recheck" / "report.json").read_text())
    assert f"report: {first / 'recheck' / 'report.html'}" in out
    for path in paths_in(out):
        assert Path(path).exists(), (path, out)
    assert str(first / "client-log-sub-1.txt") in out  # the evidence's own file, named where it is read
    assert "plan.json (the run's, not here)" in out and "client-log-conformance.txt, not in this evidence" in out

    # a re-check of a sibling writes its own report; the first one's stays as it was
    assert job.main(["--from-evidence", str(second), "--no-progress"], spark=spark) in (0, 1)
    assert sorted(p.name for p in runs.iterdir()) == ["ev-a", "ev-b"]
    assert json.loads((first / "recheck" / "report.json").read_text()) == report
    assert json.loads((second / "recheck" / "report.json").read_text())["run_id"] != report["run_id"]
    # the re-check's report inside the evidence is no part of it: the seal still holds the evidence whole
    assert job.main(["--from-evidence", str(first), "--no-progress"], spark=spark) == code
    assert json.loads((first / "recheck" / "report.json").read_text())["evidence_integrity"]["complete"]
