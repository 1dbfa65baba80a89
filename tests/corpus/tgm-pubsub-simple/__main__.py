# Written here after the shape of terraform-google-modules/terraform-google-pubsub examples/simple/main.tf
"""A schema-checked topic with two push and two pull subscriptions, and the token-creator grant
the Pub/Sub agent needs for authenticated push."""
import json

import pulumi
import pulumi_gcp as gcp

project_id = pulumi.Config().require("project_id")
agent = gcp.organizations.get_project(project_id=project_id)
agent_member = f"serviceAccount:service-{agent.number}@gcp-sa-pubsub.iam.gserviceaccount.com"

TWO_WEEKS = "1209600s"
app_url = f"https://{project_id}.appspot.com/"

record = {"type": "record", "name": "Avro",
          "fields": [{"name": "StringField", "type": "string"}, {"name": "IntField", "type": "int"}]}
schema = gcp.pubsub.Schema("record-schema", project=project_id, name="example", type="AVRO",
                           definition=json.dumps(record, indent=2))

topic = gcp.pubsub.Topic(
    "main-topic",
    project=project_id,
    name="cft-tf-pubsub-topic",
    labels={"foo_label": "foo_value", "bar_label": "bar_value"},
    schema_settings=gcp.pubsub.TopicSchemaSettingsArgs(schema=schema.id, encoding="JSON"),
    opts=pulumi.ResourceOptions(depends_on=[schema]),
)

# (name, push endpoint or None, ack seconds, ttl, (min, max) backoff, exactly-once)
plan = [
    ("push", app_url, 20, TWO_WEEKS, None, None),
    ("push-default-expiration", app_url, 10, None, None, None),
    ("pull", None, 10, None, None, True),
    ("pull2", None, 10, TWO_WEEKS, ("10s", "600s"), None),
]

pushers = []
for name, endpoint, ack, ttl, backoff, exactly_once in plan:
    sub = gcp.pubsub.Subscription(
        f"sub-{name}",
        project=project_id,
        name=name,
        topic=topic.name,
        labels={},
        ack_deadline_seconds=ack,
        enable_exactly_once_delivery=exactly_once,
        expiration_policy=ttl and gcp.pubsub.SubscriptionExpirationPolicyArgs(ttl=ttl),
        retry_policy=backoff and gcp.pubsub.SubscriptionRetryPolicyArgs(
            minimum_backoff=backoff[0], maximum_backoff=backoff[1]),
        push_config=endpoint and gcp.pubsub.SubscriptionPushConfigArgs(
            push_endpoint=endpoint, attributes={"x-goog-version": "v1"}),
        opts=pulumi.ResourceOptions(depends_on=[topic]),
    )
    if endpoint:
        pushers.append(sub)

gcp.projects.IAMMember("agent-token-creator", project=project_id, member=agent_member,
                       role="roles/iam.serviceAccountTokenCreator",
                       opts=pulumi.ResourceOptions(depends_on=pushers))
