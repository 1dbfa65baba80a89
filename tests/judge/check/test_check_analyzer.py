"""The pack as the Pulumi CLI sees it: a process started from its own virtualenv, spoken to over the
gRPC Analyzer protocol (GetAnalyzerInfo, Configure, Analyze, AnalyzeStack)."""

from __future__ import annotations

import copy
import json

import pytest
from google.protobuf import empty_pb2
from pulumi.runtime.proto import analyzer_pb2 as pb

from pubsubguard.policies import pubsub_facts as facts
from pubsubguard import judging
from pubsubguard.judging.judge import judge_main
from pubsubguard.judging.pack import reconcile_config
from pubsubguard.judging.analyzer import level_value, _struct, cannot_judge_entries, plan_context, policy_infos
from pubsubguard import cli
from pubsubguard.core import plan as planning

from support.pack_catalog import BY_NAME, PACK_NAME

SUBSCRIPTION_URN = "urn:pulumi:test::demo::gcp:pubsub/subscription:Subscription::worker"


@pytest.fixture(scope="module")
def pack():
    with judging.PackProcess() as running:
        yield running
    assert running.process is None


@pytest.fixture(scope="module")
def dev_plan():
    return planning.make_plan("dev")


def configure(pack, overrides: dict | None = None) -> dict:
    info = pack.stub.GetAnalyzerInfo(empty_pb2.Empty())
    effective = reconcile_config(policy_infos(info), {}, overrides or {})
    request = pb.ConfigureAnalyzerRequest()
    for name, (level, props) in effective.items():
        request.policyConfig[name].enforcementLevel = level_value(level)
        request.policyConfig[name].properties.update(props)
    pack.stub.Configure(request)
    return effective


def analyze(pack, props: dict, type_: str = facts.SUBSCRIPTION, urn: str = SUBSCRIPTION_URN):
    request = pb.AnalyzeRequest(type=type_, name=urn.rsplit("::", 1)[1], urn=urn, properties=_struct(props))
    return list(pack.stub.Analyze(request).diagnostics)


def test_analyzer_info_lists_every_rule_with_its_level_and_kind(pack):
    info = pack.stub.GetAnalyzerInfo(empty_pb2.Empty())
    assert info.name == PACK_NAME and info.supportsConfig
    policies = {p.name: p for p in info.policies}
    assert set(policies) == set(BY_NAME)
    for name, rule in BY_NAME.items():
        assert policies[name].enforcementLevel == (pb.MANDATORY if rule.level == "mandatory" else pb.ADVISORY), name
        expected_kind = pb.POLICY_TYPE_STACK if rule.stack else pb.POLICY_TYPE_RESOURCE
        assert policies[name].policy_type == expected_kind, name
        assert policies[name].description == rule.description
    schema = policy_infos(info)
    by_name = {p.name: p for p in schema}
    assert by_name["exactly-once-ack-deadline"].config_schema["properties"]["minimumSeconds"]["default"] == 60


def test_analyze_reports_a_mandatory_violation_with_name_level_and_message(pack):
    configure(pack)
    diagnostics = analyze(pack, {"name": "worker", "topic": "projects/p/topics/t", "enableExactlyOnceDelivery": True,
                                 "pushConfig": {"pushEndpoint": "https://x.example.com/", "oidcToken": {"serviceAccountEmail": "a@b"}},
                                 "expirationPolicy": {"ttl": ""}})
    by_policy = {d.policyName: d for d in diagnostics}
    assert set(by_policy) == {"no-exactly-once-on-push"}
    d = by_policy["no-exactly-once-on-push"]
    assert d.enforcementLevel == pb.MANDATORY
    assert d.policyPackName == PACK_NAME
    assert d.message.startswith(BY_NAME["no-exactly-once-on-push"].description + "\n")
    assert "Subscription worker" in d.message and "pull" in d.message


