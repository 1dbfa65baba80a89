"""`pubsubguard conform --self-test`: the whole chain proven against a known truth.

A small built-in estate (one topic with a plain, an exactly-once, an ordered and a dead-lettering
subscription; the dead-letter topic and its drain) is planned, applied on the target and verified
(`pubsubguard.validation.job`, real Spark, the real client library) with a built-in schedule of
planted anomalies (`PLANTED_SCHEDULE`, `pubsubguard.validation.wire.nemesis`: the fault layer answers
wrongly on the target's behalf). The checks must report exactly the planted anomalies, each on its
planted message, and nothing else (`applied_faults.judge_planted`); a finding a violated conformance
scenario explains is the target's own deviation and is counted apart, never hidden. The last line:
`self-test: planted N/N found, 0 unplanted errors, A unplanted advisories` (exit 0 only then; exit 1 naming each miss
or extra; an unplanted advisory, which breaks no guarantee, is named and counted).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from .checks import applied_faults
from .checks.wording import plural

KEYS, MESSAGES_PER_KEY = 3, 6
FAULTS = "poison=0.06"  # one poison message: nacked to the dead-letter topic by the dead-lettering subscription

STACK = """config:
  gcp:project: pubsubguard-selftest
  pubsubguard:projectNumber: "100000000001"
  pubsubguard:estate:
    probe_isolation: true
    topics:
      - name: {t}
        subscriptions:
          - name: {t}-plain
            ack_deadline_seconds: 10
          - name: {t}-eod
            exactly_once: true
            ack_deadline_seconds: 10
          - name: {t}-ordered
            ordering: true
            ack_deadline_seconds: 10
          - name: {t}-dl
            ack_deadline_seconds: 10
            retry_policy: {{minimum_backoff: 1s, maximum_backoff: 2s}}
            dead_letter: {{topic: {t}-dead, max_delivery_attempts: 5}}
      - name: {t}-dead
        subscriptions:
          - name: {t}-dead-drain
            ack_deadline_seconds: 10
