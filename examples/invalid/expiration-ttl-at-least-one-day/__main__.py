"""Rejected by `expiration-ttl-at-least-one-day`: An expiration TTL of one hour: the minimum is one day (or never)."""

import pulumi_gcp as gcp

topic = gcp.pubsub.Topic("orders", name="orders")
gcp.pubsub.Subscription(
    "orders-worker",
    name="orders-worker",
    topic=topic.id,
    expiration_policy=gcp.pubsub.SubscriptionExpirationPolicyArgs(ttl="3600s"),
)
