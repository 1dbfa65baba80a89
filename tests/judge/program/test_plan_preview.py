"""The offline plan behaves like `pulumi preview` of a new stack for the policy pack: unknowns stay
unknown wherever they are, resources passed as inputs never wait, secrets stay secrets, invokes are
answered offline, project config and `main:` are honoured, a stuck program stops with the resource it
waits for, a broken one with its own file and line."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import yaml

from pubsubguard.policies import pubsub_facts as facts
from pubsubguard import cli
from pubsubguard.core.invokes import InvokeResults
from pubsubguard.core.signatures import SECRET_SIG, SIG
from pubsubguard.core.plan import UNKNOWN, PlanError, make_plan


def program(tmp_path: Path, source: str, config: dict | None = None, project: dict | None = None,
            main: str = ".") -> Path:
    (tmp_path / "Pulumi.yaml").write_text(yaml.safe_dump({"name": "p", "runtime": "python", "main": main, **(project or {})}))
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {"gcp:project": "proj-a", **(config or {})}}))
    folder = tmp_path / main
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__main__.py").write_text(textwrap.dedent(source))
    return tmp_path


def inputs(plan: dict, name: str, type_: str = facts.SUBSCRIPTION) -> dict:
    (found,) = [r for r in plan["resources"] if r["name"] == name and r["type"] == type_]
    return found["inputs"]


def test_values_unknown_at_preview_are_the_engine_sentinel_everywhere(tmp_path):
    root = program(tmp_path, """
        import pulumi, pulumi_gcp as gcp
        topic = gcp.pubsub.Topic("autonamed")                       # name chosen by Pulumi at deploy
        svc = gcp.cloudrun.Service("svc", location="us-east1", template={"spec": {"containers": [{"image": "i"}]}})
        ref = pulumi.StackReference("org/other/prod")
        gcp.pubsub.Subscription("push", name="push", topic=topic.name,
            push_config={"push_endpoint": svc.statuses[0].url.apply(lambda u: u + "/push")},
            labels={"team": ref.get_output("team"), "owner": topic.id.apply(lambda i: "x" + i)},
            dead_letter_policy={"dead_letter_topic": topic.id, "max_delivery_attempts": 5})
    """)
    plan = make_plan("dev", root)
    sub = inputs(plan, "push")
    assert sub["topic"] == UNKNOWN and sub["pushConfig"]["pushEndpoint"] == UNKNOWN
    assert sub["labels"] == {"team": UNKNOWN, "owner": UNKNOWN}
    assert sub["deadLetterPolicy"] == {"deadLetterTopic": UNKNOWN, "maxDeliveryAttempts": 5}
    assert "Unknown object" not in json.dumps(plan)
    assert "name" not in inputs(plan, "autonamed", facts.TOPIC)


def test_a_resource_passed_as_an_input_is_a_reference_resolved_without_waiting(tmp_path):
    root = program(tmp_path, """
        import pulumi_gcp as gcp
        topic = gcp.pubsub.Topic("orders", name="orders")
        dead_letter = gcp.pubsub.Topic("dlq", name="orders-dlq")
        gcp.pubsub.Subscription("worker", name="worker", topic=topic,
            dead_letter_policy={"dead_letter_topic": dead_letter, "max_delivery_attempts": 5})
    """)
    plan = make_plan("dev", root, idle_timeout_s=20)
    (worker,) = [r for r in plan["resources"] if r["name"] == "worker"]
    # A new custom resource's reference is its id, unknown at preview; its dependency names the topic.
    assert worker["inputs"]["topic"] == UNKNOWN
    assert worker["property_dependencies"]["topic"][0].endswith("::orders")
    assert worker["property_dependencies"]["deadLetterPolicy"][0].endswith("::dlq")


def test_secrets_stay_secrets_and_secure_config_is_unknown(tmp_path):
    root = program(tmp_path, """
        import pulumi, pulumi_gcp as gcp
        config = pulumi.Config()
        gcp.pubsub.Topic("orders", name="orders", kms_key_name=config.require_secret("key"),
                         labels=pulumi.Output.secret({"team": "checkout"}))
    """, config={"p:key": {"secure": "v1:AAAA"}})
    topic = inputs(make_plan("dev", root), "orders", facts.TOPIC)
    assert topic["kmsKeyName"] == {SIG: SECRET_SIG, "value": UNKNOWN}
    assert topic["labels"] == {SIG: SECRET_SIG, "value": {"team": "checkout"}}


def test_invokes_are_unknown_unless_given_and_iam_policy_is_evaluated(tmp_path):
    root = program(tmp_path, """
        import pulumi_gcp as gcp
        number = gcp.organizations.get_project().number
        agent = f"serviceAccount:service-{number}@gcp-sa-pubsub.iam.gserviceaccount.com"
        topic = gcp.pubsub.Topic("orders", name="orders")
        gcp.pubsub.TopicIAMMember("agent", topic=topic.name, role="roles/pubsub.publisher", member=agent)
        policy = gcp.organizations.get_iam_policy(bindings=[{"role": "roles/pubsub.viewer", "members": ["user:b@x.com", "user:a@x.com"]}])
        gcp.pubsub.TopicIAMPolicy("policy", topic=topic.name, policy_data=policy.policy_data)
    """)
    plan = make_plan("dev", root)
    assert inputs(plan, "agent", facts.TOPIC_IAM_MEMBER)["member"] == UNKNOWN
    assert [i["token"] for i in plan["unknown_invokes"]] == ["gcp:organizations/getProject:getProject"]
    data = json.loads(inputs(plan, "policy", facts.TOPIC_IAM_POLICY)["policyData"])
    assert data == {"bindings": [{"members": ["user:a@x.com", "user:b@x.com"], "role": "roles/pubsub.viewer"}]}

    given = InvokeResults([{"token": "gcp:organizations/getProject:getProject", "args": {}, "result": {"number": "42"}}])
    plan = make_plan("dev", root, invoke_results=given)
    assert inputs(plan, "agent", facts.TOPIC_IAM_MEMBER)["member"] == facts.pubsub_service_agent("42")
    assert plan["unknown_invokes"] == []


def test_project_config_defaults_types_and_main_folder(tmp_path):
    source = """
        import pulumi, pulumi_gcp as gcp
        config = pulumi.Config()
        gcp.pubsub.Topic("t", name=config.require("topic"), labels={"n": str(config.require_int("copies"))})
    """
    root = program(tmp_path, source, project={"config": {"topic": {"type": "string", "default": "orders"},
                                                          "copies": {"type": "integer"}}},
                   config={"p:copies": 3}, main="src")
    assert inputs(make_plan("dev", root), "t", facts.TOPIC) == {"labels": {"n": "3"}, "name": "orders"}
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {"gcp:project": "proj-a"}}))
    with pytest.raises(PlanError, match=r"Pulumi.dev.yaml: missing configuration value 'p:copies'"):
        make_plan("dev", root)
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {"p:copies": "many"}}))
    with pytest.raises(PlanError, match=r"p:copies: Pulumi.yaml declares type integer"):
        make_plan("dev", root)


def test_a_stuck_program_stops_naming_the_resource_it_waits_for(tmp_path):
    root = program(tmp_path, """
        import asyncio, pulumi, pulumi_gcp as gcp
        loop = asyncio.get_event_loop()
        never = pulumi.Output(set(), loop.create_future(), loop.create_future())
        gcp.pubsub.Topic("stuck", name=never)
    """)
    with pytest.raises(PlanError, match=r"no progress for 2 s, waiting for gcp:pubsub/topic:Topic 'stuck'"):
        make_plan("dev", root, idle_timeout_s=2)


def test_a_program_blocked_outside_its_event_loop_is_stuck_too(tmp_path):
    """The watchdog samples where the program's thread is: blocked in one place (here a lock nobody
    releases, after constructing a topic) is no progress, as waiting in the loop's select is."""
    root = program(tmp_path, """
        import threading, pulumi_gcp as gcp
        gcp.pubsub.Topic("before", name="before")
        lock = threading.Lock()
        lock.acquire()
        lock.acquire()
    """)
    with pytest.raises(PlanError, match=r"no progress for 2 s"):
        make_plan("dev", root, idle_timeout_s=2)


