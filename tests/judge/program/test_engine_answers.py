"""What Pulumi's engine answers a program at `pulumi preview` (issue 45; docs/engine-features.md), the same for
Python and TypeScript programs: invokes, calls to component methods, read resources and data sources, parameterized
packages, state migrations, invokes with a parent. Each test runs a program through the real SDK over the engine's
gRPC protocol and asserts what the pack judged or the plan recorded."""

from __future__ import annotations

import json

import pytest

from pubsubguard.core.project import UNKNOWN
from support.programs import check_json, inputs_of, judged, mandatory, node_project, pubsubguard, python_twin


# --- Invokes ---------------------------------------------------------------------------------------
def test_an_invoke_that_depends_on_a_new_resource_is_unknown_as_at_preview(tmp_path):
    root = python_twin(tmp_path, """
        import pulumi
        import pulumi_gcp as gcp

        orders = gcp.pubsub.Topic("orders", name="orders")
        policy = gcp.organizations.get_iam_policy_output(
            bindings=[{"role": "roles/pubsub.publisher", "members": ["allUsers"]}],
            opts=pulumi.InvokeOutputOptions(depends_on=[orders]))
        gcp.pubsub.TopicIAMPolicy("orders-policy", topic=orders.name, policy_data=policy.policy_data)
    """)
    assert inputs_of(root, "orders-policy")["inputs"]["policyData"] == UNKNOWN


# --- Calls to component methods --------------------------------------------------------------------
# A component from a team's own multi-language package, declared as its generated SDK declares it: a remote
# component whose method is a call the engine hands to the package's provider.
CHANNEL_PY = """
    import pulumi
    import pulumi_gcp as gcp


    class Channel(pulumi.ComponentResource):
        def __init__(self, name, props, opts=None):
            super().__init__("channels:index:Channel", name, props, opts, remote=True)

        def endpoint(self, path):
            return pulumi.runtime.call("channels:index:Channel/endpoint", {"__self__": self, "path": path}, res=self)


    orders = gcp.pubsub.Topic("orders", name="orders")
    channel = Channel("orders-channel", {"topic": orders.name})
    endpoint = channel.endpoint(orders.name.apply(lambda name: f"/{name}"))
    gcp.pubsub.Subscription("orders-push", name="orders-push", topic=orders.id, expiration_policy={"ttl": ""},
                            push_config={"push_endpoint": endpoint.apply(lambda result: result["url"]),
                                         "oidc_token": {"service_account_email": "push@proj-a.iam.gserviceaccount.com"}})
    pulumi.export("endpoint", endpoint)
"""

CHANNEL_TS = """
    class Channel extends pulumi.ComponentResource {
        constructor(name: string, args: { topic: pulumi.Input<string> }, opts?: pulumi.ComponentResourceOptions) {
            super("channels:index:Channel", name, args, opts, true);
        }
        endpoint(path: pulumi.Input<string>): pulumi.Output<{ url: string }> {
            return pulumi.runtime.call("channels:index:Channel/endpoint", { __self__: this, path }, this);
        }
    }
    const orders = new gcp.pubsub.Topic("orders", { name: "orders" });
    const channel = new Channel("orders-channel", { topic: orders.name });
    export const endpoint = channel.endpoint(orders.name.apply((name) => `/${name}`));
    new gcp.pubsub.Subscription("orders-push", { name: "orders-push", topic: orders.id, expirationPolicy: { ttl: "" },
        pushConfig: { pushEndpoint: endpoint.apply((result) => result.url),
                      oidcToken: { serviceAccountEmail: "push@proj-a.iam.gserviceaccount.com" } } });
"""

CHANNEL_METHOD = "channels:index:Channel/endpoint"


@pytest.mark.parametrize("language", ["python", "typescript"])
def test_a_component_methods_result_is_unknown_and_depends_on_the_component_and_its_arguments(tmp_path, language):
    """At preview the engine hands a method call to the component's provider, which runs it in its plugin;
    offline nothing runs it, so its result is unknown (it was refused, exit 2), depends on the component and
    on what its arguments depend on, and what is built from it is not judged, with that origin."""
    root = python_twin(tmp_path, CHANNEL_PY) if language == "python" else node_project(tmp_path, CHANNEL_TS)
    code, document = check_json(root)
    assert code == 0, document["error"]
    assert [i["token"] for i in document["unknown_invokes"]] == [CHANNEL_METHOD]
    (entry,) = document["unjudged"]
    assert (entry["policy"], entry["resource_name"], entry["properties"]) == (
        "push-endpoint-https", "orders-push", ["pushConfig.pushEndpoint"])
    origins = {(s["type"], s["name"]) for s in entry["unknown_inputs"]["pushConfig.pushEndpoint"]}
    assert origins == {("channels:index:Channel", "orders-channel"), ("gcp:pubsub/topic:Topic", "orders")}
    plan = json.loads(pubsubguard(root, "plan", "-s", "dev").stdout)
    assert plan["outputs"].get("endpoint", UNKNOWN) == UNKNOWN


@pytest.mark.parametrize("language", ["python", "typescript"])
def test_a_component_methods_result_given_with_invoke_results_is_judged(tmp_path, language):
    root = python_twin(tmp_path, CHANNEL_PY) if language == "python" else node_project(tmp_path, CHANNEL_TS)
    given = tmp_path / "given.json"
    given.write_text(json.dumps([{"token": CHANNEL_METHOD, "args": {"path": "/orders"},
                                  "result": {"url": "http://orders.example.com/push"}}]))
    code, document = check_json(root, "--invoke-results", str(given))
    assert code == 1, document["error"]
    assert mandatory(document) == ["push-endpoint-https"] and document["unknown_invokes"] == []
    given.write_text(json.dumps([{"token": CHANNEL_METHOD, "args": {"path": "/elsewhere"},
                                  "result": {"url": "http://orders.example.com/push"}}]))
    code, document = check_json(root, "--invoke-results", str(given))  # other arguments: not this call's result
    assert code == 0 and [e["policy"] for e in document["unjudged"]] == ["push-endpoint-https"]