def test_configure_overrides_levels_and_settings(pack):
    props = {"name": "worker", "enableExactlyOnceDelivery": True, "ackDeadlineSeconds": 90, "expirationPolicy": {"ttl": ""},
             "pushConfig": {"pushEndpoint": "https://x/", "oidcToken": {"serviceAccountEmail": "a@b"}}}
    configure(pack, {"no-exactly-once-on-push": "advisory", "exactly-once-ack-deadline": {"enforcementLevel": "mandatory", "minimumSeconds": 120}})
    levels = {d.policyName: d.enforcementLevel for d in analyze(pack, props)}
    assert levels == {"no-exactly-once-on-push": pb.ADVISORY, "exactly-once-ack-deadline": pb.MANDATORY}
    configure(pack, {"all": "disabled"})
    assert analyze(pack, props) == []
    configure(pack)


def test_unknown_values_on_the_wire_produce_no_diagnostic(pack):
    configure(pack)
    diagnostics = analyze(pack, {"name": "worker", "enableExactlyOnceDelivery": planning.UNKNOWN, "ackDeadlineSeconds": planning.UNKNOWN,
                                 "expirationPolicy": planning.UNKNOWN, "pushConfig": {"pushEndpoint": planning.UNKNOWN, "oidcToken": planning.UNKNOWN}})
    # No violation: only the policy SDK's own advisory "can't run policy ... during preview" lines, one per
    # rule that applies and could not decide, naming the unknown properties (issue 26).
    assert diagnostics and all(d.enforcementLevel == pb.ADVISORY for d in diagnostics)
    entries = [e for d in diagnostics for e in cannot_judge_entries(d, "urn:x", {}) or []]
    assert len(entries) == len(diagnostics)
    assert {e["policy"]: e["properties"] for e in entries}["ack-deadline-in-range"] == ["ackDeadlineSeconds"]


def _stack_resource(request, type_, name, props, deps=None):
    item = request.resources.add(type=type_, name=name, urn=f"urn:pulumi:test::demo::{type_}::{name}", properties=_struct(props))
    for key, names in (deps or {}).items():
        item.propertyDependencies[key].urns.extend(f"urn:pulumi:test::demo::{facts.TOPIC}::{n}" for n in names)
    return item


def test_analyze_stack_resolves_unknown_references_through_property_dependencies(pack):
    configure(pack)
    unknown = planning.UNKNOWN
    request = pb.AnalyzeStackRequest()
    _stack_resource(request, facts.TOPIC, "orders", {"name": "orders"})
    _stack_resource(request, facts.TOPIC, "orders-dlq", {"name": "orders-dlq"})
    _stack_resource(request, facts.SUBSCRIPTION, "worker",
                    {"name": "worker", "topic": unknown, "deadLetterPolicy": {"deadLetterTopic": unknown, "maxDeliveryAttempts": 5}},
                    deps={"topic": ["orders"], "deadLetterPolicy": ["orders-dlq"]})
    diagnostics = [d for d in pack.stub.AnalyzeStack(request).diagnostics
                   if cannot_judge_entries(d, "", {}) is None]
    by_policy = {d.policyName: d for d in diagnostics}
    assert set(by_policy) == {"dead-letter-topic-has-subscription", "dead-letter-service-agent-iam"}
    for d in diagnostics:
        assert d.urn.endswith("::worker") and d.enforcementLevel == pb.MANDATORY
        assert "orders-dlq" in d.message
    # The drain and the grants, referenced only through dependencies, satisfy both rules.
    _stack_resource(request, facts.SUBSCRIPTION, "drain", {"name": "drain", "topic": unknown}, deps={"topic": ["orders-dlq"]})
    _stack_resource(request, facts.TOPIC_IAM_MEMBER, "pub", {"topic": unknown, "role": facts.PUBLISHER_ROLE,
                    "member": facts.pubsub_service_agent("1")}, deps={"topic": ["orders-dlq"]})
    _stack_resource(request, facts.SUBSCRIPTION_IAM_MEMBER, "sub", {"subscription": "worker", "role": facts.SUBSCRIBER_ROLE,
                    "member": facts.pubsub_service_agent("1")})
    assert list(pack.stub.AnalyzeStack(request).diagnostics) == []


def test_dev_plan_passes(dev_plan):
    result = judging.compose(judging.judge_plan(dev_plan, source="Pulumi.dev.yaml"))
    assert result.mandatory == [], [v.message for v in result.mandatory]
    assert result.exit_code == 0
    assert result.resources == len(dev_plan["resources"])
    assert {v.policy for v in result.violations} <= {r.name for r in BY_NAME.values() if r.level == "advisory"}


