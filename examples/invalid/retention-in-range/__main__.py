"""Rejected by `retention-in-range`: Five minutes of retention: Pub/Sub keeps messages 10 minutes..31 days."""

import pulumi_gcp as gcp

topic = gcp.pubsub.Topic("orders", name="orders")
gcp.pubsub.Subscription("orders-worker", name="orders-worker", topic=topic.id, message_retention_duration="300s")
