"""Every program in examples/invalid/ is rejected (exit 1) by exactly the mandatory rule it is named
after, through the real command: offline plan of the program, pack process, gRPC."""

from __future__ import annotations

import json

import pytest

from pubsubguard import cli

from support import ROOT
from support.pack_catalog import RULES

EXAMPLES = ROOT / "examples" / "invalid"
NAMES = sorted(p.name for p in EXAMPLES.iterdir() if (p / "Pulumi.yaml").exists())


def test_there_is_one_example_per_mandatory_rule():
    assert NAMES == sorted(r.name for r in RULES if r.level == "mandatory")


@pytest.mark.parametrize("rule", NAMES)
def test_example_is_rejected_by_its_rule(rule, tmp_path):
    report = tmp_path / "report.json"
    code = cli.main(["check", "--root", str(EXAMPLES / rule), "--stack", "example", "--format", "json", "--out", str(report)])
    result = json.loads(report.read_text())
    mandatory = {v["policy"] for v in result["violations"] if v["level"] == "mandatory"}
    assert (code, mandatory) == (1, {rule})