def test_a_failing_program_is_reported_with_its_file_and_line(tmp_path, capsys):
    root = program(tmp_path, """
        import pulumi_gcp as gcp

        topic = gcp.pubsub.Topic("orders", name="orders")
        raise ValueError("no such region")
    """)
    code = cli.main(["check", "--root", str(root), "--stack", "dev", "--format", "json"])
    captured = capsys.readouterr()
    assert code == 2 and "Traceback" not in captured.err
    assert captured.err.strip() == "pubsubguard check: the program failed: __main__.py:5: ValueError: no such region"
    assert json.loads(captured.out)["error"]["message"].endswith("__main__.py:5: ValueError: no such region")


def test_two_topics_named_alike_in_two_projects_are_two_topics(tmp_path, capsys):
    root = program(tmp_path, """
        import pulumi_gcp as gcp
        agent = "serviceAccount:service-1@gcp-sa-pubsub.iam.gserviceaccount.com"
        orders = gcp.pubsub.Topic("orders", name="orders")
        other = gcp.pubsub.Topic("orders-b", name="orders", project="proj-b")
        sub = gcp.pubsub.Subscription("worker", name="worker", topic="projects/proj-a/topics/orders",
            dead_letter_policy={"dead_letter_topic": "projects/proj-b/topics/orders", "max_delivery_attempts": 5})
        gcp.pubsub.Subscription("drain", name="drain", topic=other.name, project="proj-b")
        gcp.pubsub.TopicIAMMember("pub", topic=other.name, project="proj-b", role="roles/pubsub.publisher", member=agent)
        gcp.pubsub.SubscriptionIAMMember("sub", subscription=sub.name, role="roles/pubsub.subscriber", member=agent)
    """)
    code = cli.main(["check", "--root", str(root), "--stack", "dev", "--format", "json"])
    result = json.loads(capsys.readouterr().out)
    assert (code, [v["policy"] for v in result["violations"] if v["level"] == "mandatory"]) == (0, [])
