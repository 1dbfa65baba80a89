"""Values unknown at preview in TypeScript programs (issue 39): interpolated endpoints, stack references, nested
outputs of functions, unknown invoke results. Each is judged, or listed as not judged, exactly as for the same
program written in Python (its twin)."""

from __future__ import annotations

import json

from pubsubguard.core.project import UNKNOWN
from support.programs import DEAD_LETTER, judged, node_project, pubsubguard, python_twin


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
