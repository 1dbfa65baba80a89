"""Rejected by `ack-deadline-in-range`: An ack deadline of 5 s: Pub/Sub accepts 10..600 s."""

import pulumi_gcp as gcp

topic = gcp.pubsub.Topic("orders", name="orders")
gcp.pubsub.Subscription("orders-worker", name="orders-worker", topic=topic.id, ack_deadline_seconds=5)
