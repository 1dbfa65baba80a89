"""Rejected by `exactly-once-consumers-pinned`: An exactly-once subscription whose consumers are not pinned to one region."""

import pulumi_gcp as gcp

topic = gcp.pubsub.Topic("orders", name="orders")
gcp.pubsub.Subscription(
    "orders-exactly-once",
    name="orders-exactly-once",
    topic=topic.id,
    enable_exactly_once_delivery=True,
    ack_deadline_seconds=60,
)
