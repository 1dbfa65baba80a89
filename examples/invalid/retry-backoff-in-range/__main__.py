"""Rejected by `retry-backoff-in-range`: A retry minimum backoff above the maximum."""

import pulumi_gcp as gcp

topic = gcp.pubsub.Topic("orders", name="orders")
gcp.pubsub.Subscription(
    "orders-worker",
    name="orders-worker",
    topic=topic.id,
    retry_policy=gcp.pubsub.SubscriptionRetryPolicyArgs(minimum_backoff="60s", maximum_backoff="30s"),
)
