"""`pubsubguard check` and `plan` on TypeScript programs (`runtime: nodejs`, issue 39): run by the project's
own @pulumi/pulumi (its `cmd/run`, ts-node, tsconfig.json) in the confined child, judged as Python
programs are. Each program gets `node_modules` linked to the packages `scripts/setup.sh` installed from
tests/nodejs's lockfile, as a team's `npm ci` leaves them."""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest
import yaml

from pubsubguard.core.project import UNKNOWN
from support.nodejs_projects import node_modules
from support.programs import (
    DEAD_LETTER, judged, line_of, mandatory, node_project, one_line_error, pubsubguard, python_twin,
)


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


def test_missing_node_modules_is_one_line_naming_npm_ci(tmp_path):
    root = node_project(tmp_path, 'new gcp.pubsub.Topic("orders", { name: "orders" });\n', modules=False)
    assert one_line_error(root) == (
        f"pubsubguard check: {root / 'Pulumi.yaml'}: the program's Node.js modules are not installed "
        f"({root / 'node_modules'} is missing): run `npm ci` in {root}")


def test_an_sdk_that_needs_a_newer_node_is_one_line_naming_both_versions(tmp_path):
    modules = tmp_path / "node_modules"  # the installed modules, but an SDK whose package.json wants Node 99
    modules.mkdir()
    for entry in node_modules().iterdir():
        if entry.name != "@pulumi":
            (modules / entry.name).symlink_to(entry)
    (modules / "@pulumi").mkdir()
    (modules / "@pulumi" / "gcp").symlink_to(node_modules() / "@pulumi" / "gcp")
    sdk = modules / "@pulumi" / "pulumi"
    sdk.mkdir()
    for entry in (node_modules() / "@pulumi" / "pulumi").iterdir():
        if entry.name != "package.json":
            (sdk / entry.name).symlink_to(entry)
    manifest = json.loads((node_modules() / "@pulumi" / "pulumi" / "package.json").read_text())
    (sdk / "package.json").write_text(json.dumps({**manifest, "engines": {"node": ">=99"}}))
    root = node_project(tmp_path, 'new gcp.pubsub.Topic("orders", { name: "orders" });\n', modules=modules)
    node = subprocess.run(["node", "--version"], capture_output=True, text=True, check=True).stdout.strip()
    assert one_line_error(root) == (
        f"pubsubguard check: {root / 'Pulumi.yaml'}: @pulumi/pulumi {manifest['version']} in {root / 'node_modules'} needs "
        f"Node.js >=99 (its package.json engines.node), but `node --version` is {node}: install a newer Node.js")


def test_a_program_that_throws_is_reported_at_its_typescript_line(tmp_path):
    root = node_project(tmp_path, """
        new gcp.pubsub.Topic("orders", { name: "orders" });
        const settings: { retries?: number } = JSON.parse("{}");
        if (settings.retries === undefined) {
            throw new Error("retries is not set");
        }
        """)
    done = pubsubguard(root, "check", "-s", "dev")
    assert done.returncode == 2
    line = line_of(root, "throw new Error")
    assert done.stderr.strip().splitlines()[-1] == (
        f"pubsubguard check: the program failed: index.ts:{line}: Error: retries is not set")


def timed_check(root: Path, *args: str) -> tuple[subprocess.CompletedProcess, float]:
    started = time.monotonic()
    done = pubsubguard(root, "check", "-s", "dev", *args)
    return done, time.monotonic() - started


