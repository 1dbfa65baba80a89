"""terraform-google-modules/terraform-google-iam, examples/pubsub_subscription/main.tf, in Python.

module "pubsub_subscription_iam_binding" (modules/pubsub_subscriptions_iam, which runs modules/helper) is written
out below.
"""
import pulumi
import pulumi_gcp as gcp

from helper import helper

config = pulumi.Config()
pubsub_subscription_project = config.require("pubsub_subscription_project")
pubsub_subscription_one = config.require("pubsub_subscription_one")
pubsub_subscription_two = config.require("pubsub_subscription_two")
sa_email = config.require("sa_email")
group_email = config.require("group_email")
user_email = config.require("user_email")


def pubsub_subscriptions_iam(project, pubsub_subscriptions, mode, bindings):
    """modules/pubsub_subscriptions_iam/main.tf"""
    h = helper(bindings=bindings, mode=mode, entities=pubsub_subscriptions)
    for key in h["set_authoritative"]:
        b = h["bindings_authoritative"][key]
        # google_pubsub_subscription_iam_binding.pubsub_subscription_iam_authoritative[key]
        gcp.pubsub.SubscriptionIAMBinding(f"pubsub_subscription_iam_authoritative-{key}",
            project=project,
            subscription=b["name"],
            role=b["role"],
            members=b["members"])
    for key in h["set_additive"]:
        b = h["bindings_additive"][key]
        # google_pubsub_subscription_iam_member.pubsub_subscription_iam_additive[key]
        gcp.pubsub.SubscriptionIAMMember(f"pubsub_subscription_iam_additive-{key}",
            project=project,
            subscription=b["name"],
            role=b["role"],
            member=b["member"])


# module "pubsub_subscription_iam_binding"
pubsub_subscriptions_iam(
    project=pubsub_subscription_project,
    pubsub_subscriptions=[pubsub_subscription_one, pubsub_subscription_two],
    mode="additive",
    bindings={
        "roles/pubsub.viewer": [
            f"serviceAccount:{sa_email}",
            f"group:{group_email}",
            f"user:{user_email}",
        ],
        "roles/pubsub.editor": [
            f"serviceAccount:{sa_email}",
            f"group:{group_email}",
            f"user:{user_email}",
        ],
    })
