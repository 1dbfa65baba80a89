"""A small estate of its own per test (a unique topic, short ack deadlines, planned from the project's own
infra/), the verification job run on it (real Spark, the emulator), and the probe twins a run leaves behind."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from pubsubguard.core.plan import make_plan
from pubsubguard.core.project import project_root
from pubsubguard.validation import job

# One topic {t} whose subscriptions follow (tests/prove/probe/test_push.py declares its own).
ONE_TOPIC_STACK = """config:
  gcp:project: pubsubguard-dev
  pubsubguard:projectNumber: "100000000001"
  pubsubguard:estate:
    probe_isolation: true
    topics:
      - name: {t}
        subscriptions:
"""
STACK_YAML = ONE_TOPIC_STACK + """          - name: {t}-ordered
            ordering: true
            ack_deadline_seconds: 10
            dead_letter: {{max_delivery_attempts: 5}}
          - name: {t}-eod
            exactly_once: true
            ack_deadline_seconds: 10
          - name: {t}-plain
            ack_deadline_seconds: 10
          - name: {t}-dl
            ack_deadline_seconds: 10
            dead_letter: {{max_delivery_attempts: 5}}
          - name: {t}-push
            delivery: {{type: push, endpoint: "https://example.com/push"}}
"""


def make_estate(tmp_path: Path, stack_yaml: str = STACK_YAML) -> tuple[Path, dict, str]:
    """A project dir with its own stack (`stack_yaml`, `{t}` the topic); returns (plan file, plan, topic name)."""
    topic = f"vt-{uuid.uuid4().hex[:8]}"
    root = tmp_path / "project"
    root.mkdir()
    (root / "Pulumi.yaml").write_text(
        f"name: pubsubguard\nruntime: python\nmain: {project_root() / 'infra'}\n"
    )
    (root / "Pulumi.test.yaml").write_text(stack_yaml.format(t=topic))
    plan = make_plan("test", root)
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(json.dumps(plan))
    return plan_file, plan, topic


def verify(spark, plan_file: Path, report: Path, faults: str = "", extra: list[str] = ()) -> tuple[int, dict]:
    code = job.main(
        ["--plan", str(plan_file), "--target", "emulator", "--keys", "3", "--messages-per-key", "6",
         "--drain-timeout", "30", "--report", str(report), "--no-progress", "--faults", faults, *extra],
        spark=spark,
    )
    return code, json.loads((report / "report.json").read_text())


def twins_left(topic: str) -> list[str]:
    from google.cloud import pubsub_v1

    subscriber = pubsub_v1.SubscriberClient()
    return [s.name for s in subscriber.list_subscriptions(request={"project": "projects/pubsubguard-dev"})
            if topic in s.name and "-probe-" in s.name]
