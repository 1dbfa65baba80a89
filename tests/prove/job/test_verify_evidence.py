"""Evidence survives: a `pubsubguard verify` killed mid-run leaves readable evidence that
`--from-evidence` re-checks; SIGTERM leaves no probe twin behind; after SIGKILL `--cleanup` removes them."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pubsubguard.core.apply import apply_plan
from pubsubguard.core.project import project_root
from support.estates import make_estate, twins_left

pytestmark = pytest.mark.emulator


def start_verify(plan_file: Path, report: Path) -> subprocess.Popen:
    # A long drain (expired messages are held 12 s) keeps the run going while we kill it.
    return subprocess.Popen(
        [sys.executable, "-m", "pubsubguard", "verify", "--plan", str(plan_file), "--target", "emulator",
         "--keys", "3", "--messages-per-key", "6", "--faults", "expire=0.5", "--drain-timeout", "120",
         "--report", str(report), "--no-progress"],
        cwd=project_root(), env={**os.environ}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )


def wait_for_deliveries(process: subprocess.Popen, evidence: Path, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # A pull subscriber task's part (`part-sub-…`): the push receiver's (`part-push-…`) may come first; and a
        # publisher's part: each writer flushes on its own clock, so deliveries can be on disk before any publish
        # row (seen under load 12: a run killed then had nothing published to re-check)
        delivered = list((evidence / "deliveries").glob("part-sub-*.parquet")) if (evidence / "deliveries").exists() else []
        published = list((evidence / "publishes").glob("part-*.parquet")) if (evidence / "publishes").exists() else []
        if delivered and published:
            return
        if process.poll() is not None:
            raise AssertionError(f"verify ended early: {process.stdout.read().decode()[-6000:]}")
        time.sleep(0.5)
    raise AssertionError("no delivery evidence was flushed in time")


def test_sigterm_keeps_evidence_and_leaves_no_twins(spark, emulator, tmp_path):
    plan_file, plan, topic = make_estate(tmp_path)
    apply_plan(plan)
    report = tmp_path / "report"
    process = start_verify(plan_file, report)
    wait_for_deliveries(process, report / "evidence")
    assert len(twins_left(topic)) >= 3  # the run is live: its twins exist
    process.send_signal(signal.SIGTERM)
    output = process.communicate(timeout=120)[0].decode()
    assert process.returncode != 0, output
    assert twins_left(topic) == [], output
    # Spark's log lines went to the report directory, not the terminal
    assert (report / "spark.log").exists() and "log4j" not in output, output

    from pubsubguard.validation import job

    code = job.main(["--from-evidence", str(report / "evidence"), "--report", str(tmp_path / "recheck"), "--no-progress"],
                    spark=spark)
    result = json.loads((tmp_path / "recheck" / "report.json").read_text())
    assert code == result["exit_code"]
    assert result["subscriptions"][f"{topic}-ordered"]["figures"]["delivered"] > 0
    # interrupted, the run still sealed what it recorded: the re-check read all of it
    assert (report / "evidence" / "seal.json").exists() and result["evidence_integrity"]["complete"], output


def test_sigkill_evidence_rechecked_and_cleanup_removes_twins(spark, emulator, tmp_path):
    plan_file, plan, topic = make_estate(tmp_path)
    apply_plan(plan)
    report = tmp_path / "report"
    process = start_verify(plan_file, report)
    wait_for_deliveries(process, report / "evidence")
    process.kill()
    process.communicate(timeout=60)
    assert twins_left(topic), "SIGKILL cannot clean up: twins are expected to remain until --cleanup"

    from pubsubguard.validation import job

    code = job.main(["--from-evidence", str(report), "--no-progress"], spark=spark)
    result = json.loads((report / "evidence" / "recheck" / "report.json").read_text())  # its default: inside the evidence
    assert code == result["exit_code"] == 1
    # killed before sealing: said so, and nothing judged from what may be incomplete is said to hold
    assert not (report / "evidence" / "seal.json").exists() and result["evidence_integrity"]["sealed"] is False
    assert any(o.startswith("evidence unsealed") for o in result["observations"])
    assert all(status != "holds" for sub in result["subscriptions"].values()
               for g, status in sub["guarantees"].items() if g != "endpoint_pinning")
    published = sum(result["subscriptions"][f"{topic}-{s}"]["figures"]["published"] for s in ("ordered", "eod", "plain"))
    assert published > 0

    cleaned = subprocess.run(
        [sys.executable, "-m", "pubsubguard", "verify", "--cleanup", "--plan", str(plan_file), "--target", "emulator"],
        cwd=project_root(), env={**os.environ}, capture_output=True, text=True, timeout=120,
    )
    assert cleaned.returncode == 0, cleaned.stderr
    assert "probe twin(s) deleted" in cleaned.stdout
    assert twins_left(topic) == []
