"""What report tests compare with: report.json's schema, and the conformance a run's run.json holds when the
listed scenarios were violated (every other one held)."""

from __future__ import annotations

import json

from pubsubguard.validation.conformance.runner import SCENARIOS
from support import ROOT

SCHEMA = json.loads((ROOT / "docs" / "schemas" / "report.schema.json").read_text())


def conformance(violated: set[str]) -> dict:
    scenarios = [{"id": s.id, "behaviour": s.behaviour, "source": s.source,
                  "result": "violated" if s.id in violated else "holds", "detail": "as measured"} for s in SCENARIOS]
    return {"run_id": "0123abcd", "started": "2026-11-23T21:00:00+00:00", "duration_s": 17.0, "file": "conformance.json",
            "summary": {"holds": len(scenarios) - len(violated), "violated": len(violated), "unsupported": 0,
                        "inconclusive": 0}, "scenarios": scenarios}
