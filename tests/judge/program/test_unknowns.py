"""Values unknown until deploy through the whole check (issue 26): the plan records where each comes
from, the check lists exactly the rules that could not decide, JSON and SARIF carry the same list with
the unknown inputs that blocked it, and `--unknowns fail` closes the gate."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

PROGRAM = """
    import pulumi_gcp as gcp

    function = gcp.cloudfunctions.Function("handler", runtime="python312", entry_point="main",
                                           event_trigger={"event_type": "e", "resource": "r"},
                                           source_archive_bucket="b", source_archive_object="o")
    topic = gcp.pubsub.Topic("orders", name="orders", message_retention_duration="86400s")
    gcp.pubsub.Subscription("orders-push", name="orders-push", topic=topic.id, expiration_policy={"ttl": ""},
                            push_config={"push_endpoint": function.https_trigger_url,
                                         "oidc_token": {"service_account_email": "push@acme-prod.iam.gserviceaccount.com"}})
"""


def project(tmp_path: Path) -> Path:
    (tmp_path / "Pulumi.yaml").write_text(yaml.safe_dump({"name": "team", "runtime": "python"}))
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {"gcp:project": "acme-prod"}}))
    (tmp_path / "__main__.py").write_text(textwrap.dedent(PROGRAM).lstrip())
    return tmp_path


def check(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pubsubguard", "check", *args], cwd=root, capture_output=True,
                          text=True, timeout=120, env={**os.environ, "VIRTUAL_ENV": sys.prefix})


def test_an_endpoint_of_unknown_scheme_is_not_judged_and_says_where_it_comes_from(tmp_path):
    root = project(tmp_path)
    text = check(root)
    assert text.returncode == 0, text.stderr
    assert "Not judged (values unknown until deploy): 1 rule on 1 resource" in text.stdout
    assert ("__main__.py:7: push-endpoint-https (mandatory) on Subscription orders-push: pushConfig.pushEndpoint "
            "(from Function handler.httpsTriggerUrl)") in text.stdout
    document = json.loads(check(root, "--format", "json").stdout)
    (entry,) = document["unjudged"]
    assert entry["policy"] == "push-endpoint-https" and entry["properties"] == ["pushConfig.pushEndpoint"]
    (source,) = entry["unknown_inputs"]["pushConfig.pushEndpoint"]
    assert (source["type"], source["name"], source["output"], source["via"]) == (
        "gcp:cloudfunctions/function:Function", "handler", "httpsTriggerUrl", [])
    sarif = json.loads(check(root, "--format", "sarif").stdout)
    (note,) = [r for r in sarif["runs"][0]["results"] if r.get("properties", {}).get("notJudged")]
    assert note["level"] == "note" and note["ruleId"] == "push-endpoint-https"
    assert note["locations"][0]["physicalLocation"]["region"]["startLine"] == 7  # the subscription's line
    plan = json.loads(subprocess.run([sys.executable, "-m", "pubsubguard", "plan"], cwd=root, capture_output=True,
                                     text=True, check=True, env={**os.environ, "VIRTUAL_ENV": sys.prefix}).stdout)
    (sub,) = [r for r in plan["resources"] if r["name"] == "orders-push"]
    assert [s["name"] for s in sub["unknowns"]["topic"]] == ["orders"]
    assert [s["name"] for s in sub["unknowns"]["pushConfig.pushEndpoint"]] == ["handler"]
    assert [(s["output"], s["via"]) for s in sub["unknowns"]["topic"]] == [("id", [])]


def test_a_value_derived_through_apply_says_so(tmp_path):
    (tmp_path / "Pulumi.yaml").write_text(yaml.safe_dump({"name": "team", "runtime": "python"}))
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {"gcp:project": "acme-prod"}}))
    (tmp_path / "__main__.py").write_text(textwrap.dedent("""
        import pulumi, pulumi_gcp as gcp
        app = gcp.serviceaccount.Account("app", account_id="app")
        topic = gcp.pubsub.Topic("orders", name="orders")
        both = pulumi.Output.all(app.email, topic.name).apply(lambda v: f"serviceAccount:{v[0]}")
        gcp.pubsub.TopicIAMMember("grant", topic=topic.name, role="roles/pubsub.publisher", member=both)
    """).lstrip())
    plan = json.loads(subprocess.run([sys.executable, "-m", "pubsubguard", "plan"], cwd=tmp_path, capture_output=True,
                                     text=True, check=True, env={**os.environ, "VIRTUAL_ENV": sys.prefix}).stdout)
    (grant,) = [r for r in plan["resources"] if r["name"] == "grant"]
    sources = {(s["name"], s["output"], tuple(s["via"])) for s in grant["unknowns"]["member"]}
    assert sources == {("app", "email", ("all", "apply")), ("orders", "name", ("all", "apply"))}


def test_unknowns_fail_closes_the_gate_on_a_mandatory_rule_that_could_not_decide(tmp_path):
    root = project(tmp_path)
    closed = check(root, "--unknowns", "fail")
    assert closed.returncode == 1, closed.stderr
    assert closed.stdout.rstrip().splitlines()[-1] == (
        "REJECTED: 0 mandatory, 1 advisory violation, 1 mandatory not judged (--unknowns fail).")
    document = json.loads(check(root, "--unknowns", "fail", "--format", "json").stdout)
    assert document["passed"] is False and document["unknowns"] == "fail"
    sarif = json.loads(check(root, "--unknowns", "fail", "--format", "sarif").stdout)
    assert [r["level"] for r in sarif["runs"][0]["results"] if r.get("properties", {}).get("notJudged")] == ["error"]
    advisory_only = check(root, "--unknowns", "fail", "--policy-config", str(_config(tmp_path)))
    assert advisory_only.returncode == 0  # the rule made advisory: not judged no longer fails


def _config(tmp_path: Path) -> Path:
    path = tmp_path / "levels.json"
    path.write_text(json.dumps({"push-endpoint-https": "advisory"}))
    return path


URL_FORMS = """
    import pulumi
    import pulumi_gcp as gcp

    topic = gcp.pubsub.Topic("orders", name="orders")
    run = gcp.cloudrunv2.Service("run", location="us-east1", template={"containers": [{"image": "gcr.io/x/y"}]})
    fn = gcp.cloudfunctionsv2.Function("fn", location="us-east1", service_config={"max_instance_count": 1})
    legacy = gcp.cloudrun.Service("legacy", location="us-east1",
                                  template={"spec": {"containers": [{"image": "gcr.io/x/y"}]}})

    def push(name, endpoint):
        gcp.pubsub.Subscription(name, name=name, topic=topic.id, expiration_policy={"ttl": ""},
                                push_config={"push_endpoint": endpoint})

    push("from-uri", run.uri)
    push("from-nested-uri", fn.service_config.uri)
    push("from-status-url", legacy.statuses[0].url.apply(lambda url: f"{url}/push"))
    push("from-name", pulumi.Output.concat("http://", run.name, ".internal.acme.net/hook"))
    push("from-name-https", pulumi.Output.concat("https://", run.name, ".internal.acme.net/hook"))
    push("from-unset-field", fn.service_config.apply(lambda config: f"{config.available_memory}"))
