# Written here after the shape of terraform-google-modules/terraform-google-pubsub examples/subscriptions_only/main.tf
"""Subscriptions in one project on a topic that lives in another (the publisher's)."""
import pulumi
import pulumi_gcp as gcp

cfg = pulumi.Config()
home = cfg.require("project_id")
publisher_project = cfg.require("topic_project")

shared = gcp.pubsub.Topic("shared-topic", project=publisher_project, name="terraform-test-topic")

home_number = gcp.organizations.get_project(project_id=home).number
pubsub_agent = f"service-{home_number}@gcp-sa-pubsub.iam.gserviceaccount.com"


def subscribe(name: str, ack: int, **extra) -> gcp.pubsub.Subscription:
    """One subscription of the home project on the shared topic's full id."""
    return gcp.pubsub.Subscription(f"{name}-on-shared", project=home, name=name, topic=shared.id,
                                   labels={}, ack_deadline_seconds=ack, **extra)


pushed = subscribe("push", 20,
                   expiration_policy={"ttl": f"{14 * 24 * 3600}s"},
                   push_config={"push_endpoint": f"https://{home}.appspot.com/",
                                "attributes": {"x-goog-version": "v1"}})
subscribe("pull", 10)

gcp.projects.IAMMember("push-token-creator", project=home, role="roles/iam.serviceAccountTokenCreator",
                       member="serviceAccount:" + pubsub_agent,
                       opts=pulumi.ResourceOptions(depends_on=[pushed]))