"""


def planted_schedule(t: str) -> dict:
    """The built-in planted anomalies, on the estate of topic `t` (keys key-000..key-002, seqs 0..5)."""
    return {"faults": [
        {"kind": "drop_delivery", "subscription": f"{t}-plain", "key": "key-000", "seq": 1},
        {"kind": "drop_delivery", "subscription": f"{t}-eod", "key": "key-001", "seq": 2},
        {"kind": "drop_delivery", "subscription": f"{t}-ordered", "key": "key-000", "seq": 5},
        {"kind": "duplicate_after_ack", "subscription": f"{t}-eod", "key": "key-002", "seq": 3},
        {"kind": "duplicate_after_ack", "subscription": f"{t}-plain", "key": "key-001", "seq": 0},
        {"kind": "ack_lie", "subscription": f"{t}-eod", "key": "key-000", "seq": 4},
        {"kind": "swap", "subscription": f"{t}-ordered", "key": "key-001", "seq": 4},
        {"kind": "swap", "subscription": f"{t}-ordered", "key": "key-002", "seq": 0},
        {"kind": "strip_dead_letter_attributes", "subscription": f"{t}-dead-drain", "rate": 1},
    ]}


def findings_of(report: dict) -> list[dict]:
    """Every finding of a report.json once, flat, each with its subscription: the config drift of plumbing (a
    dead-letter drain not probed) included, as report.json lists it."""
    flat = {f["id"]: {**f, "subscription": f.get("subscription") or name}
            for name, sub in report["subscriptions"].items()
            for items in (sub.get("findings") or {}).values() for f in items}
    flat.update({f["id"]: f for f in report.get("config_drift") or () if f["id"] not in flat})
    return list(flat.values())


def judge(run_dir: Path) -> dict:
    """The self-test's verdict from a finished run's report.json and run.json."""
    from .evidence.records import RunInfo

    report = json.loads((run_dir / "report.json").read_text())
    info = RunInfo.read(run_dir / "evidence")
    applied = info.parameters.get("nemesis", {}).get("applied", [])
    subscriptions = {s.name: s for s in info.subscriptions}
    findings = findings_of(report)
    verdict = applied_faults.judge_planted(applied, findings, subscriptions, explained=lambda f: bool(f.get("explained_by")))
    # duplicates planted where exactly-once is not declared: counted as redeliveries, no finding
    redeliveries = {name: (sub.get("figures") or {}).get("redeliveries", 0)
                    for name, sub in report["subscriptions"].items()}
    verdict["redeliveries"] = applied_faults.judge_redeliveries(applied, subscriptions, redeliveries)
    verdict["applied"] = applied
    # advisories no planted entry accounts for (and no scenario explains): no guarantee broken, yet not planted
    verdict["unplanted_advisories"] = [f for f in findings if f.get("severity") == "advisory"
                                       and not f.get("planted_by") and not f.get("explained_by")]
    return verdict


def summary(verdict: dict) -> tuple[int, list[str]]:
    """(exit code, lines): each miss and extra named, then `self-test: planted N/N found, U unplanted errors, A unplanted
    advisories` (exit 0: every planted anomaly found and no unplanted error; an advisory breaks no guarantee, and is
    named and counted)."""
    lines = []
    for item in verdict["missed"]:
        lines.append(f"self-test: MISSED planted {item['planted']} (faults[{item['entry']}]) on {item['subscription']} "
                     f"{item['key']} seq {item['seq']}: no {item['kind']} finding")
    for f in verdict["unplanted"]:
        lines.append(f"self-test: UNPLANTED finding {f['kind']}{'/' + f['form'] if f.get('form') else ''} on "
                     f"{f['subscription']} {f.get('key')} seq {f.get('seq')}: {f.get('detail', '')}")
    red = verdict["redeliveries"]
    for item in red["missed"]:
        lines.append(f"self-test: MISSED planted duplicate_after_ack on {item['subscription']} (no exactly-once): "
                     f"{item['planted']} planted, {item['counted']} redeliveries counted")
    for item in red["unplanted"]:
        lines.append(f"self-test: UNPLANTED redeliveries on {item['subscription']}: {item['counted']} counted, "
                     f"{item['planted']} planted")
    for f in verdict.get("unplanted_advisories", ()):
        lines.append(f"self-test: UNPLANTED advisory {f['kind']}{'/' + f['form'] if f.get('form') else ''} on "
                     f"{f['subscription']}: {f.get('detail', '')}")
    for f in verdict["explained"]:
        lines.append(f"self-test: the target's own deviation (explained by {', '.join(f['explained_by'])}): "
                     f"{f['kind']} on {f['subscription']} {f.get('key')} seq {f.get('seq')}")
    planted = len(verdict["expected"]) + len(red["expected"])
    found = len(verdict["found"]) + len(red["found"])
    extra = len(verdict["unplanted"]) + len(red["unplanted"])
    advisories = len(verdict.get("unplanted_advisories", ()))
    lines.append(f"self-test: planted {found}/{planted} found, {extra} unplanted {plural(extra, 'error')}, "
                 f"{advisories} unplanted {plural(advisories, 'advisory', 'advisories')}")
    return (0 if found == planted and not extra and planted else 1), lines


def estate_plan(directory: Path, topic: str, stack: str = "selftest", estate: str = STACK) -> tuple[dict, Path]:
    """The built-in estate (`STACK`, or `estate`: a stack file with `{t}` for the topic) on `topic`, planned:
    (the plan, `<directory>/plan.json`)."""
    from pubsubguard.core.plan import make_plan
    from pubsubguard.core.project import project_root

    root = directory / "project"
    root.mkdir(parents=True, exist_ok=True)
    (root / "Pulumi.yaml").write_text(f"name: pubsubguard\nruntime: python\nmain: {project_root() / 'infra'}\n")
    (root / f"Pulumi.{stack}.yaml").write_text(estate.format(t=topic))
    plan = make_plan(stack, root)
    plan_file = directory / "plan.json"
    plan_file.write_text(json.dumps(plan))
    return plan, plan_file


def self_test(report: Path, spark=None, log=print) -> int:
    """Plan, apply and verify the built-in estate with the planted schedule on the emulator
    (PUBSUB_EMULATOR_HOST); judge; print. The caller starts the emulator when none runs."""
    from pubsubguard.core.apply import apply_plan
    from . import job

    topic = f"selftest-{uuid.uuid4().hex[:8]}"
    plan, plan_file = estate_plan(report, topic)
    schedule_file = report / "schedule.json"
    schedule_file.write_text(json.dumps(planted_schedule(topic), indent=1) + "\n")
    log(f"self-test: estate {topic} ({plan_file}), planted schedule {schedule_file}")
    apply_plan(plan)
    run_dir = report / "run"
    job.main(["--plan", str(plan_file), "--target", "emulator", "--keys", str(KEYS),
              "--messages-per-key", str(MESSAGES_PER_KEY), "--drain-timeout", "40", "--report", str(run_dir),
              "--no-progress", "--faults", FAULTS, "--nemesis", str(schedule_file), "--conform"], spark=spark)
    if not (run_dir / "report.json").exists():
        log("self-test: the verification run wrote no report (its error is above)")
        return 2
    code, lines = summary(judge(run_dir))
    for line in lines:
        log(line)
    return code
