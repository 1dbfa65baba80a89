"""terraform-google-modules/terraform-google-iam, examples/pubsub_topic/main.tf, in Python.

module "pubsub_topic_iam_binding" (modules/pubsub_topics_iam, which runs modules/helper) is written out below.
"""
import pulumi
import pulumi_gcp as gcp

from helper import helper

config = pulumi.Config()
pubsub_topic_project = config.require("pubsub_topic_project")
pubsub_topic_one = config.require("pubsub_topic_one")
pubsub_topic_two = config.require("pubsub_topic_two")
sa_email = config.require("sa_email")
group_email = config.require("group_email")
user_email = config.require("user_email")


def pubsub_topics_iam(project, pubsub_topics, mode, bindings):
    """modules/pubsub_topics_iam/main.tf"""
    h = helper(bindings=bindings, mode=mode, entities=pubsub_topics)
    for key in h["set_authoritative"]:
        b = h["bindings_authoritative"][key]
        # google_pubsub_topic_iam_binding.pubsub_topic_iam_authoritative[key]
        gcp.pubsub.TopicIAMBinding(f"pubsub_topic_iam_authoritative-{key}",
            project=project,
            topic=b["name"],
            role=b["role"],
            members=b["members"])
    for key in h["set_additive"]:
        b = h["bindings_additive"][key]
        # google_pubsub_topic_iam_member.pubsub_topic_iam_additive[key]
        gcp.pubsub.TopicIAMMember(f"pubsub_topic_iam_additive-{key}",
            project=project,
            topic=b["name"],
            role=b["role"],
            member=b["member"])


# module "pubsub_topic_iam_binding"
pubsub_topics_iam(
    project=pubsub_topic_project,
    pubsub_topics=[pubsub_topic_one, pubsub_topic_two],
    mode="authoritative",
    bindings={
        "roles/pubsub.publisher": [
            f"serviceAccount:{sa_email}",
            f"group:{group_email}",
            f"user:{user_email}",
        ],
        "roles/pubsub.viewer": [
            f"serviceAccount:{sa_email}",
            f"group:{group_email}",
            f"user:{user_email}",
        ],
    })
