"""The drain on the real emulator, with real Spark and the client library (validation/probe/drain_clock.py): it waits while
the target delivers, it proves `lost` with a healed final read, it never calls lost what a cut drain did not see
delivered, and it waits for a planted effect however long the subscription's ack deadline."""

from __future__ import annotations

import json
import uuid

import pytest

from pubsubguard.core.apply import apply_plan
from pubsubguard.validation import job, selftest

pytestmark = pytest.mark.emulator

# one topic on the self-test project; each estate adds its subscriptions
_TOPIC = """config:
  gcp:project: pubsubguard-selftest
  pubsubguard:projectNumber: "100000000001"
  pubsubguard:estate:
    probe_isolation: true
    topics:
      - name: {t}
        subscriptions:
"""
# plain and exactly-once subscriptions; the exactly-once one keeps Pub/Sub's default 60 s ack deadline
ESTATE = _TOPIC + """          - name: {t}-plain
            ack_deadline_seconds: 10
          - name: {t}-eod
            exactly_once: true
            ack_deadline_seconds: 60
"""


def _verify(spark, tmp_path, schedule: dict, *options: str) -> tuple[str, int, dict]:
    """The estate on a fresh topic, applied on the emulator and verified under `schedule` (`{t}`: the topic):
    (topic, exit code, report.json)."""
    topic = f"dr-{uuid.uuid4().hex[:8]}"
    plan, plan_file = selftest.estate_plan(tmp_path, topic, "test", ESTATE)
    apply_plan(plan)
    schedule_file = tmp_path / "schedule.json"
    schedule_file.write_text(json.dumps(schedule).replace("{t}", topic))
    report = tmp_path / "report"
    code = job.main(["--plan", str(plan_file), "--target", "emulator", "--keys", "3", "--messages-per-key", "8",
                     "--report", str(report), "--no-progress", "--nemesis", str(schedule_file), *options], spark=spark)
    return topic, code, json.loads((report / "report.json").read_text())


def _findings(result: dict, name: str, kind: str) -> list[dict]:
    return (result["subscriptions"][name]["findings"] or {}).get(kind, [])


SLOW_AND_DROPPED = {"seed": "0", "faults": [
    {"kind": "delay", "rpc": "streaming_pull", "subscription": "{t}-eod", "ms": 400, "rate": 1},
    {"kind": "drop_delivery", "subscription": "{t}-plain", "key": "key-001", "seq": 2},
]}


def test_a_slow_target_is_waited_for_and_a_dropped_delivery_is_lost_after_the_final_read(spark, emulator, tmp_path):
    topic, code, result = _verify(spark, tmp_path, SLOW_AND_DROPPED)
    drain = result["parameters"]["drain"]
    applied = result["parameters"]["nemesis"]["applied"]
    assert any(r["kind"] == "delay" and r["rpc"] == "StreamingPull" for r in applied)
    # the slow subscription settled everything: nothing lost, nothing unsettled there
    assert _findings(result, f"{topic}-eod", "lost") == []
    assert f"{topic}-eod" not in drain["unsettled"]
    assert result["subscriptions"][f"{topic}-eod"]["guarantees"]["completeness"] == "holds"
    # the dropped delivery: the drain ended stuck, the healed final read saw nothing more, so it is lost
    assert drain["ended"] == "stuck" and drain["final_read"]["ended"] == "quiet" and drain["unproven"] == []
    lost = _findings(result, f"{topic}-plain", "lost")
    assert [(f["key"], f["seq"]) for f in lost] == [("key-001", 2)]
    assert lost[0]["planted_by"] and lost[0]["evidence"]
    assert code == 1


