"""Rejected by `durations-api-format`: retention written as "7d", which the Pub/Sub API rejects."""

import pulumi_gcp as gcp

topic = gcp.pubsub.Topic("orders", name="orders")
gcp.pubsub.Subscription("orders-worker", name="orders-worker", topic=topic.id, message_retention_duration="7d")
