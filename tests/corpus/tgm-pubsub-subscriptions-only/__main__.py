"""terraform-google-modules/terraform-google-pubsub, examples/subscriptions_only/main.tf, in Python.

The topic lives in var.topic_project; the module (create_topic = false) makes the subscriptions in
var.project_id on that topic's id (projects/<topic_project>/topics/terraform-test-topic).
"""
import pulumi
import pulumi_gcp as gcp

config = pulumi.Config()
project_id = config.require("project_id")
topic_project = config.require("topic_project")

example = gcp.pubsub.Topic("example",
    name="terraform-test-topic",
    project=topic_project)

# module inputs
topic = example.id
pull_subscriptions = [
    {"name": "pull", "ack_deadline_seconds": 10},
]
push_subscriptions = [
    {"name": "push", "push_endpoint": f"https://{project_id}.appspot.com/", "x-goog-version": "v1beta1",
     "ack_deadline_seconds": 20, "expiration_policy": "1209600s"},  # two weeks
]
subscription_labels = {}  # module default

# module: data "google_project" "project", locals
project = gcp.organizations.get_project(project_id=project_id)
default_ack_deadline_seconds = 10
pubsub_svc_account_email = f"service-{project.number}@gcp-sa-pubsub.iam.gserviceaccount.com"

# module: google_pubsub_subscription.push_subscriptions (create_topic = false: topic = var.topic)
push_resources = []
for sub in push_subscriptions:
    push_resources.append(gcp.pubsub.Subscription(f"push_subscriptions-{sub['name']}",
        name=sub["name"],
        topic=topic,
        project=project_id,
        labels=subscription_labels,
        ack_deadline_seconds=sub.get("ack_deadline_seconds") if sub.get("ack_deadline_seconds") is not None else default_ack_deadline_seconds,
        expiration_policy={"ttl": sub["expiration_policy"]} if sub.get("expiration_policy") is not None else None,
        push_config={
            "push_endpoint": sub["push_endpoint"],
            "attributes": {"x-goog-version": "v1"},
        }))

# module: google_pubsub_subscription.pull_subscriptions
for sub in pull_subscriptions:
    gcp.pubsub.Subscription(f"pull_subscriptions-{sub['name']}",
        name=sub["name"],
        topic=topic,
        project=project_id,
        labels=subscription_labels,
        ack_deadline_seconds=sub.get("ack_deadline_seconds") if sub.get("ack_deadline_seconds") is not None else default_ack_deadline_seconds)

# module: google_project_iam_member.token_creator_binding (grant_token_creator defaults to true)
gcp.projects.IAMMember("token_creator_binding",
    project=project_id,
    role="roles/iam.serviceAccountTokenCreator",
    member=f"serviceAccount:{pubsub_svc_account_email}",
    opts=pulumi.ResourceOptions(depends_on=push_resources))
