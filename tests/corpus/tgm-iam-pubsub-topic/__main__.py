# Written here after the shape of terraform-google-modules/terraform-google-iam examples/pubsub_topic/main.tf
"""Authoritative IAM on two topics the stack does not own: one TopicIAMBinding per topic and role."""
import pulumi
import pulumi_gcp as gcp

from role_table import cells

settings = pulumi.Config()
who = ["serviceAccount:" + settings.require("sa_email"),
       "group:" + settings.require("group_email"),
       "user:" + settings.require("user_email")]

for key, (topic, role, members) in sorted(cells(
        [settings.require("pubsub_topic_one"), settings.require("pubsub_topic_two")],
        {"roles/pubsub.publisher": who, "roles/pubsub.viewer": who}).items()):
    gcp.pubsub.TopicIAMBinding(f"topic-binding-{key}", project=settings.require("pubsub_topic_project"),
                               topic=topic, role=role, members=members)