def test_a_missing_config_value_is_one_line_in_the_time_a_throw_takes(tmp_path):
    """Issue 64: the SDK reports an error with `util.inspect(err, {colors: true})`, and Node.js 20.20's
    colorizer never ends on a stack frame whose `node_modules` segment has no separator after the package
    (nodejs/node#64011): the SDK's own frames, as its source maps name them (`node_modules/@pulumi/config.ts`).
    Under the memory limit that was a std::bad_alloc after 15-20 s, never the program's error."""
    thrower = node_project(tmp_path, 'throw new Error("retries is not set");\n', name="thrower")
    root = node_project(tmp_path, """
        const config = new pulumi.Config();
        new gcp.pubsub.Topic("orders", { name: config.require("ordersTopicName") });
        """)
    thrown, throw_s = timed_check(thrower)
    assert thrown.returncode == 2, thrown.stderr
    done, elapsed = timed_check(root)
    assert done.returncode == 2, done.stderr
    line = line_of(root, "config.require")
    [error] = done.stderr.strip().splitlines()
    assert error == ("pubsubguard check: the program failed: "
                     f"index.ts:{line}: Error: Missing required configuration variable 'team-ts:ordersTopicName'")
    assert "bad_alloc" not in done.stdout
    assert elapsed < 2 * throw_s + 5, (elapsed, throw_s)


def test_an_error_inside_an_apply_is_reported_at_its_line(tmp_path):
    """The same loop from an error thrown inside `apply` (the SDK's output.ts in its stack)."""
    root = node_project(tmp_path, """
        const topic = new gcp.pubsub.Topic("orders", { name: "orders" });
        export const tail = topic.name.apply((name) => {
            if (name === "orders") {
                throw new Error(`no tail for ${name}`);
            }
            return name;
        });
        """)
    done, _ = timed_check(root, "--memory-limit", "1024")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        f"pubsubguard check: the program failed: index.ts:{line_of(root, 'throw new Error')}: Error: no tail for orders")


def test_a_program_that_runs_out_of_memory_is_named_as_one(tmp_path):
    root = node_project(tmp_path, """
        const kept: number[][] = [];
        for (;;) {
            kept.push(new Array(1 << 20).fill(kept.length + 0.5));
        }
        """)
    done, _ = timed_check(root, "--memory-limit", "1024")
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1].endswith(
        "(its memory is limited to 1024 MiB; --memory-limit MIB raises it)"), done.stderr


def test_a_type_error_is_reported_as_typescript_reports_it(tmp_path):
    root = node_project(tmp_path, 'const n: number = "x";\nnew gcp.pubsub.Topic("orders", { name: "orders" });\n')
    done = pubsubguard(root, "check", "-s", "dev")
    assert done.returncode == 2
    assert "the program failed: index.ts(3,7): error TS2322" in done.stderr.strip().splitlines()[-1]


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


def test_an_interpolated_endpoint_keeps_its_known_parts(tmp_path):
    """`pulumi.interpolate` of "http://" and a value unknown at preview: the scheme is known, so
    push-endpoint-https rejects it (as Python's Output.concat and f-strings), never "not judged"."""
    root = node_project(tmp_path, """
        const t = new gcp.pubsub.Topic("orders", {});
        new gcp.pubsub.Subscription("push", {
            name: "push-sub", topic: t.name, expirationPolicy: { ttl: "" },
            pushConfig: { pushEndpoint: pulumi.interpolate`http://${t.name}.example.com/push` },
        });
        new gcp.pubsub.Subscription("push-https", {
            name: "push-https", topic: t.name, expirationPolicy: { ttl: "" },
            pushConfig: { pushEndpoint: pulumi.concat("https://", t.name, ".example.com/push") },
        });
        """)
    done = pubsubguard(root, "check", "-s", "dev", "--format", "json")
    assert done.returncode == 1, done.stderr
    document = json.loads(done.stdout)
    assert [(v["policy"], v["resource_name"]) for v in document["violations"] if v["level"] == "mandatory"] == [
        ("push-endpoint-https", "push")]
    plan = json.loads(pubsubguard(root, "plan", "-s", "dev").stdout)
    push = next(r for r in plan["resources"] if r["name"] == "push")
    assert push["inputs"]["pushConfig"]["pushEndpoint"] == UNKNOWN
    [source] = push["unknowns"]["pushConfig.pushEndpoint"]  # where the unknown comes from, through what
    assert (source["type"], source["name"], source["output"]) == ("gcp:pubsub/topic:Topic", "orders", "name")
    assert source["via"] == ["interpolate"]


