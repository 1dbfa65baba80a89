"""terraform-google-modules/terraform-google-pubsub, examples/simple/main.tf, in Python.

The example calls the module (main.tf of the repository root); the module's resources for these inputs
are written out below, each with the module resource it comes from. provider "google" { region } is the
stack's gcp:region; var.project_id is the config value project_id.
"""
import pulumi
import pulumi_gcp as gcp

project_id = pulumi.Config().require("project_id")

# module inputs
topic = "cft-tf-pubsub-topic"
topic_labels = {
    "foo_label": "foo_value",
    "bar_label": "bar_value",
}
pull_subscriptions = [
    {"name": "pull", "ack_deadline_seconds": 10, "enable_exactly_once_delivery": True},
    {"name": "pull2", "minimum_backoff": "10s", "maximum_backoff": "600s", "expiration_policy": "1209600s"},  # two weeks
]
push_subscriptions = [
    {"name": "push", "push_endpoint": f"https://{project_id}.appspot.com/", "x-goog-version": "v1beta1",
     "ack_deadline_seconds": 20, "expiration_policy": "1209600s"},  # two weeks
    {"name": "push-default-expiration", "push_endpoint": f"https://{project_id}.appspot.com/",
     "x-goog-version": "v1beta1"},
]
schema = {
    "name": "example",
    "type": "AVRO",
    "encoding": "JSON",
    "definition": "{\n  \"type\" : \"record\",\n  \"name\" : \"Avro\",\n  \"fields\" : [\n    {\n      \"name\" : \"StringField\",\n      \"type\" : \"string\"\n    },\n    {\n      \"name\" : \"IntField\",\n      \"type\" : \"int\"\n    }\n  ]\n}\n",
}
subscription_labels = {}  # module default

# module: data "google_project" "project", locals
project = gcp.organizations.get_project(project_id=project_id)
default_ack_deadline_seconds = 10
pubsub_svc_account_email = f"service-{project.number}@gcp-sa-pubsub.iam.gserviceaccount.com"

# module: google_pubsub_schema.schema
schema_resource = gcp.pubsub.Schema("schema",
    project=project_id,
    name=schema["name"],
    type=schema["type"],
    definition=schema["definition"])

# module: google_pubsub_topic.topic
topic_resource = gcp.pubsub.Topic("topic",
    project=project_id,
    name=topic,
    labels=topic_labels,
    schema_settings={
        "schema": schema_resource.id,
        "encoding": schema["encoding"],
    },
    opts=pulumi.ResourceOptions(depends_on=[schema_resource]))


def _expiration(sub):
    return {"ttl": sub["expiration_policy"]} if sub.get("expiration_policy") is not None else None


def _retry(sub):
    if sub.get("maximum_backoff") is None:
        return None
    return {
        "maximum_backoff": sub["maximum_backoff"],
        "minimum_backoff": sub["minimum_backoff"] if sub.get("minimum_backoff") is not None else "5",
    }


# module: google_pubsub_subscription.push_subscriptions (for_each)
push_resources = []
for sub in push_subscriptions:
    push_resources.append(gcp.pubsub.Subscription(f"push_subscriptions-{sub['name']}",
        name=sub["name"],
        topic=topic_resource.name,
        project=project_id,
        labels=subscription_labels,
        ack_deadline_seconds=sub.get("ack_deadline_seconds") if sub.get("ack_deadline_seconds") is not None else default_ack_deadline_seconds,
        expiration_policy=_expiration(sub),
        retry_policy=_retry(sub),
        push_config={
            "push_endpoint": sub["push_endpoint"],
            "attributes": {
                "x-goog-version": "x-goog-version" if sub.get("minimum_backoff") is not None else "v1",
            },
        },
        opts=pulumi.ResourceOptions(depends_on=[topic_resource])))

# module: google_pubsub_subscription.pull_subscriptions (for_each)
for sub in pull_subscriptions:
    gcp.pubsub.Subscription(f"pull_subscriptions-{sub['name']}",
        name=sub["name"],
        topic=topic_resource.name,
        project=project_id,
        labels=subscription_labels,
        enable_exactly_once_delivery=sub.get("enable_exactly_once_delivery"),
        ack_deadline_seconds=sub.get("ack_deadline_seconds") if sub.get("ack_deadline_seconds") is not None else default_ack_deadline_seconds,
        expiration_policy=_expiration(sub),
        retry_policy=_retry(sub),
        opts=pulumi.ResourceOptions(depends_on=[topic_resource]))

# module: google_project_iam_member.token_creator_binding (grant_token_creator defaults to true)
gcp.projects.IAMMember("token_creator_binding",
    project=project_id,
    role="roles/iam.serviceAccountTokenCreator",
    member=f"serviceAccount:{pubsub_svc_account_email}",
    opts=pulumi.ResourceOptions(depends_on=push_resources))