"""


def test_push_endpoints_are_judged_by_their_known_beginning(tmp_path):
    """Cloud Run and Cloud Functions URL outputs (nested ones too) are https:// by their documented form;
    an endpoint built as "http://" + a service's name is not HTTPS whatever the name; a nested output the
    inputs did not set is unknown, never absent (so it is listed under "Not judged")."""
    (tmp_path / "Pulumi.yaml").write_text(yaml.safe_dump({"name": "team", "runtime": "python"}))
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {"gcp:project": "acme-prod"}}))
    (tmp_path / "__main__.py").write_text(textwrap.dedent(URL_FORMS).lstrip())
    done = check(tmp_path, "--format", "json")
    document = json.loads(done.stdout)
    assert done.returncode == 1, done.stderr
    violated = sorted(v["resource_name"] for v in document["violations"] if v["policy"] == "push-endpoint-https")
    assert violated == ["from-name"]
    unjudged = sorted(e["resource_name"] for e in document["unjudged"] if e["policy"] == "push-endpoint-https")
    assert unjudged == ["from-unset-field"]
    failing = check(tmp_path, "--unknowns", "fail")
    assert failing.returncode == 1 and "from-unset-field" in failing.stdout


def test_what_blocks_a_rule_is_named_by_property_even_on_another_resource(tmp_path):
    """A dead-lettering subscription whose dead-letter topic and subscriber grant come from a StackReference:
    the blocking inputs are property paths (the grant's as "member of <grant>"), never a sentence cut at
    its commas; with no grant at all, the missing subscriber grant decides alone."""
    (tmp_path / "Pulumi.yaml").write_text(yaml.safe_dump({"name": "team", "runtime": "python"}))
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {"gcp:project": "acme-prod"}}))
    program = """
        import pulumi
        import pulumi_gcp as gcp

        shared = pulumi.StackReference("acme/shared/prod")
        topic = gcp.pubsub.Topic("orders", name="orders")
        sub = gcp.pubsub.Subscription("orders-sub", name="orders-sub", topic=topic.id, expiration_policy={"ttl": ""},
            dead_letter_policy={"dead_letter_topic": shared.get_output("dlq"), "max_delivery_attempts": 10})
    """
    grant = """
        gcp.pubsub.SubscriptionIAMMember("grant", subscription=sub.name, role="roles/pubsub.subscriber",
                                         member=shared.get_output("agent"))
    """
    (tmp_path / "__main__.py").write_text(textwrap.dedent(program).lstrip() + textwrap.dedent(grant))
    document = json.loads(check(tmp_path, "--format", "json").stdout)
    (entry,) = [e for e in document["unjudged"] if e["policy"] == "dead-letter-service-agent-iam"]
    assert entry["properties"] == ["deadLetterPolicy.deadLetterTopic", "member of grant"]
    assert list(entry["unknown_inputs"]) == entry["properties"]
    assert {s["type"] for sources in entry["unknown_inputs"].values() for s in sources} == {"pulumi:pulumi:StackReference"}
    (tmp_path / "__main__.py").write_text(textwrap.dedent(program).lstrip())
    ungranted = check(tmp_path, "--format", "json")
    document = json.loads(ungranted.stdout)
    assert ungranted.returncode == 1
    (violation,) = [v for v in document["violations"] if v["policy"] == "dead-letter-service-agent-iam"]
    assert "roles/pubsub.subscriber on the subscription itself" in violation["message"]


def test_a_secret_built_from_an_unknown_shows_no_known_part(tmp_path):
    """A secret's known part never reaches the pack (a message could show it): a secret endpoint built as
    "http://" + an unknown name is not judged, not violated with its host in the message."""
    (tmp_path / "Pulumi.yaml").write_text(yaml.safe_dump({"name": "team", "runtime": "python"}))
    (tmp_path / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {"gcp:project": "acme-prod"}}))
    (tmp_path / "__main__.py").write_text(textwrap.dedent("""
        import pulumi
        import pulumi_gcp as gcp

        run = gcp.cloudrunv2.Service("run", location="us-east1", template={"containers": [{"image": "gcr.io/x/y"}]})
        topic = gcp.pubsub.Topic("orders", name="orders")
        gcp.pubsub.Subscription("hidden", name="hidden", topic=topic.id, expiration_policy={"ttl": ""},
            push_config={"push_endpoint": pulumi.Output.secret(
                pulumi.Output.concat("http://", run.name, ".hunter2-internal.acme.net/hook"))})
    """).lstrip())
    done = check(tmp_path, "--format", "json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert [e["resource_name"] for e in document["unjudged"] if e["policy"] == "push-endpoint-https"] == ["hidden"]
    assert "hunter2" not in done.stdout + done.stderr
