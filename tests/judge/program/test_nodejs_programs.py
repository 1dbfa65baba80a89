"""`pubsubguard check` and `plan` on TypeScript programs (`runtime: nodejs`, issue 39): run by the project's
own @pulumi/pulumi (its `cmd/run`, ts-node, tsconfig.json) in the confined child, judged as Python
programs are. Each program gets `node_modules` linked to the packages `scripts/setup.sh` installed from
tests/nodejs's lockfile, as a team's `npm ci` leaves them (tests/support/programs.py). Here: the verdict, grants,
secrets, suppressions, config and components, confinement; test_nodejs_errors.py: a program that cannot run;
test_nodejs_unknowns.py: values unknown at preview, judged as for the Python twin."""

from __future__ import annotations

import json
import os
import uuid

import pytest
import yaml

from pubsubguard.core.project import UNKNOWN
from support.programs import DEAD_LETTER, line_of, mandatory, node_project, pubsubguard


def test_a_topic_and_an_ordered_subscription_pass(tmp_path):
    root = node_project(tmp_path, """
        const orders = new gcp.pubsub.Topic("orders", {
            name: "orders",
            labels: { "pubsubguard-publisher-region": "europe-west1" },
        });
        export const subscription = new gcp.pubsub.Subscription("orders-ordered", {
            name: "orders-ordered",
            topic: orders.name,
            enableMessageOrdering: true,
            expirationPolicy: { ttl: "" },
        }).name;
        """)
    done = pubsubguard(root, "check", "-s", "dev", "--format", "json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["passed"] is True and mandatory(document) == []
    plan = json.loads(pubsubguard(root, "plan", "-s", "dev").stdout)
    [subscription] = [r for r in plan["resources"] if r["type"] == "gcp:pubsub/subscription:Subscription"]
    assert subscription["inputs"]["enableMessageOrdering"] is True
    assert subscription["inputs"]["topic"] == "orders"
    assert subscription["source"] == {"path": "index.ts", "line": line_of(root, "new gcp.pubsub.Subscription")}
    assert plan["outputs"] == {"subscription": "orders-ordered"}


def test_a_dead_letter_policy_without_the_grant_is_rejected_at_the_typescript_line(tmp_path):
    root = node_project(tmp_path, DEAD_LETTER)
    done = pubsubguard(root, "check", "-s", "dev")
    assert done.returncode == 1, done.stderr
    line = line_of(root, '"orders-worker", {')
    assert f"index.ts:{line}: mandatory dead-letter-service-agent-iam: Subscription orders-worker" in done.stdout
    sarif = json.loads(pubsubguard(root, "check", "-s", "dev", "--format", "sarif").stdout)
    [result] = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "dead-letter-service-agent-iam"]
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == "index.ts" and location["region"]["startLine"] == line


def test_the_grant_from_an_invoke_offline_is_unknown_never_undefined(tmp_path):
    """getProject's number is unknown offline: the member built from it is the service agent's form with
    an unknown number (judged by its known parts), never `service-undefined@...`."""
    root = node_project(tmp_path, DEAD_LETTER + """
        const project = gcp.organizations.getProjectOutput({});
        const agent = pulumi.interpolate`serviceAccount:service-${project.number}@gcp-sa-pubsub.iam.gserviceaccount.com`;
        new gcp.pubsub.TopicIAMMember("dlq-publisher", { topic: deadLetter.name, role: "roles/pubsub.publisher", member: agent });
        new gcp.pubsub.SubscriptionIAMMember("dlq-subscriber", { subscription: worker.name, role: "roles/pubsub.subscriber", member: agent });
        const plain = gcp.organizations.getProject({}).then((p) => `service-${p.number}`);
        new gcp.pubsub.Topic("named-from-a-promise", { name: "t-x", labels: { owner: plain } });
        """)
    plan = pubsubguard(root, "plan", "-s", "dev")
    assert plan.returncode == 0, plan.stderr
    assert "undefined" not in plan.stdout
    resources = {r["name"]: r for r in json.loads(plan.stdout)["resources"]}
    assert resources["dlq-publisher"]["inputs"]["member"] == UNKNOWN
    assert resources["named-from-a-promise"]["inputs"]["labels"]["owner"] == UNKNOWN
    assert {i["token"] for i in json.loads(plan.stdout)["unknown_invokes"]} == {
        "gcp:organizations/getProject:getProject"}
    done = pubsubguard(root, "check", "-s", "dev", "--format", "json")
    assert "dead-letter-service-agent-iam" not in mandatory(json.loads(done.stdout)), done.stdout


def test_secrets_are_masked_and_still_judged(tmp_path):
    secret_host = "hunter2-" + uuid.uuid4().hex[:8]
    root = node_project(tmp_path, f"""
        const t = new gcp.pubsub.Topic("orders", {{ name: "orders" }});
        new gcp.pubsub.Subscription("push", {{
            name: "push-sub", topic: t.name, expirationPolicy: {{ ttl: "" }},
            pushConfig: {{ pushEndpoint: pulumi.secret("http://{secret_host}.example.com/push") }},
        }});
        console.log("endpoint is http://{secret_host}.example.com/push");
        """)
    outputs = []
    for fmt in ("text", "json", "sarif"):
        done = pubsubguard(root, "check", "-s", "dev", "--format", fmt)
        assert done.returncode == 1, done.stderr  # push-endpoint-https judged the secret value
        outputs.append(done.stdout + done.stderr)
    assert "push-endpoint-https" in outputs[1]
    assert all(secret_host not in text for text in outputs)
    assert "[secret]" in outputs[0]
    plan = pubsubguard(root, "plan", "-s", "dev").stdout
    assert secret_host not in plan and '"secrets": "redacted"' in plan


