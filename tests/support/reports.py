"""What report tests compare with and share: report.json's schema, the conformance a run's run.json holds when the
listed scenarios were violated (every other one held), two declared subscriptions, and a re-check of evidence into
report.json and report.html."""

from __future__ import annotations

import json
from pathlib import Path

from pubsubguard.validation.conformance.runner import SCENARIOS
from pubsubguard.validation.evidence.records import DeclaredSubscription
from support import ROOT

SCHEMA = json.loads((ROOT / "docs" / "schemas" / "report.schema.json").read_text())
ORDERED = DeclaredSubscription("ordered", "t", ordering=True)
PLAIN = DeclaredSubscription("plain", "t")


def conformance(violated: set[str]) -> dict:
    scenarios = [{"id": s.id, "behaviour": s.behaviour, "source": s.source,
                  "result": "violated" if s.id in violated else "holds", "detail": "as measured"} for s in SCENARIOS]
    return {"run_id": "0123abcd", "started": "2026-11-23T21:00:00+00:00", "duration_s": 17.0, "file": "conformance.json",
            "summary": {"holds": len(scenarios) - len(violated), "violated": len(violated), "unsupported": 0,
                        "inconclusive": 0}, "scenarios": scenarios}


def recheck(spark, evidence: Path, report: Path) -> tuple[int, dict, str]:
    from pubsubguard.validation import job

    code = job.main(["--from-evidence", str(evidence), "--report", str(report), "--no-progress"], spark=spark)
    return code, json.loads((report / "report.json").read_text()), (report / "report.html").read_text()
