"""Rejected by `iam-authoritative-conflict`: an authoritative IAM policy and an IAM member on the same topic
overwrite each other on every update."""

import pulumi_gcp as gcp

topic = gcp.pubsub.Topic("orders", name="orders")
viewers = gcp.organizations.get_iam_policy(
    bindings=[gcp.organizations.GetIAMPolicyBindingArgs(role="roles/pubsub.viewer", members=["group:ops@example.com"])]
)
gcp.pubsub.TopicIAMPolicy("orders-policy", topic=topic.name, policy_data=viewers.policy_data)
gcp.pubsub.TopicIAMMember("orders-publisher", topic=topic.name, role="roles/pubsub.publisher",
                          member="serviceAccount:app@example-project.iam.gserviceaccount.com")