def test_a_broken_plan_is_rejected_one_line_per_violation_mandatory_first(dev_plan):
    plan = copy.deepcopy(dev_plan)
    for resource in plan["resources"]:
        if resource["type"] == facts.SUBSCRIPTION and resource["name"] == "orders-push":
            resource["inputs"]["enableExactlyOnceDelivery"] = True
        if resource["type"] == facts.SUBSCRIPTION and resource["name"] == "orders-ordered-dead-letter-drain":
            resource["inputs"]["topic"] = "projects/pubsubguard-dev/topics/orders"
    result = judging.compose(judging.judge_plan(plan))
    assert result.exit_code == 1
    mandatory = {(v.resource_name, v.policy) for v in result.mandatory}
    assert mandatory == {("orders-push", "no-exactly-once-on-push"), ("orders-ordered", "dead-letter-topic-has-subscription")}
    text = judging.format_text(result)
    lines = text.splitlines()
    push = next(i for i, line in enumerate(lines) if "mandatory no-exactly-once-on-push" in line)
    assert lines[push].startswith("Subscription orders-push: mandatory no-exactly-once-on-push: ")
    assert push < min(i for i, line in enumerate(lines) if " advisory " in line)  # mandatory first
    assert "urn:pulumi:" not in text and "urn:pulumi:" in judging.format_text(result, verbose=True)
    located = judging.format_text(result, locate=lambda v: ("infra/__main__.py", 15))
    assert "infra/__main__.py:15: mandatory no-exactly-once-on-push: Subscription orders-push" in located
    assert lines[-1].startswith("REJECTED: 2 mandatory")


def test_the_pack_process_is_terminated_on_error(tmp_path):
    running = judging.PackProcess()
    with pytest.raises(RuntimeError):
        with running:
            process = running.process
            raise RuntimeError("boom")
    assert process.poll() is not None and running.process is None


def test_missing_pack_virtualenv_is_a_user_error(tmp_path):
    (tmp_path / "PulumiPolicy.yaml").write_text("runtime: {name: python, options: {virtualenv: venv}}\nversion: 0.1.0\n")
    from pubsubguard.core.errors import UserError

    # no virtualenv and no requirements.txt to make one from (pubsubguard.judging.packenv)
    with pytest.raises(UserError, match="requirements.txt does not exist to make one from .in a checkout: run scripts/setup.sh"):
        judging.PackProcess(tmp_path)


def test_a_pack_that_dies_at_start_is_reported_with_its_stderr(tmp_path):
    pack_dir = tmp_path / "pack"
    pack_dir.mkdir()
    (pack_dir / "venv").symlink_to(judging.default_pack_dir() / "venv")
    (pack_dir / "PulumiPolicy.yaml").write_text("runtime: {name: python, options: {virtualenv: venv}}\nversion: 0.1.0\n")
    (pack_dir / "__main__.py").write_text("raise SystemExit('pack exploded')\n")
    with pytest.raises(judging.CheckError, match="pack exploded"):
        with judging.PackProcess(pack_dir):
            pass


@pytest.mark.parametrize(
    "config, message",
    [
        ({"no-such-rule": "advisory"}, "no such policy"),
        ({"topic-kms-key": "fatal"}, "expected one of advisory"),
        ({"exactly-once-ack-deadline": {"minimumSeconds": "sixty"}}, "expected integer"),
        ({"exactly-once-ack-deadline": {"maximum": 3}}, "not a setting"),
    ],
)
def test_bad_policy_config_is_a_user_error(pack, config, message):
    info = pack.stub.GetAnalyzerInfo(empty_pb2.Empty())
    with pytest.raises(judging.CheckError, match=message):
        reconcile_config(policy_infos(info), {}, config, "--policy-config c.json")


