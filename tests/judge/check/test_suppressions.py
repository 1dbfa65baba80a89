"""Suppressions (a comment on the resource's line, a file) and baselines: a suppressed violation is
listed with its reason in every format and does not count; a baseline lets only new violations fail;
bad input is one line and exit 2."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from support.one_line import one_line
from pubsubguard.judging import suppressions

from support import ROOT
TEAM = ROOT / "examples" / "team-orders"
ORDERED = "        self.ordered = gcp.pubsub.Subscription(\n"


def cli(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "pubsubguard", *argv, "--python", sys.executable],
                          capture_output=True, text=True, timeout=180, cwd=cwd,
                          env={**os.environ, "NO_GCE_CHECK": "true"})
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    return done


@pytest.fixture
def team(tmp_path) -> Path:
    """The team's program with one mandatory violation: an ack deadline of 5 s on the ordered subscription."""
    copy = tmp_path / "team"
    shutil.copytree(TEAM, copy, ignore=shutil.ignore_patterns("__pycache__", "venv"))
    channel = copy / "channel.py"
    text = channel.read_text()
    assert "ack_deadline_seconds=30" in text
    channel.write_text(text.replace("enable_message_ordering=True, ack_deadline_seconds=30",
                                    "enable_message_ordering=True, ack_deadline_seconds=5"))
    return copy


def comment_above(team: Path, comment: str, line: str = ORDERED) -> None:
    channel = team / "channel.py"
    text = channel.read_text()
    assert line in text
    channel.write_text(text.replace(line, f"        {comment}\n{line}"))


# --- the data ---------------------------------------------------------------------------------------
def test_the_fingerprint_ignores_stack_and_project():
    def violation(urn):
        return SimpleNamespace(policy="ack-deadline-in-range", urn=urn, message="m")

    dev = violation("urn:pulumi:dev::team-orders::team:index:Channel$gcp:pubsub/subscription:Subscription::orders-ordered")
    prod = violation("urn:pulumi:prod::renamed::team:index:Channel$gcp:pubsub/subscription:Subscription::orders-ordered")
    assert suppressions.fingerprint(dev) == suppressions.fingerprint(prod) == (
        "ack-deadline-in-range::team:index:Channel$gcp:pubsub/subscription:Subscription::orders-ordered")


@pytest.mark.parametrize("content, says", [
    ("suppressions:\n  - {rule: topic-kms-key, resource: orders}\n", "suppressions[0].reason: a suppression needs a reason"),
    ("suppressions:\n  - {rule: topic-kms-key, resource: orders, reason: '  '}\n", "suppressions[0].reason"),
    ("suppressions:\n  - {rule: topic-kms-key, resource: orders, reason: r, until: x}\n", "unknown key 'until'"),
    ("rules: []\n", "expected a mapping with a list 'suppressions'"),
    ("suppressions: [\n", "not valid YAML or JSON"),
])
def test_a_bad_suppressions_file_names_what_is_wrong(tmp_path, content, says):
    path = tmp_path / "suppressions.yaml"
    path.write_text(content)
    with pytest.raises(suppressions.SuppressionError, match=says.replace("[", r"\[").replace("]", r"\]")):
        suppressions.load_file(path)


@pytest.mark.parametrize("content, says", [
    ("{not json", "not JSON"),
    ('{"violations": []}', "expected a baseline written by --create-baseline"),
    ('{"format": "pubsubguard-baseline/1", "violations": [{"policy": "x"}]}', "violations[0]: expected an object"),
])
def test_a_broken_baseline_names_what_is_wrong(tmp_path, content, says):
    path = tmp_path / "baseline.json"
    path.write_text(content)
    with pytest.raises(suppressions.SuppressionError, match=says.replace("[", r"\[").replace("]", r"\]")):
        suppressions.load_baseline(path)


# --- through the command ------------------------------------------------------------------------------
def test_a_comment_suppresses_with_its_reason_in_every_format(team):
    assert cli("check", cwd=team).returncode == 1  # the violation, unsuppressed
    comment_above(team, "# pubsubguard: ignore[ack-deadline-in-range] consumers ack within 2 s (load test OPS-12)")
    text = cli("check", cwd=team)
    assert text.returncode == 0, text.stdout + text.stderr
    assert "Suppressed (1; not counted in the verdict):" in text.stdout
    assert ("[mandatory] ack-deadline-in-range on orders-ordered: consumers ack within 2 s (load test OPS-12) "
            "(channel.py:35)") in text.stdout
    assert text.stdout.rstrip().splitlines()[-1].startswith("PASSED: 0 mandatory")

    document = json.loads(cli("check", "--format", "json", cwd=team).stdout)
    assert document["passed"] is True and document["mandatory"] == 0 and document["suppressed"] == 1
    [suppressed] = [v for v in document["violations"] if v["suppressed"]]
    assert suppressed["policy"] == "ack-deadline-in-range" and suppressed["resource_name"] == "orders-ordered"
    assert suppressed["suppressed"] == {"kind": "inSource", "reason": "consumers ack within 2 s (load test OPS-12)",
                                        "where": "channel.py:35"}
    assert all(v["suppressed"] is None for v in document["violations"] if v is not suppressed)

    sarif = json.loads(cli("check", "--format", "sarif", cwd=team).stdout)
    results = sarif["runs"][0]["results"]
    [entry] = [r for r in results if r.get("suppressions")]
    assert entry["ruleId"] == "ack-deadline-in-range"
    assert entry["suppressions"] == [{"kind": "inSource", "status": "accepted",
                                      "justification": "consumers ack within 2 s (load test OPS-12) (channel.py:35)"}]
    assert len(results) == len(document["violations"])  # nothing dropped


