# Written here after the shape of GoogleCloudPlatform/cloud-foundation-fabric modules/pubsub/README.md ("Simple topic with IAM", "Subscriptions with IAM")
"""Two topics with authoritative IAM: one granted on the topic itself, one on its subscription."""
import pulumi

from access import TopicWithAccess

cfg = pulumi.Config()
project = cfg.require("project_id")
robot = "serviceAccount:" + cfg.require_object("service_account")["email"]

TopicWithAccess(
    "granted-topic",
    project=project,
    topic="my-topic",
    aliases={"mygroup": "group:" + cfg.require("group_email")},
    topic_roles={"roles/pubsub.viewer": ["$mygroup"], "roles/pubsub.subscriber": [robot]},
)

TopicWithAccess(
    "granted-subscription",
    project=project,
    topic="my-topic-subs",
    subscriptions={"test-1": {"roles/pubsub.subscriber": [robot]}},
)
