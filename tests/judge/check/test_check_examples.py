"""Every program in examples/invalid/ is rejected (exit 1) by exactly the mandatory rule it is named
after, through the real command: offline plan of the program, pack process, gRPC."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pubsubguard import cli

import sys  # noqa: E402
from pathlib import Path as _Path  # noqa: E402

# The pack's catalog, imported as the pack's own interpreter imports it (from its folder: `pubsub_rules`)
sys.path.insert(0, str(_Path(__file__).resolve().parent.parent / "policies"))
from pubsub_rules.catalog import RULES  # noqa: E402

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "invalid"
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