def test_a_suppressions_file_by_resource_name(team, tmp_path):
    path = tmp_path / "suppressions.yaml"
    path.write_text("suppressions:\n  - rule: ack-deadline-in-range\n    resource: orders-ordered\n"
                    "    reason: consumers ack within 2 s\n")
    done = cli("check", "--suppressions", str(path), cwd=team)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"consumers ack within 2 s ({path}: suppressions[0])" in done.stdout


@pytest.mark.parametrize("comment, says", [
    ("# pubsubguard: ignore[ack-deadline-in-range]", "channel.py:35: `pubsubguard: ignore[ack-deadline-in-range]` needs a reason"),
    ("# pubsubguard: ignore[no-such-rule] because", "channel.py:35: suppresses 'no-such-rule', which is not a rule of the pack"),
])
def test_a_bad_comment_is_one_line(team, comment, says):
    comment_above(team, comment)
    one_line(cli("check", cwd=team), 2, "pubsubguard check: ", says)


def test_a_comment_on_no_resource_is_one_line(team):
    comment_above(team, "# pubsubguard: ignore[topic-kms-key] reason", line="        child = pulumi.ResourceOptions(parent=self)\n")
    one_line(cli("check", cwd=team), 2, "is not on (or just above) a line that creates a resource")


def test_a_suppression_of_an_unknown_resource_is_one_line(team, tmp_path):
    path = tmp_path / "suppressions.yaml"
    path.write_text("suppressions:\n  - {rule: topic-kms-key, resource: no-such-topic, reason: r}\n")
    one_line(cli("check", "--suppressions", str(path), cwd=team), 2,
             "suppressions[0]: suppresses 'topic-kms-key' on 'no-such-topic', which the program does not declare")


def test_a_baseline_fails_only_on_new_violations(team, tmp_path):
    baseline = tmp_path / "baseline.json"
    created = cli("check", "--create-baseline", str(baseline), cwd=team)
    assert created.returncode == 1  # the verdict is unchanged; the baseline is written
    assert f"-> {baseline}" in created.stderr
    entries = json.loads(baseline.read_text())["violations"]
    assert any(e["fingerprint"].startswith("ack-deadline-in-range::") for e in entries)

    known = cli("check", "--baseline", str(baseline), cwd=team)
    assert known.returncode == 0, known.stdout + known.stderr
    assert f"In the baseline {baseline}" in known.stdout

    channel = team / "channel.py"  # a new mandatory violation on another resource
    channel.write_text(channel.read_text().replace("ack_deadline_seconds=60", "ack_deadline_seconds=700"))
    new = cli("check", "--baseline", str(baseline), "--format", "json", cwd=team)
    assert new.returncode == 1
    document = json.loads(new.stdout)
    assert [(v["policy"], v["resource_name"]) for v in document["violations"]
            if v["level"] == "mandatory" and not v["suppressed"]] == [("ack-deadline-in-range", "orders-exactly-once")]
    assert document["baseline"]["known"] >= 1


def test_a_baseline_written_with_the_earlier_urn_form_still_holds(team, tmp_path):
    """Before URNs followed the engine, a top-level resource's type chain began with the stack's type and a nested
    one named only its parent's own type. Such a baseline keeps its known violations known and none gone."""
    main = team / "__main__.py"  # a top-level topic too (its advisory violations: a chain of one type)
    main.write_text(main.read_text() + '\nimport pulumi_gcp as gcp\n\nloose = gcp.pubsub.Topic("loose")\n')
    baseline = tmp_path / "baseline.json"
    assert cli("check", "--create-baseline", str(baseline), cwd=team).returncode == 1
    document = json.loads(baseline.read_text())

    def earlier(print_: str) -> str:
        policy, rest = print_.split("::", 1)
        chain, name = rest.rsplit("::", 1)
        types = chain.split("$")
        return f"{policy}::{'$'.join(['pulumi:pulumi:Stack'] + types if len(types) == 1 else types[-2:])}::{name}"

    changed = [e for e in document["violations"] if earlier(e["fingerprint"]) != e["fingerprint"]]
    assert changed and any("$" not in e["fingerprint"].split("::")[1] for e in changed)  # a top-level one too
    for entry in document["violations"]:
        entry["fingerprint"] = earlier(entry["fingerprint"])
    baseline.write_text(json.dumps(document))
    known = cli("check", "--baseline", str(baseline), "--format", "json", cwd=team)
    assert known.returncode == 0, known.stdout + known.stderr
    result = json.loads(known.stdout)
    assert result["baseline"]["known"] == len(document["violations"]) and result["baseline"]["gone"] == []