def test_unknowns_from_a_stack_reference_are_not_judged_exactly_as_for_the_python_twin(tmp_path):
    """The same program in Python and TypeScript: a dead-letter topic and a grant from a StackReference.
    The "Not judged" list (rule, resource, the blocking properties and where they come from) and the
    verdict are the same; without the grant, both are rejected."""
    typescript = node_project(tmp_path, """
        const shared = new pulumi.StackReference("acme/shared/prod");
        const topic = new gcp.pubsub.Topic("orders", { name: "orders" });
        const sub = new gcp.pubsub.Subscription("orders-sub", { name: "orders-sub", topic: topic.id, expirationPolicy: { ttl: "" },
            deadLetterPolicy: { deadLetterTopic: shared.getOutput("dlq"), maxDeliveryAttempts: 10 } });
        new gcp.pubsub.SubscriptionIAMMember("grant", { subscription: sub.name, role: "roles/pubsub.subscriber",
                                                       member: shared.getOutput("agent") });
        """, name="team")
    python = python_twin(tmp_path, """
        import pulumi
        import pulumi_gcp as gcp

        shared = pulumi.StackReference("acme/shared/prod")
        topic = gcp.pubsub.Topic("orders", name="orders")
        sub = gcp.pubsub.Subscription("orders-sub", name="orders-sub", topic=topic.id, expiration_policy={"ttl": ""},
            dead_letter_policy={"dead_letter_topic": shared.get_output("dlq"), "max_delivery_attempts": 10})
        gcp.pubsub.SubscriptionIAMMember("grant", subscription=sub.name, role="roles/pubsub.subscriber",
                                         member=shared.get_output("agent"))
    """)

    node_verdict = judged(typescript)
    assert node_verdict == judged(python)
    assert ("dead-letter-service-agent-iam", "orders-sub", ("deadLetterPolicy.deadLetterTopic", "member of grant"),
            ("pulumi:pulumi:StackReference",)) in node_verdict[2]


def test_nested_outputs_of_a_function_are_judged_as_for_the_python_twin(tmp_path):
    """A Cloud Functions v2 Function's `serviceConfig.uri` is https:// by its documented form, through
    `apply` and lifted property access alike; a nested field the inputs did not set (`availableMemory`)
    is unknown, never `undefined` (so its push endpoint is under "Not judged"), and a field they set stays
    known: the verdict and the "Not judged" list are the Python twin's."""
    typescript = node_project(tmp_path, """
        const topic = new gcp.pubsub.Topic("orders", { name: "orders" });
        const fn = new gcp.cloudfunctionsv2.Function("fn", { location: "us-east1", serviceConfig: { maxInstanceCount: 1 } });
        const push = (name: string, endpoint: pulumi.Input<string>) => new gcp.pubsub.Subscription(name, {
            name, topic: topic.id, expirationPolicy: { ttl: "" }, pushConfig: { pushEndpoint: endpoint } });
        push("from-nested-uri", fn.serviceConfig.apply((c) => c!.uri));
        push("from-lifted-uri", fn.serviceConfig.apply((c) => c!).uri);
        push("from-unset-field", fn.serviceConfig.apply((c) => `${c!.availableMemory}`));
        push("from-set-field", fn.serviceConfig.apply((c) => `http://fn-${c!.maxInstanceCount}.internal.acme.net/hook`));
        """, name="team")
    python = python_twin(tmp_path, """
        import pulumi
        import pulumi_gcp as gcp

        topic = gcp.pubsub.Topic("orders", name="orders")
        fn = gcp.cloudfunctionsv2.Function("fn", location="us-east1", service_config={"max_instance_count": 1})

        def push(name, endpoint):
            gcp.pubsub.Subscription(name, name=name, topic=topic.id, expiration_policy={"ttl": ""},
                                    push_config={"push_endpoint": endpoint})

        push("from-nested-uri", fn.service_config.apply(lambda c: c.uri))
        push("from-lifted-uri", fn.service_config.uri)
        push("from-unset-field", fn.service_config.apply(lambda c: f"{c.available_memory}"))
        push("from-set-field", fn.service_config.apply(lambda c: f"http://fn-{c.max_instance_count}.internal.acme.net/hook"))
    """)
    node_verdict = judged(typescript)
    assert node_verdict == judged(python)
    assert [(policy, name) for policy, name, *_ in node_verdict[2] if policy == "push-endpoint-https"] == [
        ("push-endpoint-https", "from-unset-field")]
    plan = json.loads(pubsubguard(typescript, "plan", "-s", "dev").stdout)
    endpoints = {r["name"]: r["inputs"]["pushConfig"]["pushEndpoint"] for r in plan["resources"]
                 if r["type"] == "gcp:pubsub/subscription:Subscription"}
    assert endpoints == {"from-nested-uri": UNKNOWN, "from-lifted-uri": UNKNOWN, "from-unset-field": UNKNOWN,
                         "from-set-field": "http://fn-1.internal.acme.net/hook"}
    done = pubsubguard(typescript, "check", "-s", "dev", "--format", "json")
    assert [v["resource_name"] for v in json.loads(done.stdout)["violations"] if v["policy"] == "push-endpoint-https"] == [
        "from-set-field"]


