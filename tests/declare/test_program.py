"""The Pulumi program, run the way the Python language host runs it (runpy inside run_in_stack, config
from PULUMI_CONFIG) against the recording mock monitor: what it declares for the dev stack."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pubsubguard.policies import pubsub_facts as facts

from pubsubguard.core import probe_contract
from pubsubguard.core.plan import UNKNOWN, PlanError, make_plan
from pubsubguard.core.plan_file import dumps

from support import ROOT
AGENT = "serviceAccount:service-100000000001@gcp-sa-pubsub.iam.gserviceaccount.com"


@pytest.fixture(scope="module")
def plan():
    return make_plan("dev", ROOT)


def path_of(plan, topic):
    """A topic's path as the program writes it (a new topic's id is unknown at preview)."""
    return f"projects/{plan['gcp_project']}/topics/{topic['inputs']['name']}"


def by(plan, type_):
    return {r["name"]: r for r in plan["resources"] if r["type"] == type_}


def test_resource_counts_and_types(plan):
    counts: dict[str, int] = {}
    for resource in plan["resources"]:
        counts[resource["type"]] = counts.get(resource["type"], 0) + 1
    assert counts == {
        "pulumi:pulumi:Stack": 1,
        "pubsubguard:index:Topic": 3,
        "pubsubguard:index:Subscription": 6,
        facts.TOPIC: 3 + 2,  # declared + two auto-created dead-letter topics
        facts.SUBSCRIPTION: 6 + 2,  # declared + two dead-letter drains
        facts.TOPIC_IAM_MEMBER: 3,  # publisher grant on each dead-letter topic
        facts.SUBSCRIPTION_IAM_MEMBER: 3,  # subscriber grant on each dead-lettered subscription
    }


def test_ordering_and_exactly_once_flags(plan):
    subs = by(plan, facts.SUBSCRIPTION)
    flags = {
        name: (r["inputs"].get("enableMessageOrdering", False), r["inputs"].get("enableExactlyOnceDelivery", False))
        for name, r in subs.items()
    }
    assert flags["orders-ordered"] == (True, False)
    assert flags["orders-exactly-once"] == (False, True)
    assert flags["orders-ordered-exactly-once"] == (True, True)
    assert flags["orders-push"] == (False, False)
    assert subs["orders-push"]["inputs"]["pushConfig"] == {
        "oidcToken": {"serviceAccountEmail": "pusher@pubsubguard-dev.iam.gserviceaccount.com"},
        "pushEndpoint": "https://orders.example.com/pubsub/push",
    }
    assert subs["orders-exactly-once"]["inputs"]["retryPolicy"] == {"maximumBackoff": "10s", "minimumBackoff": "1s"}
    assert subs["orders-ordered-exactly-once"]["inputs"]["expirationPolicy"] == {"ttl": ""}


def test_dead_letter_policies_point_at_the_right_topic_and_have_a_drain(plan):
    subs = by(plan, facts.SUBSCRIPTION)
    topics = by(plan, facts.TOPIC)
    expected = {
        "orders-ordered": "orders-ordered-dead-letter",
        "orders-exactly-once": "orders-exactly-once-dead-letter",
        "payments-exactly-once": "payments-dead-letter",
    }
    for sub, dl_topic in expected.items():
        policy = subs[sub]["inputs"]["deadLetterPolicy"]
        assert policy == {"deadLetterTopic": path_of(plan, topics[dl_topic]), "maxDeliveryAttempts": 5}, subs[sub]["urn"]
        assert policy["deadLetterTopic"] != subs[sub]["inputs"]["topic"], subs[sub]["urn"]
        drains = [s for s in subs.values() if s["inputs"]["topic"] == path_of(plan, topics[dl_topic])]
        assert drains, f"{topics[dl_topic]['urn']} has no subscription: forwarded messages would be lost"
        # the subscription must not be created before its dead-letter topic
        assert topics[dl_topic]["urn"] in subs[sub]["dependencies"], subs[sub]["urn"]
    assert not any("deadLetterPolicy" in subs[s]["inputs"] for s in ("orders-ordered-exactly-once", "orders-push"))


def test_service_agent_iam_for_every_dead_letter_setup(plan):
    subs = by(plan, facts.SUBSCRIPTION)
    topic_members = {(r["inputs"]["topic"], r["inputs"]["role"], r["inputs"]["member"]) for r in by(plan, facts.TOPIC_IAM_MEMBER).values()}
    sub_members = {(r["inputs"]["subscription"], r["inputs"]["role"], r["inputs"]["member"]) for r in by(plan, facts.SUBSCRIPTION_IAM_MEMBER).values()}
    for name, sub in subs.items():
        policy = sub["inputs"].get("deadLetterPolicy")
        if not policy:
            continue
        dl_topic_name = policy["deadLetterTopic"].rsplit("/", 1)[1]
        assert (dl_topic_name, facts.PUBLISHER_ROLE, AGENT) in topic_members, sub["urn"]
        assert (name, facts.SUBSCRIBER_ROLE, AGENT) in sub_members, sub["urn"]


def test_every_resource_is_parented_and_components_nest(plan):
    urns = {r["urn"]: r for r in plan["resources"]}
    for resource in plan["resources"]:
        if resource["type"] == "pulumi:pulumi:Stack":
            assert resource["parent"] is None
            continue
        assert resource["parent"] in urns, resource["urn"]
        parent_type = urns[resource["parent"]]["type"]
        if resource["type"] == "pubsubguard:index:Topic":
            assert parent_type == "pulumi:pulumi:Stack", resource["urn"]
        elif resource["type"] == "pubsubguard:index:Subscription":
            assert parent_type == "pubsubguard:index:Topic", resource["urn"]
        else:
            assert parent_type.startswith("pubsubguard:index:"), resource["urn"]


def test_region_labels_and_endpoint_outputs(plan):
    outputs = plan["outputs"]
    assert outputs["topics"]["orders"] == {
        "path": "projects/pubsubguard-dev/topics/orders",
        "publisher_endpoint": "us-east1-pubsub.googleapis.com:443",
        "publisher_region": "us-east1",
    }
    sub = outputs["subscriptions"]["orders-exactly-once"]
    assert sub["consumer_endpoint"] == "us-east1-pubsub.googleapis.com:443"
    assert sub["path"] == "projects/pubsubguard-dev/subscriptions/orders-exactly-once"
    assert sub["dead_letter_topic"] == "projects/pubsubguard-dev/topics/orders-exactly-once-dead-letter"
    assert set(outputs["subscriptions"]) == {r["name"] for r in plan["resources"] if r["type"] == "pubsubguard:index:Subscription"}
    subs = by(plan, facts.SUBSCRIPTION)
    assert subs["orders-ordered"]["inputs"]["labels"][facts.CONSUMER_REGION_LABEL] == "us-east1"
    assert by(plan, facts.TOPIC)["orders"]["inputs"]["labels"][facts.PUBLISHER_REGION_LABEL] == "us-east1"


def test_probe_isolation_excludes_probe_messages_from_every_declared_subscription(plan):
    for resource in by(plan, facts.SUBSCRIPTION).values():
        assert probe_contract.PROBE_EXCLUSION_FILTER in resource["inputs"]["filter"], resource["urn"]
    assert by(plan, facts.SUBSCRIPTION)["payments-exactly-once"]["inputs"]["filter"] == (
        f"(attributes:currency) AND {probe_contract.PROBE_EXCLUSION_FILTER}"
    )


def test_plan_is_byte_identical_across_runs_and_processes(plan, tmp_path):
    again = make_plan("dev", ROOT)
    assert dumps(again) == dumps(plan)
    out = tmp_path / "plan.json"
    cli = shutil.which("pubsubguard", path=str(Path(sys.executable).parent))
    subprocess.run([cli, "plan", "--stack", "dev", "--root", str(ROOT), "--out", str(out)], check=True, capture_output=True)
    assert out.read_text() == dumps(plan)
    assert json.loads(out.read_text())["format"] == "pubsubguard-plan/1"


def _stack(tmp_path: Path, config: dict) -> Path:
    shutil.copy(ROOT / "Pulumi.yaml", tmp_path / "Pulumi.yaml")
    shutil.copytree(ROOT / "infra", tmp_path / "infra")
    (tmp_path / ".venv").symlink_to(sys.prefix)  # the virtualenv Pulumi.yaml names
    (tmp_path / "Pulumi.t.yaml").write_text(yaml.safe_dump({"config": config}))
    return tmp_path


def test_bad_estate_fails_before_any_resource_with_file_and_field(tmp_path):
    dev = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]
    dev["pubsubguard:estate"]["topics"][0]["subscriptions"][0]["ack_deadline_seconds"] = 700
    root = _stack(tmp_path, dev)
    with pytest.raises(PlanError) as caught:
        make_plan("t", root)
    assert str(caught.value).splitlines() == [
        "Pulumi.t.yaml: invalid estate (1 problem)",
        "  pubsubguard:estate.topics[0].subscriptions[0].ack_deadline_seconds: must be from 10 to 600 seconds, got 700",
    ]
    # through the CLI: one message, exit 2, no traceback, no plan written
    out = tmp_path / "plan.json"
    cli = shutil.which("pubsubguard", path=str(Path(sys.executable).parent))
    result = subprocess.run([cli, "plan", "--stack", "t", "--root", str(root), "--out", str(out)], capture_output=True, text=True)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "ack_deadline_seconds" in result.stderr
    assert not out.exists()


def test_missing_estate_is_named_and_a_missing_project_number_is_unknown(tmp_path):
    root = _stack(tmp_path, {"gcp:project": "p"})
    with pytest.raises(PlanError, match=r"Pulumi.t.yaml: pubsubguard:estate: required config key is missing"):
        make_plan("t", root)
    dev = yaml.safe_load((ROOT / "Pulumi.dev.yaml").read_text())["config"]
    del dev["pubsubguard:projectNumber"]
    (tmp_path / "Pulumi.t.yaml").write_text(yaml.safe_dump({"config": dev}))
    plan = make_plan("t", root)
    # Offline, getProject's result is unknown, and so is every service-agent member built from it.
    assert [i["token"] for i in plan["unknown_invokes"]] == ["gcp:organizations/getProject:getProject"]
    members = {r["inputs"]["member"] for r in plan["resources"] if r["type"] in facts.IAM_TYPES}
    assert members == {UNKNOWN}