def test_a_drain_cut_at_its_ceiling_never_reports_lost(spark, emulator, tmp_path):
    # slow deliveries on plain, and one of its messages withheld for good: at the ceiling it was never delivered
    slow = {"seed": "0", "faults": [
        {"kind": "delay", "rpc": "streaming_pull", "subscription": "{t}-plain", "ms": 1500, "rate": 1},
        {"kind": "drop_delivery", "subscription": "{t}-plain", "key": "key-000", "seq": 1}]}
    topic, code, result = _verify(spark, tmp_path, slow, "--drain-timeout", "1")
    drain = result["parameters"]["drain"]
    plain = f"{topic}-plain"
    assert drain["ended"] == "ceiling" and drain["final_read"] is None
    assert plain in drain["unproven"] and drain["cut"].get(plain, 0) > 0
    every = [f for sub in result["subscriptions"].values() for f in (sub["findings"] or {}).get("lost", [])]
    assert every == []  # never delivered when the drain was cut: unsettled, not lost
    assert result["subscriptions"][plain]["guarantees"]["completeness"] == "inconclusive"
    causes = [c for item in result["explanations"]["guarantees"] if item["subscription"] == plain
              for c in item["causes"]]
    assert any(c["forms"].get("cut") for c in causes)
    assert code == 1  # inconclusive, not holds


def test_an_ack_lie_is_found_whatever_the_ack_deadline(spark, emulator, tmp_path):
    """The lied ack's message comes back one ack deadline (60 s) after its delivery: the drain waits for it, so
    the planted duplicate_after_ack is found with its rows (a 52 s clock ended before it)."""
    lie = {"seed": "0", "faults": [{"kind": "ack_lie", "subscription": "{t}-eod", "key": "key-000", "seq": 4}]}
    topic, code, result = _verify(spark, tmp_path, lie)
    assert any(r["kind"] == "ack_lie" and not r["detail"].startswith("NOT") for r in result["parameters"]["nemesis"]["applied"])
    found = _findings(result, f"{topic}-eod", "duplicate_after_ack")
    assert [(f["key"], f["seq"]) for f in found] == [("key-000", 4)]
    assert found[0]["planted_by"] and len(found[0]["evidence"]) >= 2
    assert result["parameters"]["drain"]["clock"]["drained_s"] >= 55


ORDERED_DEAD_LETTERING = _TOPIC + """          - name: {t}-ordered
            ordering: true
            ack_deadline_seconds: 30
            dead_letter: {{max_delivery_attempts: 5}}
"""


def test_a_stalled_subscription_whose_streams_were_closed_is_stuck_from_the_close_with_nothing_to_read(spark, emulator, tmp_path):
    """The emulator's ordered dead-lettering subscription delivers nothing after a poison message's last attempt
    (conformance ordered-dead-letter-keeps-delivering): the drain closes its streams once it made no progress for
    its window, and from then on nothing reads it, so its unsettled messages are stuck at once -- not one 30 s ack
    deadline after the poison's last nack -- and there is nothing for a final read to read: it only settles what
    still comes until the target is quiet."""
    topic = f"dr-{uuid.uuid4().hex[:8]}"
    plan, plan_file = selftest.estate_plan(tmp_path, topic, "test", ORDERED_DEAD_LETTERING)
    apply_plan(plan)
    report = tmp_path / "report"
    code = job.main(["--plan", str(plan_file), "--target", "emulator", "--keys", "2", "--messages-per-key", "6",
                     "--faults", "poison=0.01", "--report", str(report), "--no-progress"], spark=spark)
    result = json.loads((report / "report.json").read_text())
    drain = result["parameters"]["drain"]
    name = f"{topic}-ordered"
    assert drain["ended"] == "stuck" and set(drain["stalled"]) == {name}
    final = drain["final_read"]
    # nothing to read: the healed probe only settles what still comes until the target is quiet for 5 s
    assert final["ended"] == "closed" and final["closed"] == [name] and final["quiet_s"] == 5.0
    assert drain["unproven"] == []  # what the closed subscription never delivered is proven, as before
    stall = drain["stalled"][name]
    # the target's own sign, seen on the wire by the run's listeners: the emulator fails the stalled subscription's
    # StreamingPulls (UNKNOWN) again and again until the drain closes them
    assert stall["target_failures"] >= 3, stall
    # stuck from the close: the drain did not wait for the poison's ack deadline (30 s) after its last nack
    ended_us = final["started_us"]
    assert ended_us < stall["since_us"] + 30_000_000, (ended_us - stall["since_us"]) / 1e6
    assert "nothing for a final read to read: every unsettled subscription" in " ".join(result["observations"])
    assert code == 1