# --- Read resources --------------------------------------------------------------------------------
READ_PY = """
    import pulumi
    import pulumi_gcp as gcp

    shared = gcp.pubsub.Topic.get("shared-dlq", "projects/proj-a/topics/shared-dlq")
    orders = gcp.pubsub.Topic("orders", name="orders")
    gcp.pubsub.Subscription("orders-sub", name="orders-sub", topic=orders.id, expiration_policy={"ttl": ""},
                            dead_letter_policy={"dead_letter_topic": shared.id, "max_delivery_attempts": 5})
    pulumi.export("dlq_name", shared.name)
    pulumi.export("dlq_labels", shared.labels)
"""

READ_TS = """
    const shared = gcp.pubsub.Topic.get("shared-dlq", "projects/proj-a/topics/shared-dlq");
    const orders = new gcp.pubsub.Topic("orders", { name: "orders" });
    new gcp.pubsub.Subscription("orders-sub", { name: "orders-sub", topic: orders.id, expirationPolicy: { ttl: "" },
        deadLetterPolicy: { deadLetterTopic: shared.id, maxDeliveryAttempts: 5 } });
    export const dlq_name = shared.name;
    export const dlq_labels = shared.labels;
"""


def test_a_read_resources_id_and_name_are_known_and_the_rest_unknown_in_both_languages(tmp_path):
    python = python_twin(tmp_path, READ_PY)
    typescript = node_project(tmp_path, READ_TS)
    sub = inputs_of(python, "orders-sub")["inputs"]
    assert sub["deadLetterPolicy"]["deadLetterTopic"] == "projects/proj-a/topics/shared-dlq"
    for root in (python, typescript):
        plan = json.loads(pubsubguard(root, "plan", "-s", "dev").stdout)
        assert plan["outputs"]["dlq_name"] == "shared-dlq"
        assert plan["outputs"].get("dlq_labels", UNKNOWN) == UNKNOWN
    assert judged(python) == judged(typescript)


def test_a_data_source_reading_one_topic_answers_the_id_its_arguments_determine_in_both_languages(tmp_path):
    python = python_twin(tmp_path, """
        import pulumi
        import pulumi_gcp as gcp

        shared = gcp.pubsub.get_topic(name="shared-dlq", project="proj-b")
        pulumi.export("dlq_id", shared.id)
        pulumi.export("dlq_labels", shared.labels)
    """)
    typescript = node_project(tmp_path, """
        const shared = gcp.pubsub.getTopicOutput({ name: "shared-dlq", project: "proj-b" });
        export const dlq_id = shared.id;
        export const dlq_labels = shared.labels;
    """)
    for root in (python, typescript):
        plan = json.loads(pubsubguard(root, "plan", "-s", "dev").stdout)
        assert plan["outputs"]["dlq_id"] == "projects/proj-b/topics/shared-dlq", root
        assert plan["outputs"].get("dlq_labels", UNKNOWN) in (UNKNOWN, None, {}), root


# --- Packages, state migrations, invoke parents, byte strings --------------------------------------
def test_a_parameterized_package_registers_and_its_resources_are_recorded(tmp_path):
    """A parameterized provider (`pulumi package add terraform-provider ...` generates this shape): the
    program registers the package and its resources name the reference the engine gave."""
    root = python_twin(tmp_path, """
        import asyncio
        import base64

        import pulumi
        from pulumi.runtime.settings import register_package

        ref = asyncio.ensure_future(register_package(
            "terraform-provider", "0.10.0", "", "pubsubx", "1.0.0", base64.b64encode(b"{}").decode()))


        class Queue(pulumi.CustomResource):
            def __init__(self, name, props):
                super().__init__("pubsubx:index/queue:Queue", name, props, package_ref=ref)


        Queue("orders", {"name": "orders"})
    """)
    queue = inputs_of(root, "orders")
    assert (queue["type"], queue["inputs"]) == ("pubsubx:index/queue:Queue", {"name": "orders"})
    code, document = check_json(root)
    assert code == 0, document["error"]


def test_state_migrations_are_taken_and_never_run_without_prior_state(tmp_path):
    root = python_twin(tmp_path, """
        import pulumi
        import pulumi_gcp as gcp

        def migrate(args):
            raise RuntimeError("a preview of a new stack has no prior state to migrate")

        gcp.pubsub.Topic("orders", name="orders", opts=pulumi.ResourceOptions(state_migrations=[migrate]))
    """)
    code, document = check_json(root)
    assert code == 0, document["error"]


def test_an_invoke_with_a_parent_is_answered(tmp_path):
    root = python_twin(tmp_path, """
        import pulumi
        import pulumi_gcp as gcp

        group = pulumi.ComponentResource("team:index:Group", "group")
        orders = gcp.pubsub.Topic("orders", name="orders", opts=pulumi.ResourceOptions(parent=group))
        policy = gcp.organizations.get_iam_policy(bindings=[{"role": "roles/pubsub.publisher", "members": ["allUsers"]}],
                                                  opts=pulumi.InvokeOptions(parent=group))
        gcp.pubsub.TopicIAMPolicy("orders-policy", topic=orders.name, policy_data=policy.policy_data,
                                  opts=pulumi.ResourceOptions(parent=group))
    """)
    code, document = check_json(root)
    assert code == 1 and mandatory(document) == ["no-public-pubsub-iam"]
