# Written here after the shape of terraform-google-modules/terraform-google-iam examples/pubsub_subscription/main.tf
"""Additive IAM on two subscriptions the stack does not own: one SubscriptionIAMMember per principal and role."""
import pulumi
import pulumi_gcp as gcp

from grants import one_per_principal

cfg = pulumi.Config()
owner_project = cfg.require("pubsub_subscription_project")
readers = [f"serviceAccount:{cfg.require('sa_email')}", f"group:{cfg.require('group_email')}",
           f"user:{cfg.require('user_email')}"]
targets = [cfg.require("pubsub_subscription_one"), cfg.require("pubsub_subscription_two")]

for grant in one_per_principal(targets, {"roles/pubsub.viewer": readers, "roles/pubsub.editor": readers}):
    gcp.pubsub.SubscriptionIAMMember(f"sub-member-{grant.key}", project=owner_project,
                                     subscription=grant.target, role=grant.role, member=grant.principal)