def test_a_grant_to_an_unknown_nested_output_is_not_judged_as_for_the_python_twin(tmp_path):
    """A dead-letter grant whose member is built from a nested output the inputs did not set (the
    function's service account) is unknown: the rule is not judged, never "missing the grant"."""
    typescript = node_project(tmp_path, DEAD_LETTER + """
        const fn = new gcp.cloudfunctionsv2.Function("fn", { location: "us-east1", serviceConfig: { maxInstanceCount: 1 } });
        const member = fn.serviceConfig.apply((c) => `serviceAccount:${c!.serviceAccountEmail}`);
        new gcp.pubsub.TopicIAMMember("dlq-publisher", { topic: deadLetter.name, role: "roles/pubsub.publisher", member });
        new gcp.pubsub.SubscriptionIAMMember("dlq-subscriber", { subscription: worker.name, role: "roles/pubsub.subscriber", member });
        """, name="team")
    python = python_twin(tmp_path, """
        import pulumi
        import pulumi_gcp as gcp

        orders = gcp.pubsub.Topic("orders", name="orders")
        dead_letter = gcp.pubsub.Topic("orders-dlq", name="orders-dlq")
        gcp.pubsub.Subscription("orders-dlq-drain", name="orders-dlq-drain", topic=dead_letter.name,
                                expiration_policy={"ttl": ""})
        worker = gcp.pubsub.Subscription("orders-worker", name="orders-worker", topic=orders.id,
                                         expiration_policy={"ttl": ""},
                                         dead_letter_policy={"dead_letter_topic": dead_letter.id,
                                                             "max_delivery_attempts": 5})
        fn = gcp.cloudfunctionsv2.Function("fn", location="us-east1", service_config={"max_instance_count": 1})
        member = fn.service_config.apply(lambda c: f"serviceAccount:{c.service_account_email}")
        gcp.pubsub.TopicIAMMember("dlq-publisher", topic=dead_letter.name, role="roles/pubsub.publisher", member=member)
        gcp.pubsub.SubscriptionIAMMember("dlq-subscriber", subscription=worker.name, role="roles/pubsub.subscriber",
                                         member=member)
    """)
    node_verdict = judged(typescript)
    assert node_verdict == judged(python)
    assert "dead-letter-service-agent-iam" not in node_verdict[1]
    assert any(policy == "dead-letter-service-agent-iam" and name == "orders-worker"
               for policy, name, *_ in node_verdict[2]), node_verdict
    plan = json.loads(pubsubguard(typescript, "plan", "-s", "dev").stdout)
    assert "undefined" not in json.dumps(plan["resources"])
    [grant] = [r for r in plan["resources"] if r["name"] == "dlq-subscriber"]
    assert grant["inputs"]["member"] == UNKNOWN