def test_a_suppression_comment_is_honoured_and_stays_visible(tmp_path):
    root = node_project(tmp_path, """
        const t = new gcp.pubsub.Topic("orders", { name: "orders" });
        // pubsubguard: ignore[ack-deadline-in-range] consumers ack in 2 s (OPS-12)
        new gcp.pubsub.Subscription("fast", { name: "fast", topic: t.name, ackDeadlineSeconds: 5, expirationPolicy: { ttl: "" } });
        """)
    done = pubsubguard(root, "check", "-s", "dev", "--format", "json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    [suppressed] = [v for v in document["violations"] if v["suppressed"]]
    assert suppressed["policy"] == "ack-deadline-in-range"
    assert suppressed["suppressed"] == {"kind": "inSource", "reason": "consumers ack in 2 s (OPS-12)",
                                        "where": f"index.ts:{line_of(root, 'pubsubguard: ignore')}"}
    baseline = tmp_path / "baseline.json"
    (root / "index.ts").write_text((root / "index.ts").read_text().replace("// pubsubguard: ignore", "// was: ignore"))
    assert pubsubguard(root, "check", "-s", "dev").returncode == 1
    assert pubsubguard(root, "check", "-s", "dev", "--create-baseline", str(baseline)).returncode == 1
    assert pubsubguard(root, "check", "-s", "dev", "--baseline", str(baseline)).returncode == 0


def test_config_and_a_component_as_a_team_writes_them(tmp_path):
    root = node_project(tmp_path, """
        class Channel extends pulumi.ComponentResource {
            public readonly topic: gcp.pubsub.Topic;
            constructor(name: string, args: { ordered: boolean }, opts?: pulumi.ComponentResourceOptions) {
                super("team:index:Channel", name, {}, opts);
                this.topic = new gcp.pubsub.Topic(`${name}-topic`, { name }, { parent: this });
                new gcp.pubsub.Subscription(`${name}-sub`, {
                    name: `${name}-sub`, topic: this.topic.name, enableMessageOrdering: args.ordered,
                    ackDeadlineSeconds: 5, expirationPolicy: { ttl: "" },
                }, { parent: this });
                this.registerOutputs({});
            }
        }
        const config = new pulumi.Config();
        for (const name of config.requireObject<string[]>("channels")) {
            new Channel(name, { ordered: config.getBoolean("ordered") ?? false });
        }
        """)
    (root / "Pulumi.dev.yaml").write_text(yaml.safe_dump({"config": {
        "gcp:project": "proj-a", "team-ts:channels": ["billing", "audit"], "team-ts:ordered": True}}))
    done = pubsubguard(root, "check", "-s", "dev", "--format", "json")
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    found = sorted((v["resource_name"], v["file"], v["line"]) for v in document["violations"]
                   if v["policy"] == "ack-deadline-in-range")
    line = line_of(root, "new gcp.pubsub.Subscription")
    assert found == [("audit-sub", "index.ts", line), ("billing-sub", "index.ts", line)]
    plan = json.loads(pubsubguard(root, "plan", "-s", "dev").stdout)
    subscriptions = [r for r in plan["resources"] if r["type"] == "gcp:pubsub/subscription:Subscription"]
    assert [r["inputs"]["enableMessageOrdering"] for r in subscriptions] == [True, True]
    assert {r["parent"].rsplit("::", 1)[1] for r in subscriptions} == {"billing", "audit"}


@pytest.mark.skipif(not os.path.exists("/usr/bin/bwrap") and not any(
    os.path.exists(os.path.join(p, "bwrap")) for p in os.environ.get("PATH", "").split(os.pathsep)),
    reason="needs bubblewrap (scripts/setup.sh installs it)")
def test_the_program_runs_confined(tmp_path):
    root = node_project(tmp_path, """
        import * as fs from "fs";
        import * as net from "net";
        const outside = "%s";
        let wrote = "no";
        try { fs.writeFileSync(outside, "x"); wrote = "yes"; } catch (e) { wrote = "no"; }
        new gcp.pubsub.Topic("probe", { name: "probe-" + wrote, labels: { home: String(process.env.HOME?.startsWith("/tmp/pubsubguard-")) } });
        """ % (tmp_path / "outside"))
    done = pubsubguard(root, "plan", "-s", "dev")
    assert done.returncode == 0, done.stderr
    [topic] = [r for r in json.loads(done.stdout)["resources"] if r["type"] == "gcp:pubsub/topic:Topic"]
    # As root the write lands in the program's throwaway overlay (issue 45: it may write where its user can);
    # otherwise the file system outside the project is read-only. Either way nothing appears outside.
    from pubsubguard.core import langhost

    expected = "probe-yes" if langhost.overlay()[0] else "probe-no"
    assert topic["inputs"]["name"] == expected and topic["inputs"]["labels"] == {"home": "true"}
    assert not (tmp_path / "outside").exists()