def test_cli_formats(tmp_path, capsys):
    plan_file = tmp_path / "plan.json"
    assert cli.main(["plan", "--stack", "dev", "--out", str(plan_file)]) == 0
    assert cli.main(["check", "--plan", str(plan_file), "--format", "json", "--out", str(tmp_path / "r.json")]) == 0
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["passed"] and report["mandatory"] == 0 and report["advisory"] == len(report["violations"]) > 0

    config = tmp_path / "policy.json"
    config.write_text(json.dumps({"topic-kms-key": "mandatory"}))
    assert cli.main(["check", "--stack", "dev", "--format", "sarif", "--policy-config", str(config),
                     "--out", str(tmp_path / "r.sarif")]) == 1
    sarif = json.loads((tmp_path / "r.sarif").read_text())
    assert sarif["version"] == "2.1.0"
    run = sarif["runs"][0]
    rules = [r["id"] for r in run["tool"]["driver"]["rules"]]
    assert set(rules) == set(BY_NAME)
    kms = [r for r in run["results"] if r["ruleId"] == "topic-kms-key"]
    assert kms and all(r["level"] == "error" for r in kms)
    for result in run["results"]:
        assert rules[result["ruleIndex"]] == result["ruleId"]
        location = result["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uri"] and location["region"]["startLine"] >= 1

    capsys.readouterr()
    assert cli.main(["check", "--stack", "dev", "--policy-config", str(tmp_path / "missing.json")]) == 2
    assert "missing.json: no such file" in capsys.readouterr().err


def test_the_judge_process_gives_the_same_result_and_stops_quietly_when_nobody_waits(dev_plan, capfd):
    """The judge process (`check` runs the pack's client there while the program runs) judges as the
    in-process Judge does; when the command stops waiting (Ctrl-C during the stack rules) before its
    answer, the judge stops without a traceback and its pack stops with it."""
    import os
    import threading
    from multiprocessing.connection import Connection

    context = plan_context(dev_plan)
    with judging.JudgeProcess(context) as judge:
        for record in dev_plan["resources"]:
            judge.analyze(record)
        result, peaks = judge.finish(dev_plan)
    expected = judging.judge_plan(dev_plan)
    assert [(v.policy, v.urn, v.message) for v in result.violations] == \
        [(v.policy, v.urn, v.message) for v in expected.violations]
    assert peaks["pack_mib"] > 0 and peaks["judge_mib"] > 0

    to_judge_read, to_judge_write = os.pipe()
    from_judge_read, from_judge_write = os.pipe()
    sending = Connection(to_judge_write, readable=False)
    sending.send((context, {}))
    sending.send(("finish", dev_plan, "", False, False))
    os.close(from_judge_read)  # the command is gone before the answer
    errors = []
    thread = threading.Thread(target=lambda: _catch(errors, judge_main, to_judge_read, from_judge_write))
    thread.start()
    thread.join(120)
    sending.close()
    assert not thread.is_alive() and not errors
    assert "Traceback" not in capfd.readouterr().err


def _catch(errors, function, *args):
    try:
        function(*args)
    except BaseException as err:  # noqa: BLE001 - the test asserts there is none
        errors.append(err)


def test_a_rule_declares_the_setting_given_invoke_results_fill(pack):
    """dead-letter-service-agent-iam's projectNumbers come from given getProject results (its schema says
    so); a rule the user configures keeps the user's settings; no other rule changes."""
    from pubsubguard.core.invokes import InvokeResults

    policies = policy_infos(pack.stub.GetAnalyzerInfo(empty_pb2.Empty()))
    token = "gcp:organizations/getProject:getProject"
    invokes = InvokeResults([{"token": token, "args": {"projectId": "other"}, "result": {"number": "7"}},
                             {"token": token, "result": {"number": 42}}])
    plain = reconcile_config(policies, {}, {})
    filled = reconcile_config(policies, {}, {}, invoke_results=invokes, gcp_project="dev-project")
    assert filled["dead-letter-service-agent-iam"] == ("mandatory", {"projectNumbers": {"other": "7", "dev-project": "42"}})
    assert {k: v for k, v in filled.items() if k != "dead-letter-service-agent-iam"} == \
        {k: v for k, v in plain.items() if k != "dead-letter-service-agent-iam"}
    configured = reconcile_config(policies, {}, {"dead-letter-service-agent-iam": "advisory"}, invoke_results=invokes,
                                  gcp_project="dev-project")
    assert configured["dead-letter-service-agent-iam"] == ("advisory", {"projectNumbers": {}})
