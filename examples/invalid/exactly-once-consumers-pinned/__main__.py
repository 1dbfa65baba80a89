"""Rejected by `exactly-once-consumers-pinned`: an exactly-once subscription whose consumers are pinned to a
region the topic may not store messages in."""

import pulumi_gcp as gcp

topic = gcp.pubsub.Topic(
    "orders",
    name="orders",
    message_storage_policy=gcp.pubsub.TopicMessageStoragePolicyArgs(allowed_persistence_regions=["us-east1"]),
)
gcp.pubsub.Subscription(
    "orders-exactly-once",
    name="orders-exactly-once",
    topic=topic.id,
    enable_exactly_once_delivery=True,
    ack_deadline_seconds=60,
    labels={"pubsubguard-consumer-region": "europe-west1"},
)