def test_an_unknown_invoke_result_reads_strings_as_unknown_and_no_number_or_flag_as_false(tmp_path):
    """A data source the engine cannot answer offline: its string fields (by the result type the provider
    package declares) are the unknown sentinel, string methods and all; its number, flag and list fields
    are unknown, never 0, false or a string's length (Python leaves them absent: neither judges a false
    value)."""
    root = node_project(tmp_path, """
        const topic = new gcp.pubsub.Topic("orders", { name: "orders" });
        const existing = gcp.pubsub.getSubscriptionOutput({ name: "legacy" });
        new gcp.pubsub.Subscription("copied", {
            name: "copied", topic: topic.id, expirationPolicy: { ttl: "" },
            ackDeadlineSeconds: existing.ackDeadlineSeconds,
            retainAckedMessages: existing.retainAckedMessages,
            labels: {
                "topic-tail": existing.topic.apply((t) => t.split("/").pop()!.toLowerCase()),
                "push-configs": existing.pushConfigs.apply((p) => `${p.length}`),
            },
        });
        new gcp.pubsub.Subscription("from-a-promise", {
            name: "from-a-promise", topic: topic.id, expirationPolicy: { ttl: "" },
            ackDeadlineSeconds: gcp.pubsub.getSubscription({ name: "legacy" }).then((s) => s.ackDeadlineSeconds),
            enableMessageOrdering: gcp.pubsub.getSubscription({ name: "legacy" }).then((s) => s.enableMessageOrdering),
        });
        """)
    plan = pubsubguard(root, "plan", "-s", "dev")
    assert plan.returncode == 0, plan.stderr
    resources = {r["name"]: r for r in json.loads(plan.stdout)["resources"]}
    inputs = resources["copied"]["inputs"]
    assert inputs.get("ackDeadlineSeconds", UNKNOWN) == UNKNOWN, inputs
    assert inputs.get("retainAckedMessages", UNKNOWN) == UNKNOWN, inputs
    assert inputs["labels"]["topic-tail"] == UNKNOWN  # a string's methods work on the unknown string
    assert inputs["labels"]["push-configs"] not in ("0", "36"), inputs
    promised = resources["from-a-promise"]["inputs"]
    assert promised.get("ackDeadlineSeconds", UNKNOWN) == UNKNOWN, promised
    assert promised.get("enableMessageOrdering", UNKNOWN) == UNKNOWN, promised
    done = pubsubguard(root, "check", "-s", "dev", "--format", "json")
    unjudged = {(e["policy"], e["resource_name"]) for e in json.loads(done.stdout)["unjudged"]}
    assert ("ack-deadline-in-range", "copied") in unjudged
    python = python_twin(tmp_path, """
        import pulumi_gcp as gcp

        topic = gcp.pubsub.Topic("orders", name="orders")
        existing = gcp.pubsub.get_subscription_output(name="legacy")
        gcp.pubsub.Subscription("copied", name="copied", topic=topic.id, expiration_policy={"ttl": ""},
                                ack_deadline_seconds=existing.ack_deadline_seconds,
                                retain_acked_messages=existing.retain_acked_messages,
                                labels={"topic-tail": existing.topic.apply(lambda t: t.split("/")[-1].lower())})
    """)
    twin = pubsubguard(python, "plan", "-s", "dev")
    assert twin.returncode == 0, twin.stderr
    [copied] = [r["inputs"] for r in json.loads(twin.stdout)["resources"] if r["name"] == "copied"]
    assert copied.get("ackDeadlineSeconds", UNKNOWN) == UNKNOWN and copied.get("retainAckedMessages", UNKNOWN) == UNKNOWN
    assert copied["labels"]["topic-tail"] == UNKNOWN  # the same unknown string as for TypeScript