def test_the_form_both_urn_forms_share_keeps_the_parent_and_drops_the_stack():
    from pubsubguard.judging.suppressions import same_resource

    now = "rule::team:index:Outer$team:index:Channel$gcp:pubsub/topic:Topic::orders"
    assert same_resource(now) == same_resource("rule::team:index:Channel$gcp:pubsub/topic:Topic::orders")
    assert same_resource("rule::gcp:pubsub/topic:Topic::t") == same_resource(
        "rule::pulumi:pulumi:Stack$gcp:pubsub/topic:Topic::t")
    assert same_resource(now) != same_resource("rule::team:index:Other$gcp:pubsub/topic:Topic::orders")
    assert same_resource(now) != same_resource(now.replace("::orders", "::payments"))


def test_a_broken_baseline_is_one_line(team, tmp_path):
    path = tmp_path / "baseline.json"
    path.write_text("[]")
    one_line(cli("check", "--baseline", str(path), cwd=team), 2, f"--baseline {path}: expected a baseline")


def test_a_policy_pack_that_is_not_a_pack_is_one_line(team, tmp_path):
    one_line(cli("check", "--policy-pack", str(tmp_path), cwd=team), 2, f"--policy-pack {tmp_path}: no PulumiPolicy.yaml")


# --- the outcome: one value, built once -----------------------------------------------------------------
def _judgement(*violations, unjudged=()):
    from pubsubguard.judging.result import Judgement

    return Judgement(pack="p", pack_version="1", stack="dev", source="Pulumi.dev.yaml", resources=2, policies=(),
                     levels={"ack-deadline-in-range": "mandatory", "topic-kms-key": "advisory"},
                     violations=tuple(violations), unjudged=tuple(unjudged))


def _violation(policy, level, name):
    from pubsubguard.judging.result import Violation

    return Violation(policy=policy, level=level, message=f"{name} breaks {policy}", urn=f"urn:x::{name}",
                     resource_type="gcp:pubsub/topic:Topic", resource_name=name)


def test_the_outcome_carries_each_suppression_state_and_derives_its_verdict():
    import dataclasses

    from pubsubguard.judging.result import Suppression, compose

    found = (_violation("ack-deadline-in-range", "mandatory", "a"), _violation("ack-deadline-in-range", "mandatory", "b"),
             _violation("ack-deadline-in-range", "mandatory", "c"), _violation("topic-kms-key", "advisory", "d"))
    by = {0: Suppression("ack-deadline-in-range", "", "why", "inSource", "x.py:3"),
          1: Suppression("ack-deadline-in-range", "b", "why", "external", "s.yaml: suppressions[0]"),
          2: Suppression("ack-deadline-in-range", "urn:x::c", "known", "external", "base.json", baseline=True)}
    outcome = compose(_judgement(*found), suppressed=by)
    assert [v.state for v in outcome.violations] == ["comment", "file", "baseline", "none"]
    assert (outcome.mandatory, len(outcome.advisory), len(outcome.suppressed)) == ([], 1, 3)
    assert (outcome.passed, outcome.exit_code) == (True, 0)
    assert compose(_judgement(*found)).exit_code == 1  # the same judgement, nothing suppressed
    assert compose(_judgement(*found), suppressed=by, error="the program failed").exit_code == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        outcome.error = "x"  # nothing changes an outcome after it is built


def test_unknowns_fail_is_part_of_the_outcome():
    from pubsubguard.judging.result import compose

    undecided = {"policy": "ack-deadline-in-range", "urn": "urn:x::a", "resource_name": "a", "properties": ["x"]}
    judgement = _judgement(unjudged=[undecided])
    assert compose(judgement).exit_code == 0
    assert compose(judgement, unknowns="fail").exit_code == 1


def test_the_job_summary_is_rendered_from_the_same_outcome(team, tmp_path):
    summary = tmp_path / "summary.md"
    comment_above(team, "# pubsubguard: ignore[ack-deadline-in-range] consumers ack within 2 s (load test OPS-12)")
    done = cli("check", "--format", "sarif", "--summary", str(summary), cwd=team)
    assert done.returncode == 0, done.stderr
    text = summary.read_text()
    assert text.startswith("### Stack `dev`: PASSED: 0 mandatory, ")
    [row] = [line for line in text.splitlines() if "consumers ack within 2 s" in line]  # the suppressed table
    assert row.startswith("| mandatory | `ack-deadline-in-range` | `orders-ordered` | `channel.py:")
    assert row.endswith("| consumers ack within 2 s (load test OPS-12) (channel.py:35) |")
    sarif = json.loads(done.stdout)
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith(("| level", "| ---"))]
    assert len(rows) == len(sarif["runs"][0]["results"])  # every result of the SARIF run, once
    bad = tmp_path / "baseline.json"
    bad.write_text("[]")
    one_line(cli("check", "-s", "dev", "--baseline", str(bad), "--summary", str(summary), cwd=team), 2, "expected a baseline")
    assert summary.read_text().endswith("### Stack `dev`: ERROR (the program did not complete): 0 mandatory, 0 advisory, "
                                        "0 suppressed\n\n")
