"""Rejected by `pubsub-names-valid`: A topic name starting with 'goog', which Pub/Sub reserves."""

import pulumi_gcp as gcp

topic = gcp.pubsub.Topic("goog-orders", name="goog-orders")
gcp.pubsub.Subscription("orders-worker", name="orders-worker", topic=topic.id)
